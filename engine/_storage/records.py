"""Plain records passed between the runtime and storage (rows and JSON text, no Flow classes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.attribute import IndexType

RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CANCELED = "CANCELED"
TERMINATED = "TERMINATED"
TIMED_OUT = "TIMED_OUT"

STEP_PENDING = "PENDING"
STEP_COMPLETED = "COMPLETED"
STEP_FAILED = "FAILED"
STEP_CANCELED = "CANCELED"

PHASE_WAIT_FOR = "WAIT_FOR"
PHASE_EXECUTE = "EXECUTE"


@dataclass(frozen=True)
class IndexWrite:
    """The search value an indexed Attribute write sets under ``key``; ``value`` None removes it.

    ``value`` is the JSON shown in FlowInfo; the typed fields are what queries compare: ``text``
    (KEYWORD, FULL_TEXT), ``number`` (INT, BOOL as 0/1, DATETIME in microseconds), ``real``
    (DOUBLE) and ``items`` (KEYWORD_ARRAY elements).
    """

    key: str
    type: IndexType
    value: str | None
    text: str | None = None
    number: int | None = None
    real: float | None = None
    items: tuple[str, ...] = ()


@dataclass(frozen=True)
class AttributeWrite:
    """One staged write: ``value`` is JSON text, or None to delete; ``blob`` for hard-delete.

    ``index`` is set when the Attribute is indexed: the search value the write sets or removes.
    """

    name: str
    instance: str
    value: str | None
    blob: bool = False
    index: IndexWrite | None = None


@dataclass(frozen=True)
class NewStep:
    """A Step execution to create."""

    id: str
    step_type: str
    input: str
    phase: str
    due_at: int | None = None


@dataclass(frozen=True)
class RunInfo:
    """The columns of a run that callers need."""

    run_id: str
    flow_id: str
    flow_type: str
    status: str
    input: str
    request_id: str | None
    started_at: int
    closed_at: int | None
    timeout_at: int | None
    error_type: str | None
    error_message: str | None

    @property
    def is_running(self) -> bool:
        """Return True while the run is open."""
        return self.status == RUNNING


@dataclass(frozen=True)
class StoredValue:
    """A stored Attribute value: JSON text, or a reference to a hard-delete blob."""

    value: str | None
    blob: bool


@dataclass(frozen=True)
class Snapshot:
    """A run plus the Attribute rows one statement read with it."""

    run: RunInfo
    values: dict[tuple[str, str], StoredValue] = field(default_factory=dict)


@dataclass(frozen=True)
class ActiveStepRecord:
    """A Step execution that is still active, as recovery reads it."""

    id: str
    run_id: str
    flow_id: str
    flow_type: str
    step_type: str
    input: str
    phase: str
    attempt: int
    due_at: int | None


@dataclass
class Effects:
    """Durable effects of one handler, committed together in the seed's order."""

    writes: list[AttributeWrite] = field(default_factory=list)
    new_steps: list[NewStep] = field(default_factory=list)
    cancel_step_types: list[str] = field(default_factory=list)
    history: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def is_empty(self) -> bool:
        """Return True when committing would change nothing but history."""
        return not (self.writes or self.new_steps or self.cancel_step_types)


@dataclass(frozen=True)
class StepOutcome:
    """How a Step attempt ended, as the commit unit records it."""

    kind: str  # a DecisionKind value, or "FAILED"
    output: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    is_completion: bool = False


@dataclass(frozen=True)
class CommitResult:
    """What a commit changed that the runtime must act on afterwards."""

    run_id: str
    canceled_step_ids: tuple[str, ...] = ()
    new_steps: tuple[NewStep, ...] = ()
    closed_status: str | None = None
