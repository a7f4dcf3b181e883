"""Table definitions (SQLModel) shared by SQLite and PostgreSQL.

Times are integer microseconds since the epoch so that both dialects compare and order them the
same way. JSON values are stored as text; the engine decodes them with their declared types.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Text
from sqlmodel import Field, SQLModel

metadata = SQLModel.metadata


class FlowRow(SQLModel, table=True):
    """One row per Flow ID, pointing at its latest run."""

    __tablename__ = "flows"

    flow_id: str = Field(primary_key=True)
    flow_type: str
    latest_run_id: str


class RunRow(SQLModel, table=True):
    """One run of a Flow ID."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_flow_started", "flow_id", "started_at"),
        Index("ix_runs_status", "status"),
    )

    run_id: str = Field(primary_key=True)
    flow_id: str
    flow_type: str
    status: str
    input: str = Field(sa_column=Column(Text, nullable=False))
    request_id: str | None = None
    started_at: int = Field(sa_column=Column(BigInteger, nullable=False))
    closed_at: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    timeout_at: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    error_type: str | None = None
    error_message: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class AttributeRow(SQLModel, table=True):
    """One row per singleton Attribute (instance "") and per AttributeMap instance of a run.

    ``blob`` marks a hard-delete value whose bytes live only in the blob store.
    """

    __tablename__ = "attributes"

    # Key order (run, instance, name) makes "all singletons of a run" (instance "") and one
    # exact map instance both prefix lookups, so a snapshot never scans a run's whole map.
    run_id: str = Field(primary_key=True)
    instance: str = Field(primary_key=True, default="")
    name: str = Field(primary_key=True)
    value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    blob: bool = False
    updated_at: int = Field(sa_column=Column(BigInteger, nullable=False))


class StepExecutionRow(SQLModel, table=True):
    """One Step execution. Active states are PENDING (ready, or due at ``due_at``)."""

    __tablename__ = "step_executions"
    __table_args__ = (Index("ix_steps_run_state", "run_id", "state"), Index("ix_steps_state", "state"))

    id: str = Field(primary_key=True)
    run_id: str
    step_type: str
    input: str = Field(sa_column=Column(Text, nullable=False))
    state: str
    phase: str
    attempt: int = 1
    due_at: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    created_at: int = Field(sa_column=Column(BigInteger, nullable=False))
    closed_at: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    is_completion: bool = False
    output: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    error_type: str | None = None
    error_message: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class HistoryRow(SQLModel, table=True):
    """One event in a run's history, oldest first by ``id``."""

    __tablename__ = "history"
    __table_args__ = (Index("ix_history_run", "run_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str
    event_type: str
    at: int = Field(sa_column=Column(BigInteger, nullable=False))
    details: str = Field(sa_column=Column(Text, nullable=False))


flows = FlowRow.__table__  # type: ignore[attr-defined]
runs = RunRow.__table__  # type: ignore[attr-defined]
attributes = AttributeRow.__table__  # type: ignore[attr-defined]
step_executions = StepExecutionRow.__table__  # type: ignore[attr-defined]
history = HistoryRow.__table__  # type: ignore[attr-defined]
