"""Plain records passed between the runtime and storage (rows and JSON text, no Flow classes).

Every record is a value: nothing changes one after it is made. The ones made for every commit
are plain slotted dataclasses rather than frozen ones, because a frozen dataclass costs several
times more to build and a commit builds several.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from engine._enums import IdReusePolicy, IndexType, RunStatus, SubFlowReusePolicy
from engine._ids import execution_id
from engine._outcomes import OutcomeKind


class StepState(enum.StrEnum):
    """The state of a Step execution; PENDING is active (ready, or due at ``due_at``)."""

    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


class Phase(enum.StrEnum):
    """Which method of a Step execution runs next (WAITING: its wait has conditions to meet)."""

    WAIT_FOR = "WAIT_FOR"
    WAITING = "WAITING"
    EXECUTE = "EXECUTE"


# -- reads ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadPlan:
    """What one invocation reads into its snapshot, besides the run itself.

    ``names`` None reads every singleton Attribute, otherwise only those; ``whole_maps`` reads
    every instance of those AttributeMaps; ``instances`` adds exact (map, instance) rows of
    other maps. Built once per source (a Step phase, an RPC, the timeout handler).
    """

    names: tuple[str, ...] | None = None
    whole_maps: tuple[str, ...] = ()
    instances: tuple[tuple[str, str], ...] = ()
    #: Read the pending count of every Channel queue of the run (the Flow declares Channels).
    channel_sizes: bool = False
    #: Channels and ChannelMaps whose pending messages are read whole.
    channels: tuple[str, ...] = ()
    #: Exact (ChannelMap, instance) queues whose pending messages are read.
    channel_instances: tuple[tuple[str, str], ...] = ()

    def loads_instance(self, name: str, instance: str) -> bool:
        """Return True when the plan reads that AttributeMap instance."""
        return name in self.whole_maps or (name, instance) in self.instances

    def loads_messages(self, name: str, instance: str) -> bool:
        """Return True when the plan reads the pending messages of that queue."""
        return name in self.channels or (name, instance) in self.channel_instances


@dataclass(frozen=True)
class RunInfo:
    """The columns of a run that callers need."""

    run_id: str
    flow_id: str
    flow_type: str
    status: RunStatus
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
        return self.status == RunStatus.RUNNING


#: ``decoded`` of a value nobody decoded.
NOT_DECODED: Any = object()


@dataclass(frozen=True)
class StoredValue:
    """A stored Attribute value: JSON text, or a reference to a hard-delete blob.

    ``decoded`` is the value the text encodes, when the invocation that wrote it handed it on
    (see ``engine._reuse``); storage never sets it.
    """

    value: str | None
    blob: bool
    decoded: Any = field(default=NOT_DECODED, compare=False, repr=False)


@dataclass(frozen=True)
class StoredChannelMessage:
    """A pending Channel message as stored: ID, JSON text, publication time (µs)."""

    message_id: str
    value: str
    published_at: int


@dataclass(frozen=True)
class Snapshot:
    """A run plus the Attribute rows and Channel state one statement read with it.

    ``sizes`` has the pending count of every non-empty queue (when the plan asked for sizes);
    ``messages`` the pending messages, oldest first, of each loaded queue that holds some.
    """

    run: RunInfo
    values: dict[tuple[str, str], StoredValue]
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    messages: dict[tuple[str, str], list[StoredChannelMessage]] = field(default_factory=dict)


# -- writes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexWrite:
    """The search value an indexed Attribute write sets under ``key``; ``value`` None removes it.

    ``value`` is the JSON shown in FlowInfo; the typed fields are what queries compare: ``text``
    (KEYWORD; for FULL_TEXT its tokens, normalized by ``search.fulltext``), ``number`` (INT, BOOL
    as 0/1, DATETIME in microseconds), ``real`` (DOUBLE) and ``items`` (KEYWORD_ARRAY elements).
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
    #: The value ``value`` encodes, when its type lets later invocations share it (see
    #: ``engine._reuse``); only handed-off snapshots use it.
    decoded: Any = field(default=NOT_DECODED, compare=False, repr=False)
    #: A hard-delete Attribute's write or erase (``blob`` says which): its value lives in the
    #: blob store, one per Flow ID, and the change log never keeps it.
    hard_delete: bool = False

    @property
    def key(self) -> str:
        """Return the wire form of the key: ``name`` or ``name/instance``."""
        return f"{self.name}/{self.instance}" if self.instance else self.name


@dataclass(frozen=True)
class ChannelDeletion:
    """A staged deletion of one pending Channel message (best effort for Steps and handlers)."""

    channel: str
    instance: str
    message_id: str


@dataclass(frozen=True)
class ChannelPublication:
    """A staged publication of one Channel message (JSON text)."""

    channel: str
    instance: str
    value: str


@dataclass(slots=True)
class QueuedStep:
    """A pending Step execution waiting for its next attempt, due at ``due_at`` (None: now).

    An attempt above 1 is a retry: it keeps the locks of its phase while it waits.
    ``consumed`` is the JSON of what its wait's winning conditions consumed (for ``execute``).
    ``id`` is ``<run ID>:<StepType>-<n>``; a new execution has ``id`` "" until the commit that
    creates it numbers it (``rows.insert_steps``).
    """

    id: str
    run_id: str
    flow_id: str
    flow_type: str
    step_type: str
    input: str
    phase: Phase
    attempt: int = 1
    due_at: int | None = None
    consumed: str | None = None
    #: The fencing token of this process's claim on the execution (PostgreSQL; 0 on
    #: SQLite): its attempt commits only while the row still carries it.
    fence: int = 0
    #: The attempt was handed back after the runtime itself failed (not its handler): it runs
    #: again later and keeps the locks it holds meanwhile (this process's memory only).
    returned: bool = False
    #: A retry's lock keys (attempt above 1), recorded with it: see ``rows.requeue_step``.
    held_locks: tuple[str, ...] = ()
    #: The ID was given by the commit that creates the execution: when that commit is
    #: replayed (its group commit rolled back for a neighbour's failure), it numbers it again.
    numbered: bool = False

    @property
    def keeps_locks(self) -> bool:
        """Return True for a retry or a returned attempt: it holds its phase's locks while
        queued."""
        return self.attempt > 1 or self.returned

    @property
    def execution_id(self) -> str:
        """Return the Step execution ID callers see: ``<StepType>-<n>``."""
        return execution_id(self.id)


@dataclass(slots=True)
class StepClose:
    """A Step attempt's decision (or final failure): it closes the execution."""

    step_id: str
    step_type: str
    attempt: int
    kind: OutcomeKind
    output: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    #: The phase whose method decided (a wait_for may fail for good before any execute).
    phase: Phase = Phase.EXECUTE
    #: A final failure's traceback, bounded (see ``failures.traceback_text``).
    traceback: str | None = None

    @property
    def is_completion(self) -> bool:
        """Return True when the decision records a completion."""
        return self.kind.is_completion


@dataclass(slots=True)
class EnterExecute:
    """A ``wait_for`` result: ``step`` is the execution's first ``execute`` attempt, due when
    its wait ends."""

    step: QueuedStep

    @property
    def step_id(self) -> str:
        """Return the Step execution ID."""
        return self.step.id


@dataclass(slots=True)
class RunClose:
    """Close the run with ``status`` (a stop or a Flow timeout)."""

    status: RunStatus
    error_type: str | None = None
    error_message: str | None = None


@dataclass(slots=True)
class SubFlowStart:
    """A child run to start (or attach to) for the SubFlow condition at ``index`` of a wait."""

    index: int
    request: StartRequest
    policy: SubFlowReusePolicy


@dataclass(slots=True)
class EnterWait:
    """A ``wait_for`` result with Channel or SubFlow conditions: ``step`` (phase WAITING) waits
    durably on ``spec``, the condition tree as JSON data with the wait's start time; its
    ``subflows`` start in the same commit."""

    step: QueuedStep
    spec: dict[str, Any]
    subflows: tuple[SubFlowStart, ...] = ()

    @property
    def step_id(self) -> str:
        """Return the Step execution ID."""
        return self.step.id


#: What comes last in a commit; None for an RPC, whose result is control flow of its caller.
Decision = StepClose | EnterExecute | EnterWait | RunClose | None

#: The positional arguments of a statement run on its own (see ``step_moves``).
Args = tuple[Any, ...]


@dataclass(slots=True)
class StagedEffects:
    """Every durable effect of one handler invocation, committed together.

    :func:`engine._storage.apply.apply_effects` applies them in Dex's order: Attribute
    writes, best-effort Channel deletions, Channel publications, cancellations, next Steps,
    then the decision. ``output`` is an RPC's validated output, returned once committed.
    Which kinds of effects a commit has is asked here and nowhere else (:meth:`changes_state`,
    :meth:`writes_only`, :meth:`decision_only`).
    """

    writes: tuple[AttributeWrite, ...] = ()
    channel_deletions: tuple[ChannelDeletion, ...] = ()
    channel_publications: tuple[ChannelPublication, ...] = ()
    cancel_step_types: tuple[str, ...] = ()
    next_steps: tuple[QueuedStep, ...] = ()
    decision: Decision = None
    output: Any = None
    #: A transactional RPC's deletions must all find their message pending, else nothing
    #: commits (ChannelMessageNotFoundError); elsewhere a missing message is a no-op.
    strict_deletions: bool = False

    def changes_state(self) -> bool:
        """Return True when committing would change more than history."""
        return bool(
            self.writes
            or self.channel_deletions
            or self.channel_publications
            or self.cancel_step_types
            or self.next_steps
            or self.decision is not None
        )

    def writes_only(self) -> bool:
        """Return True when the effects are Attribute writes and nothing else (no Channel
        work, cancellation, next Step or decision)."""
        return bool(self.writes) and not (
            self._channel_work()
            or self.cancel_step_types
            or self.next_steps
            or self.decision is not None
        )

    def decision_only(self) -> bool:
        """Return True when the effects are a decision with its next Steps and nothing else
        (no Attribute write, Channel work or cancellation)."""
        return self.decision is not None and not (
            self.writes or self._channel_work() or self.cancel_step_types
        )

    def _channel_work(self) -> bool:
        return bool(self.channel_deletions or self.channel_publications)


@dataclass(slots=True)
class StartRequest:
    """A new run to create, with its initial Attributes and start Step, honouring ID reuse."""

    flow_id: str
    flow_type: str
    run_id: str
    input: str
    request_id: str | None
    id_reuse_policy: IdReusePolicy
    ignore_already_started: bool
    timeout_at: int | None
    writes: tuple[AttributeWrite, ...]
    start_step: QueuedStep | None
    #: The run keeps its change log (time travel): its Flow type did not opt out.
    change_log: bool = True
    #: The Schedule whose action starts the run (the search field ScheduleId), if any.
    schedule_id: str | None = None


# -- commit results ---------------------------------------------------------------------------


@dataclass(slots=True)
class WaitingStep:
    """A Step execution in a durable wait: what the runtime watches to complete it."""

    step: QueuedStep
    spec: dict[str, Any]


@dataclass(slots=True)
class RunChange:
    """What one commit changed in one run: everything the commit's followers act on.

    ``queued_steps`` are pending executions to hand out (new ones, ones entering ``execute``,
    retries); ``ended_step_ids`` are executions that ended (their decision committed, they
    failed for good, or were canceled).
    """

    flow_id: str
    flow_type: str
    run_id: str
    writes: tuple[AttributeWrite, ...] = ()
    queued_steps: tuple[QueuedStep, ...] = ()
    ended_step_ids: tuple[str, ...] = ()
    started: bool = False
    timeout_at: int | None = None
    closed_status: RunStatus | None = None
    #: Queues (channel, instance) that received messages: waits on them may now be ready.
    published: tuple[tuple[str, str], ...] = ()
    #: The IDs the commit gave its publications, in acceptance order.
    message_ids: tuple[str, ...] = ()
    #: Step executions that began a durable wait on Channel conditions.
    waiting: tuple[WaitingStep, ...] = ()


@dataclass(slots=True)
class CommitResult:
    """The outcome of one commit unit: the runs it changed and what it reports to its caller."""

    changes: tuple[RunChange, ...] = ()
    value: Any = None


@dataclass(slots=True)
class StartOutcome:
    """What a start reports: the run it created (``started``) or found."""

    run_id: str
    started: bool
