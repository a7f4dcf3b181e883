"""Table definitions (SQLModel) shared by SQLite and PostgreSQL.

Times are integer microseconds since the epoch so that both dialects compare and order them the
same way. JSON values are stored as text; the engine decodes them with their declared types.
Strings compare and sort by code point on both: SQLite's default BINARY collation does, and on
PostgreSQL every string column gets the "C" collation (see :func:`_by_code_point`).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
    text,
)
from sqlmodel import Field, SQLModel

metadata = SQLModel.metadata


class FlowRow(SQLModel, table=True):
    """One row per Flow ID, pointing at its latest run."""

    __tablename__ = "flows"

    flow_id: str = Field(primary_key=True)
    flow_type: str
    latest_run_id: str = Field(foreign_key="runs.run_id")


class RunRow(SQLModel, table=True):
    """One run of a Flow ID."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_flow_started", "flow_id", "started_at"),
        # SearchFlows' default order (StartTime desc, then run ID), alone and after the two
        # system fields most searches name: ``Status = x`` or ``FlowType = x`` reads its page
        # in order off the index instead of sorting every run that matches.
        Index("ix_runs_status", "status", "started_at", "run_id"),
        Index("ix_runs_type_started", "flow_type", "started_at", "run_id"),
        Index("ix_runs_started", "started_at", "run_id"),
        # Every process of a PostgreSQL database looks for open runs whose timeout is due.
        Index("ix_runs_timeout", "status", "timeout_at"),
        # A Schedule's running actions (its overlap policy, and describeSchedule).
        Index("ix_runs_schedule", "schedule_id", "status"),
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
    #: The number of the run's last commit: each commit that changes the run takes the next
    #: one (``journal``); history events, Step transitions and the change log carry it.
    commit_seq: int = Field(
        default=0, sa_column=Column(BigInteger, nullable=False, server_default=text("0"))
    )
    #: The run keeps its change log (what time travel and as-of reads need); its Flow type
    #: chose so when the run started. Runs made before the log existed have none.
    change_log: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: The Schedule whose action started the run (the search field ScheduleId), if any.
    schedule_id: str | None = None


class AttributeRow(SQLModel, table=True):
    """One row per singleton Attribute (instance "") and per AttributeMap instance of a run.

    ``blob`` marks a hard-delete value whose bytes live only in the blob store.
    """

    __tablename__ = "attributes"

    # Key order (run, instance, name) makes "all singletons of a run" (instance "") and one
    # exact map instance both prefix lookups, so a snapshot never scans a run's whole map.
    run_id: str = Field(primary_key=True, foreign_key="runs.run_id")
    instance: str = Field(primary_key=True, default="")
    name: str = Field(primary_key=True)
    value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    blob: bool = False
    updated_at: int = Field(sa_column=Column(BigInteger, nullable=False))


class StepExecutionRow(SQLModel, table=True):
    """One Step execution. Active states are PENDING (ready, or due at ``due_at``).

    ``id`` is ``<run ID>:<StepType>-<n>``: unique everywhere, and deterministic within a run,
    where the part after the colon is the Step execution ID callers see.
    """

    __tablename__ = "step_executions"
    __table_args__ = (
        Index("ix_steps_run_state", "run_id", "state"),
        Index("ix_steps_state", "state"),
        Index("ix_steps_claimable", "state", "due_at"),
    )

    id: str = Field(primary_key=True)
    run_id: str = Field(foreign_key="runs.run_id")
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
    #: A queued retry's lock keys (JSON list): it keeps them while it waits, and a process
    #: that no longer registers its Step type still holds them for it until the Flow stops.
    held_locks: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    #: PostgreSQL with several processes: the process whose claim runs the next attempt...
    claimed_by: str | None = None
    #: ...and the claim's fencing token, raised by every claim: a commit of an attempt made
    #: under an older claim is refused (SQLite never claims, so it stays 0 there).
    fence: int = Field(
        default=0, sa_column=Column(BigInteger, nullable=False, server_default=text("0"))
    )
    #: The run's commits (``runs.commit_seq``) that created the execution, moved it to its
    #: execute phase, and closed it: which executions were pending, and in which phase,
    #: right after any commit (time travel).
    created_commit: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    execute_commit: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    closed_commit: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))


class StepCounterRow(SQLModel, table=True):
    """How many executions of each Step type a run has created: the ``n`` of the next
    deterministic Step execution ID ``<StepType>-<n>``."""

    __tablename__ = "step_counters"

    run_id: str = Field(primary_key=True, foreign_key="runs.run_id")
    step_type: str = Field(primary_key=True)
    count: int


class SubFlowLinkRow(SQLModel, table=True):
    """Who started a SubFlow run: the parent's Flow ID, run, Step execution and condition index."""

    __tablename__ = "subflow_links"

    child_run_id: str = Field(primary_key=True, foreign_key="runs.run_id")
    parent_flow_id: str = Field(index=True)
    parent_run_id: str = Field(index=True)
    parent_step_execution_id: str
    condition_index: int


class StepWaitRow(SQLModel, table=True):
    """The durable wait of a Step execution on Channel conditions (and Timers).

    ``spec`` is the condition tree as JSON, with the wait's start time; ``consumed`` holds, once
    the wait completed, the values its winning conditions took, for ``results(ctx)``.
    """

    __tablename__ = "step_waits"

    step_id: str = Field(primary_key=True, foreign_key="step_executions.id")
    run_id: str = Field(foreign_key="runs.run_id", index=True)
    spec: str = Field(sa_column=Column(Text, nullable=False))
    consumed: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ChannelMessageRow(SQLModel, table=True):
    """A pending message of a run's Channel (``instance`` "") or ChannelMap instance.

    ``seq`` orders a queue first in, first out (the order commits accepted publications);
    ``message_id`` is the UUIDv7 callers see. A consumed or deleted message's row is gone.
    """

    __tablename__ = "channel_messages"
    # A message ID is unique within its run: a traveled run (or a fork) keeps the IDs of the
    # messages it restores, which the run it came from may still hold.
    __table_args__ = (
        Index("ix_channel_messages_queue", "run_id", "channel", "instance", "seq"),
        UniqueConstraint("run_id", "message_id", name="uq_channel_messages_run_message"),
    )

    # INTEGER PRIMARY KEY on SQLite (the rowid: always above every remaining row), BIGINT
    # identity elsewhere.
    seq: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    message_id: str = Field(sa_column=Column(Text, nullable=False))
    run_id: str = Field(foreign_key="runs.run_id")
    channel: str
    instance: str = ""
    value: str = Field(sa_column=Column(Text, nullable=False))
    published_at: int = Field(sa_column=Column(BigInteger, nullable=False))


class HistoryRow(SQLModel, table=True):
    """One event in a run's history, oldest first by ``id``."""

    __tablename__ = "history"
    __table_args__ = (Index("ix_history_run", "run_id", "id"),)

    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    run_id: str = Field(foreign_key="runs.run_id")
    event_type: str
    at: int = Field(sa_column=Column(BigInteger, nullable=False))
    details: str = Field(sa_column=Column(Text, nullable=False))
    #: The run's commit that wrote the event (``runs.commit_seq``); None before the log existed.
    commit_seq: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))


class ChangeLogRow(SQLModel, table=True):
    """One change a commit made to a run's state: what time travel restores and reapplies.

    ``kind`` is W (an Attribute write; ``value`` None deletes), P (a Channel publication:
    ``message_id``, ``value``, ``at`` its publication time), D (a pending message deleted) or C
    (consumed by a Step's wait). ``external`` marks what came from outside the Flow: an RPC's
    or a client's writes, publications and deletions, which a travel may apply again. Hard-delete
    values are never logged (one value per Flow ID, never restored).
    """

    __tablename__ = "change_log"
    # Written on every commit, read only by travels and as-of reads: keyed by (run, commit,
    # position) and no other index. (Not WITHOUT ROWID on SQLite: logged values are often
    # large, a whole AttributeMap instance, and such rows belong in a rowid table's overflow
    # pages, not in an index B-tree.)

    run_id: str = Field(primary_key=True)
    commit_seq: int = Field(sa_column=Column(BigInteger, primary_key=True))
    pos: int = Field(primary_key=True)
    kind: str
    name: str
    instance: str = ""
    message_id: str | None = None
    value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    at: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    external: bool = False


class SearchValueRow(SQLModel, table=True):
    """The current search value of one index key of a run (an indexed AttributeMap has one).

    ``value`` is the JSON shown in FlowInfo.indexedAttributes; the typed columns are what
    queries compare: ``text_value`` (KEYWORD), ``int_value`` (INT, BOOL as 0/1, DATETIME in
    microseconds), ``real_value`` (DOUBLE). KEYWORD_ARRAY elements and FULL_TEXT text live in
    the two tables below.
    """

    __tablename__ = "search_values"
    # Each index ends with the run's start time and ID, SearchFlows' default order: a search
    # led by one key's equality reads its page straight off the index, however many runs match.
    __table_args__ = (
        Index("ix_search_values_text", "key", "type", "text_value", "started_at", "run_id"),
        Index("ix_search_values_int", "key", "type", "int_value", "started_at", "run_id"),
        Index("ix_search_values_real", "key", "type", "real_value", "started_at", "run_id"),
    )

    run_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    type: str
    value: str = Field(sa_column=Column(Text, nullable=False))
    text_value: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    int_value: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    real_value: float | None = Field(default=None, sa_column=Column(Float, nullable=True))
    #: The run's StartTime (a copy of runs.started_at, which never changes).
    started_at: int = Field(sa_column=Column(BigInteger, nullable=False))


class SearchKeywordRow(SQLModel, table=True):
    """One distinct element of a run's KEYWORD_ARRAY search value."""

    __tablename__ = "search_keywords"
    __table_args__ = (Index("ix_search_keywords_value", "key", "value", "run_id"),)

    run_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    value: str = Field(primary_key=True)


class SearchTextRow(SQLModel, table=True):
    """The text of a run's FULL_TEXT search value; ``search.fulltext`` indexes it by token."""

    __tablename__ = "search_texts"
    __table_args__ = (UniqueConstraint("run_id", "key", name="uq_search_texts_run_key"),)

    # An explicit integer key: the full-text index refers to rows by it, so it must be stable.
    id: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    run_id: str
    key: str
    body: str = Field(sa_column=Column(Text, nullable=False))


class ProcessRow(SQLModel, table=True):
    """A serving process on a PostgreSQL database and its lease.

    The process renews ``lease_expires_at`` (microseconds of the database server's clock);
    once it passes, the process is dead: its Step claims and RPC locks are free to take over.
    """

    __tablename__ = "processes"

    process_id: str = Field(primary_key=True)
    host: str
    pid: int
    started_at: int = Field(sa_column=Column(BigInteger, nullable=False))
    lease_expires_at: int = Field(sa_column=Column(BigInteger, nullable=False))


class ScheduleRow(SQLModel, table=True):
    """A Schedule: its spec (JSON), and where its firing stands.

    ``next_time`` is the earliest scheduled time not acted on yet; the commit that acts on a
    time moves it on, under the row's lock, so each time fires once whichever process gets
    there. ``buffered`` is the time a BUFFER_ONE Schedule holds back until its running action
    closes; ``last_flow_id`` the Flow ID of its latest action (the one overlap looks at).
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_due", "paused", "next_time"),)

    schedule_id: str = Field(primary_key=True)
    flow_type: str
    spec: str = Field(sa_column=Column(Text, nullable=False))
    paused: bool = False
    note: str = Field(default="", sa_column=Column(Text, nullable=False))
    next_time: int = Field(sa_column=Column(BigInteger, nullable=False))
    buffered: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    last_flow_id: str | None = None
    skipped: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    created_at: int = Field(sa_column=Column(BigInteger, nullable=False))
    updated_at: int = Field(sa_column=Column(BigInteger, nullable=False))


class ScheduleActionRow(SQLModel, table=True):
    """A Flow a Schedule started (the last few are kept): its time, start and run."""

    __tablename__ = "schedule_actions"
    __table_args__ = (Index("ix_schedule_actions_schedule", "schedule_id", "seq"),)

    seq: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    schedule_id: str
    scheduled_at: int = Field(sa_column=Column(BigInteger, nullable=False))
    started_at: int = Field(sa_column=Column(BigInteger, nullable=False))
    flow_id: str
    run_id: str


class AttributeLockRow(SQLModel, table=True):
    """An Attribute lock held on a PostgreSQL database: by a Step execution (``owner`` is its ID,
    ``phase`` the phase it holds it for) or by an RPC invocation of ``process_id``.

    A Step's lock lives while its execution is pending in that phase; an RPC's while its
    process's lease does. Rows of ended holders are dead and removed by the next lock change.
    """

    __tablename__ = "attribute_locks"
    __table_args__ = (Index("ix_attribute_locks_owner", "flow_id", "owner"),)

    flow_id: str = Field(primary_key=True)
    lock_key: str = Field(primary_key=True)
    owner: str
    kind: str
    phase: str = ""
    process_id: str


class LockWaiterRow(SQLModel, table=True):
    """A Step attempt waiting for Attribute locks on a PostgreSQL database, first come first served
    by ``seq``; ``lock_keys`` is the JSON list of the lock keys it wants."""

    __tablename__ = "lock_waiters"
    __table_args__ = (Index("ix_lock_waiters_flow", "flow_id", "seq"),)

    seq: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    flow_id: str
    owner: str
    phase: str
    lock_keys: str = Field(sa_column=Column(Text, nullable=False))
    process_id: str


flows = FlowRow.__table__  # type: ignore[attr-defined]
runs = RunRow.__table__  # type: ignore[attr-defined]
attributes = AttributeRow.__table__  # type: ignore[attr-defined]
step_executions = StepExecutionRow.__table__  # type: ignore[attr-defined]
history = HistoryRow.__table__  # type: ignore[attr-defined]
change_log = ChangeLogRow.__table__  # type: ignore[attr-defined]
step_waits = StepWaitRow.__table__  # type: ignore[attr-defined]
step_counters = StepCounterRow.__table__  # type: ignore[attr-defined]
subflow_links = SubFlowLinkRow.__table__  # type: ignore[attr-defined]
channel_messages = ChannelMessageRow.__table__  # type: ignore[attr-defined]
search_values = SearchValueRow.__table__  # type: ignore[attr-defined]
search_keywords = SearchKeywordRow.__table__  # type: ignore[attr-defined]
search_texts = SearchTextRow.__table__  # type: ignore[attr-defined]
processes = ProcessRow.__table__  # type: ignore[attr-defined]
attribute_locks = AttributeLockRow.__table__  # type: ignore[attr-defined]
lock_waiters = LockWaiterRow.__table__  # type: ignore[attr-defined]
schedules = ScheduleRow.__table__  # type: ignore[attr-defined]
schedule_actions = ScheduleActionRow.__table__  # type: ignore[attr-defined]


def _by_code_point(tables: Iterable[Table]) -> None:
    """Give every string column of ``tables`` the "C" collation on PostgreSQL.

    A database's default collation is usually linguistic ('a' < 'B' < 'é' in en-US), which
    would make SearchFlows' comparisons, STARTS_WITH ranges, ORDER BY and page tokens differ
    from SQLite's code-point order. On the columns, not in the queries, so that the indexes
    are built in the order the queries use; on all of them, because PostgreSQL refuses to
    compare two columns of different collations (a join of ``run_id`` columns, say).
    """
    for table in tables:
        for column in table.columns:
            kind = column.type
            # SQLModel's ``str`` columns are AutoString, a decorator around String.
            base = kind.impl_instance if isinstance(kind, TypeDecorator) else kind
            if isinstance(base, String) and base.collation is None:
                column.type = kind.with_variant(type(base)(collation="C"), "postgresql")


_by_code_point(metadata.tables.values())
