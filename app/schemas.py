"""Wire schemas: camelCase JSON, typed request and response models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict
from pydantic.alias_generators import to_camel
from typing_extensions import TypeAliasType

import engine

MAX_TIMEOUT_SECONDS = 10 * 365 * 24 * 3600

_T = TypeVar("_T")
#: A field of a strict model that takes its value in lax mode: an enum from its string value.
Lax = Annotated[_T, Strict(False)]

# Named object shapes, so the document (and the clients generated from it) give each a name
# instead of one anonymous object per field.
AttributeValues = TypeAliasType(
    "AttributeValues",
    Annotated[
        dict[str, Any],
        Field(
            description='Attribute values by key: "name" for an Attribute, "map/instance" for '
            "an AttributeMap instance; each value is JSON of the declared type."
        ),
    ],
)
IndexedAttributes = TypeAliasType(
    "IndexedAttributes",
    Annotated[
        dict[str, Any],
        Field(description="The run's searchable Attribute values by index key (e.g. keyword1)."),
    ],
)
JsonSchema = TypeAliasType(
    "JsonSchema",
    Annotated[
        dict[str, Any], Field(description="A JSON Schema (draft 2020-12) of a declared type.")
    ],
)
HistoryEventDetails = TypeAliasType(
    "HistoryEventDetails",
    Annotated[
        dict[str, Any],
        Field(
            description="What the event records, by eventType: stepType and "
            "stepExecutionId for Step events, attempt, decision, errorType and errorMessage "
            "on STEP_CLOSED, rpcName on RPC_COMMITTED, attributes (the keys written), "
            "channel and messageId(s) for Channel events, flowId and runId for SubFlows."
        ),
    ],
)


class Wire(BaseModel):
    """Base of every wire model: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Request(Wire):
    """Base of request bodies: unknown fields are refused, so typos do not pass silently, and
    values are strict, so what the schema says is what the server takes (``true`` is not an
    integer, ``"7"`` not a number). Enum fields say ``Lax``: JSON carries their values as
    strings, which FastAPI's Python-mode validation would otherwise refuse. Fields are taken
    by their camelCase names only (``flow_type`` beside ``flowType`` is an unknown field)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=False,
        validate_by_alias=True,
        extra="forbid",
        strict=True,
    )


class StartFlowOptionsBody(Request):
    """Options of a Flow start."""

    initial_attributes: AttributeValues = Field(
        default_factory=dict,
        description='Values committed with the start: {"name": v} or {"map/instance": v}.',
    )
    id_reuse_policy: Lax[engine.IdReusePolicy] = engine.IdReusePolicy.ALLOW_DUPLICATE
    timeout_seconds: float | None = Field(
        None, gt=0, le=MAX_TIMEOUT_SECONDS, description="Durable Flow timeout (at most 10 years)."
    )
    request_id: str | None = Field(None, min_length=1, max_length=256)
    ignore_already_started: bool = Field(
        False, description="Answer 200 started=false when this requestId started the run."
    )
    start_delay_seconds: float | None = Field(
        None,
        ge=0,
        le=MAX_TIMEOUT_SECONDS,
        description="The run exists at once; its start Step runs this many seconds later.",
    )


class StartFlowBody(Request):
    """Start a Flow."""

    flow_type: str = Field(min_length=1, max_length=256)
    flow_id: str = Field(min_length=1, max_length=256)
    input: Any = None
    options: StartFlowOptionsBody = Field(default_factory=StartFlowOptionsBody)


class StartFlowResponse(Wire):
    """The run a start created or found."""

    flow_id: str
    run_id: str
    started: bool


class FlowInfoResponse(Wire):
    """A run's identity and status; a SubFlow run names the parent that started it."""

    flow_id: str
    run_id: str
    flow_type: str
    status: engine.RunStatus
    started_at: datetime
    closed_at: datetime | None
    indexed_attributes: IndexedAttributes
    parent_flow_id: str | None = Field(
        description="The Flow ID of the parent whose Step started this run as a SubFlow; "
        "null unless the run is a SubFlow"
    )
    parent_run_id: str | None = Field(
        description="The parent's run that started this run; null unless it is a SubFlow"
    )

    @classmethod
    def of(cls, info: engine.FlowInfo) -> FlowInfoResponse:
        """Return the wire form of an engine FlowInfo."""
        return cls(
            flow_id=info.flow_id,
            run_id=info.run_id,
            flow_type=info.flow_type,
            status=engine.RunStatus(info.status),
            started_at=info.started_at,
            closed_at=info.closed_at,
            indexed_attributes=info.indexed_attributes,
            parent_flow_id=info.parent_flow_id,
            parent_run_id=info.parent_run_id,
        )


class CompletionResponse(Wire):
    """One Step completion."""

    step_type: str
    step_execution_id: str
    output: Any


class FlowResultResponse(Wire):
    """A run's status and, once closed, its completions or error."""

    flow_id: str
    run_id: str
    status: engine.RunStatus
    completions: list[CompletionResponse]
    error_type: str | None
    error_message: str | None

    @classmethod
    def of(cls, result: engine.FlowResult) -> FlowResultResponse:
        """Return the wire form of an engine FlowResult."""
        return cls(
            flow_id=result.flow_id,
            run_id=result.run_id,
            status=result.status,
            completions=[
                CompletionResponse(
                    step_type=c.step_type, step_execution_id=c.step_execution_id, output=c.output
                )
                for c in result.completions
            ],
            error_type=result.error_type,
            error_message=result.error_message,
        )


class StopFlowBody(Request):
    """How to stop a run."""

    type: Lax[engine.StopType] = engine.StopType.CANCEL
    reason: str | None = Field(None, max_length=4096)


class StopFlowResponse(Wire):
    """The run that was stopped."""

    flow_id: str
    run_id: str


class InvokeRpcOptionsBody(Request):
    """Instance loads and locks added to one invocation, each ``"map/instance"``, and how
    long to retry lock conflicts."""

    load_attribute_map_instances: list[str] = Field(default_factory=list)
    lock_attribute_map_instances: list[str] = Field(default_factory=list)
    load_channel_map_instances: list[str] = Field(default_factory=list)
    lock_retry_seconds: float | None = Field(
        None,
        gt=0,
        le=60,
        description="Retry the invocation while its locks are held, for at most this long: "
        "this server's invocations waiting for the same keys take turns in the order they "
        "came, and a holder elsewhere is waited out with a jittered, growing pause. Past it, "
        "409 RPC_LOCK_CONFLICT as usual. Without it a held lock answers 409 at once.",
    )


class InvokeRpcBody(Request):
    """Invoke an RPC."""

    input: Any = None
    run_id: str | None = Field(None, min_length=1, max_length=256)
    options: InvokeRpcOptionsBody = Field(default_factory=InvokeRpcOptionsBody)
    flow_type: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The Flow type the caller expects: a run of another type answers 404 "
        "FLOW_NOT_ACTIVE_OR_NOT_FOUND, as when the Flow has no run (by default the RPC is "
        "looked up in the run's own type).",
    )


class InvokeRpcResponse(Wire):
    """The RPC's output."""

    output: Any


class AttributesResponse(Wire):
    """Attribute values from one committed state; unset names are absent."""

    flow_id: str
    run_id: str
    values: AttributeValues


class SetAttributesBody(Request):
    """Write Attributes (null deletes)."""

    run_id: str | None = Field(None, min_length=1, max_length=256)
    values: AttributeValues


class SetAttributesResponse(Wire):
    """The run that was written."""

    flow_id: str
    run_id: str


class HistoryEventResponse(Wire):
    """One history event."""

    event_id: int
    event_type: engine.HistoryEventType
    at: datetime
    details: HistoryEventDetails

    @classmethod
    def of(cls, event: engine.HistoryEvent) -> HistoryEventResponse:
        """Return the wire form of an engine HistoryEvent."""
        return cls(
            event_id=event.event_id, event_type=event.event_type, at=event.at, details=event.details
        )


class HistoryResponse(Wire):
    """A page of history, oldest first."""

    flow_id: str
    run_id: str
    events: list[HistoryEventResponse]
    next_page_token: str


class PendingStepResponse(Wire):
    """A pending Step execution: which method runs next, its attempt, when it is due and what
    its Wait waits on."""

    step_execution_id: str
    step_type: str
    phase: Literal["WAIT_FOR", "WAITING", "EXECUTE"] = Field(
        description="The method that runs next: WAIT_FOR, EXECUTE, or WAITING while the "
        "conditions of its Wait are not met yet"
    )
    attempt: int = Field(description="The attempt that runs next; above 1 it is a retry")
    created_at: datetime
    due_at: datetime | None = Field(
        description="When it runs next (a retry's back-off or a Wait on Timers alone ends); "
        "null: as soon as it can, or when its Wait's conditions are met"
    )
    timers: list[datetime] = Field(description="When the Timers it waits on fire")
    channels: list[str] = Field(
        description="The Channels it waits on: a name, or map/instance for a ChannelMap"
    )
    sub_flows: list[str] = Field(description="The Flow IDs of the SubFlows it waits on")

    @classmethod
    def of(cls, step: engine.PendingStep) -> PendingStepResponse:
        """Return the wire form of an engine PendingStep."""
        return cls(
            step_execution_id=step.step_execution_id,
            step_type=step.step_type,
            phase=step.phase,
            attempt=step.attempt,
            created_at=step.created_at,
            due_at=step.due_at,
            timers=step.timers,
            channels=step.channels,
            sub_flows=step.sub_flows,
        )


class PendingStepsResponse(Wire):
    """The pending Step executions of a run, oldest first (none once it has closed)."""

    flow_id: str
    run_id: str
    steps: list[PendingStepResponse]


class ChannelInfoResponse(Wire):
    """A Channel, or a non-empty ChannelMap instance, with its pending count."""

    name: str
    instance: str | None = Field(description="The ChannelMap instance; null for a Channel.")
    size: int


class ChannelsResponse(Wire):
    """Every Channel and non-empty ChannelMap instance of the current (or latest) run."""

    flow_id: str
    run_id: str
    channels: list[ChannelInfoResponse]


class ChannelMessageResponse(Wire):
    """A pending message: its UUIDv7 ID, value and publication time."""

    message_id: str
    value: Any
    published_at: datetime

    @classmethod
    def of(cls, message: engine.ChannelMessage[Any]) -> ChannelMessageResponse:
        """Return the wire form of a pending message."""
        return cls(
            message_id=message.message_id,
            value=engine.to_json_data(message.value),
            published_at=message.published_at,
        )


class ChannelMessagesResponse(Wire):
    """Pending messages, oldest first; pass ``nextPageToken`` as ``pageToken`` for more."""

    flow_id: str
    run_id: str
    messages: list[ChannelMessageResponse]
    next_page_token: str


class PublishBody(Request):
    """A message to publish; ``instance`` for a ChannelMap."""

    value: Any = None
    instance: str | None = Field(None, min_length=1, max_length=256)


class PublishResponse(Wire):
    """The published message's ID."""

    message_id: str


class HealthResponse(Wire):
    """Liveness or readiness."""

    status: str


# -- Streams ------------------------------------------------------------------------------------


class WriteStreamBody(Request):
    """Append one message to a Stream as a client."""

    source: str = Field(
        description="Who wrote the message (non-empty; informational, may repeat, may "
        "contain '#'). Step writes use '#<stepExecutionId>'."
    )
    value: Any = Field(description="The message, valid for the Stream's declared type.")


class WriteStreamResponse(Wire):
    """Where the written message is: pass the token to readStream to read what follows it."""

    resume_token: str


class StreamMessageResponse(Wire):
    """One retained Stream message."""

    value: Any
    resume_token: str = Field(description="Opaque; pass it unchanged to read the next message.")
    created_at: datetime
    source: str

    @classmethod
    def of(cls, message: engine.StreamMessage[Any]) -> StreamMessageResponse:
        """Return the wire form of an engine StreamMessage."""
        return cls(
            value=engine.to_json_data(message.value),
            resume_token=message.resume_token,
            created_at=message.created_at,
            source=message.source,
        )


class ReadStreamResponse(Wire):
    """The next message, or null when none arrived before waitSeconds ended."""

    message: StreamMessageResponse | None


class ListStreamMessagesResponse(Wire):
    """Retained messages, newest first; an empty nextPageToken marks the last page."""

    messages: list[StreamMessageResponse]
    next_page_token: str


# -- SearchFlows and WaitForAttributeMatch ----------------------------------------------------


class SearchFlowsResponse(Wire):
    """A page of runs matching the query; an empty nextPageToken marks the last page."""

    flows: list[FlowInfoResponse]
    next_page_token: str = Field(
        description="Opaque; pass it with the same query to read the next page."
    )


class AttributeMatchBody(Request):
    """Wait until an Attribute (or one AttributeMap instance) compares true with a value."""

    name: str = Field(min_length=1, max_length=256, description="Attribute or AttributeMap name.")
    instance: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The AttributeMap instance; omit for an Attribute.",
    )
    operator: Lax[engine.MatchOperator] = Field(
        engine.MatchOperator.EQ,
        description="EQ and NE for every scalar type; GT, GE, LT and LE "
        "for int and double values only.",
    )
    value: Any = Field(description="A string, number or boolean (not an object or a list).")
    wait_seconds: float = Field(0, description="How long to wait for a match, 0 to 60 seconds.")


class AttributeMatchResponse(Wire):
    """Whether a commit made the comparison true before the wait ended, with the matched value."""

    matched: bool
    value: Any = Field(None, description="The matched current value; null when not matched.")
