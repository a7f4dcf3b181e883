"""What the client API returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class StartFlowResult:
    """The run a start created (``started``) or found (not ``started``)."""

    flow_id: str
    run_id: str
    started: bool


@dataclass(frozen=True)
class FlowInfo:
    """A run's identity, status, times and indexed Attribute values; a SubFlow run also names
    the parent Flow ID and run that started it."""

    flow_id: str
    run_id: str
    flow_type: str
    status: str
    started_at: datetime
    closed_at: datetime | None
    indexed_attributes: dict[str, Any] = field(default_factory=dict)
    parent_flow_id: str | None = None
    parent_run_id: str | None = None


@dataclass(frozen=True)
class StepCompletion:
    """One completion a Step recorded with graceful_complete or force_complete."""

    step_type: str
    step_execution_id: str
    output: Any


@dataclass(frozen=True)
class FlowResult:
    """A run's status and, once closed, its completions or error."""

    flow_id: str
    run_id: str
    status: str
    completions: list[StepCompletion]
    error_type: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class AttributeValues:
    """Attribute values read from one committed state, as JSON data; unset names are absent."""

    flow_id: str
    run_id: str
    values: dict[str, Any]


@dataclass(frozen=True)
class HistoryEvent:
    """One event of a run's history."""

    event_id: int
    event_type: str
    at: datetime
    details: dict[str, Any]


@dataclass(frozen=True)
class HistoryPage:
    """A page of history, oldest first; an empty ``next_page_token`` marks the end."""

    flow_id: str
    run_id: str
    events: list[HistoryEvent]
    next_page_token: str


@dataclass(frozen=True)
class PendingStep:
    """A Step execution of a run that has not closed yet.

    ``phase`` says which method runs next: ``WAIT_FOR``, ``WAITING`` (its Wait has Channel,
    SubFlow or Timer conditions still to meet) or ``EXECUTE``. ``due_at`` is when it runs
    next (None: as soon as it can); with an ``attempt`` above 1 that is a retry's back-off
    ending, with attempt 1 the Timers of a Wait on Timers alone. ``timers``, ``channels``
    (``name`` or ``map/instance``) and ``sub_flows`` (child Flow IDs) are what it waits on.
    """

    step_execution_id: str
    step_type: str
    phase: str
    attempt: int
    created_at: datetime
    due_at: datetime | None
    timers: list[datetime] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    sub_flows: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PendingSteps:
    """The pending Step executions of one run, oldest first (none once the run has closed)."""

    flow_id: str
    run_id: str
    steps: list[PendingStep]


@dataclass(frozen=True)
class SearchPage:
    """A page of SearchFlows results; an empty ``next_page_token`` marks the last page."""

    flows: list[FlowInfo]
    next_page_token: str


@dataclass(frozen=True)
class AttributeMatch:
    """The outcome of WaitForAttributeMatch: the matched current value, or ``matched=False``
    when the wait ended first."""

    matched: bool
    value: Any = None


# -- the registry, described (listFlowTypes) --------------------------------------------------


@dataclass(frozen=True)
class StepTypeDescription:
    """A Step type: its input schema, whether it waits, and the locks of each phase."""

    step_type: str
    input_schema: dict[str, Any]
    has_wait_for: bool
    wait_for_locks: list[str]
    execute_locks: list[str]


@dataclass(frozen=True)
class RPCDescription:
    """An RPC: its input and output JSON schemas, locks, transactionality and timeout."""

    name: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    lock_attributes: list[str]
    is_transactional: bool
    timeout_seconds: float


@dataclass(frozen=True)
class IndexDescription:
    """How an Attribute is searchable: its index type and key."""

    type: str
    key: str | None


@dataclass(frozen=True)
class AttributeDescription:
    """An Attribute or AttributeMap (``kind``) with its value schema and index."""

    name: str
    kind: str
    schema: dict[str, Any]
    hard_delete_on_null: bool
    index: IndexDescription | None


@dataclass(frozen=True)
class StreamDescription:
    """A Stream with its value schema and declared capacity (None: the server's default)."""

    name: str
    schema: dict[str, Any]
    stream_capacity_bytes: int | None


@dataclass(frozen=True)
class FlowTypeDescription:
    """A registered Flow type: its start Step, Steps, RPCs, Attributes and Streams."""

    flow_type: str
    start_step: str | None
    input_schema: dict[str, Any]
    steps: list[StepTypeDescription]
    rpcs: list[RPCDescription]
    attributes: list[AttributeDescription]
    streams: list[StreamDescription]


@dataclass(frozen=True)
class ChannelInfo:
    """A Channel, or a non-empty ChannelMap instance, of a run with its pending count."""

    name: str
    instance: str | None
    size: int


@dataclass(frozen=True)
class ChannelList:
    """The Channels and non-empty ChannelMap instances of one run, with pending counts."""

    flow_id: str
    run_id: str
    channels: list[ChannelInfo]


@dataclass(frozen=True)
class ChannelMessagePage:
    """Pending messages of one queue, oldest first; an empty ``next_page_token`` ends them.

    ``messages`` holds :class:`engine.ChannelMessage` values.
    """

    flow_id: str
    run_id: str
    messages: list[Any]
    next_page_token: str
