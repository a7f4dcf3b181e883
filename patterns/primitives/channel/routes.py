"""HTTP routes of the Channel primitive.

Queueing goes through the client API's publishToChannel rather than an RPC: a handler's
publication gets its message ID only when its result commits, after the handler has returned,
so an RPC cannot tell its caller the ID it published. ``publish_to_channel`` is one commit and
answers with the ID it assigned; listing the queue after an RPC instead could not tell this
caller's message from a concurrent caller's with the same value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import Field, Strict

from engine import StartFlowOptions
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.channel.flow import (
    MAX_MESSAGE_LENGTH,
    ChannelFlow,
    QueuedMessageReference,
    QueueSnapshot,
)

DEFAULT_FLOW_ID = "primitive-channel"
DEFAULT_MESSAGE = "hello"
# A declaration used to name the RPCs, the Channels and the Attribute; it does no I/O.
FLOW = ChannelFlow()

router = APIRouter(prefix="/primitives/channel", tags=["primitive-channel"])

_NOT_ACTIVE: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such Flow, or it has closed", **PROBLEM}
}


class ChannelStartResponse(StartResponse):
    """The ChannelFlow run."""


class QueueMessageBody(RequestBody):
    """The value to queue."""

    value: str = Field(default=DEFAULT_MESSAGE, min_length=1, max_length=MAX_MESSAGE_LENGTH)


class QueueMessageResponse(Wire):
    """The queued message: the UUIDv7 ID the engine assigned when it accepted it, and its value."""

    message_id: str
    value: str


class MoveMessageBody(RequestBody):
    """The ID of the queued message to move, as the queue route or listing returned it."""

    # JSON carries the ID as a string, which strict Python-mode validation would refuse.
    message_id: Annotated[UUID, Strict(False)]


class MoveMessageResponse(Wire):
    """The queued message that moved; its value now waits in prioritized-messages."""

    message_id: str


class ChannelMessageInfo(Wire):
    """A pending message: its UUIDv7 ID, value and publication time."""

    message_id: str
    value: str
    published_at: datetime


class ChannelQueueInfo(Wire):
    """One Channel: how many messages are pending, and those messages, oldest first."""

    size: int
    messages: list[ChannelMessageInfo]

    @classmethod
    def of(cls, snapshot: QueueSnapshot) -> ChannelQueueInfo:
        """Return the wire form of one Channel's snapshot."""
        return cls(
            size=snapshot.size,
            messages=[
                ChannelMessageInfo(
                    message_id=m.message_id, value=m.value, published_at=m.published_at
                )
                for m in snapshot.messages
            ],
        )


class ChannelQueuesResponse(Wire):
    """Both Channels of the run, read from one snapshot."""

    flow_id: str
    run_id: str
    queued: ChannelQueueInfo
    prioritized: ChannelQueueInfo


class HandledResponse(Wire):
    """The values HandlePrioritizedMessage consumed, oldest first (the newest 100 are kept)."""

    flow_id: str
    run_id: str
    handled: list[str]


@router.post(
    "/start",
    operation_id="startChannelFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=ChannelStartResponse,
    responses={200: {"model": ChannelStartResponse, "description": "Already running"}},
)
async def start(
    request: Request, response: Response, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> ChannelStartResponse:
    """Start a ChannelFlow with an empty handled list; 200 if it is already running.

    Its Step starts waiting for a prioritized message at once.
    """
    options = StartFlowOptions(initial_attributes={FLOW.handled.name: []})
    return await start_or_report_running(
        request, response, ChannelStartResponse, ChannelFlow, flow_id, None, options
    )


@router.post(
    "/queue",
    operation_id="queueChannelMessage",
    status_code=status.HTTP_201_CREATED,
    response_model=QueueMessageResponse,
    responses={
        400: {"description": "The Flow ID belongs to another Flow type", **PROBLEM},
        **_NOT_ACTIVE,
    },
)
async def queue(
    request: Request,
    body: Annotated[QueueMessageBody, Body(default_factory=QueueMessageBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> QueueMessageResponse:
    """Publish a message to queued-messages and return its ID.

    Uses publishToChannel, which commits the message and answers with the ID it assigned (an
    RPC could not: its publication gets an ID only when its result commits). Nothing waits on
    this Channel, so the message stays pending until it is moved or deleted.
    """
    value = body.value
    message_id = await client_of(request).publish_to_channel(flow_id, FLOW.queued_messages, value)
    return QueueMessageResponse(message_id=message_id, value=value)


@router.post(
    "/move",
    operation_id="moveQueuedChannelMessage",
    response_model=MoveMessageResponse,
    responses={
        404: {
            "description": "No such Flow, or it has closed (FLOW_NOT_ACTIVE_OR_NOT_FOUND), or "
            "the message is no longer pending (CHANNEL_MESSAGE_NOT_FOUND)",
            **PROBLEM,
        },
    },
)
async def move(
    body: MoveMessageBody, request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> MoveMessageResponse:
    """Invoke the transactional move_queued_message_to_prioritized_messages RPC.

    The RPC loads queued-messages, finds the message's value by ID, and stages its deletion and
    a publication of the value to prioritized-messages, where HandlePrioritizedMessage consumes
    it. When the message is no longer pending (a concurrent consumer took it, or it never
    existed), this is 404 CHANNEL_MESSAGE_NOT_FOUND and neither Channel changed.
    """
    message_id = str(body.message_id)
    await client_of(request).invoke_rpc(
        FLOW.move_queued_message_to_prioritized_messages,
        flow_id,
        QueuedMessageReference(message_id=message_id),
    )
    return MoveMessageResponse(message_id=message_id)


@router.get(
    "/queues",
    operation_id="getChannelQueues",
    response_model=ChannelQueuesResponse,
    responses={404: {"description": "No such ChannelFlow", **PROBLEM}},
)
async def queues(request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID) -> ChannelQueuesResponse:
    """Invoke peek_queues: both Channels' sizes and pending messages, oldest first.

    One read-only RPC reads both from one snapshot, so a move never shows up in both or in
    neither. It loads the Channels' messages (sizes need no load) and consumes nothing.
    """
    snapshot = await client_of(request).invoke_rpc(FLOW.peek_queues, flow_id)
    return ChannelQueuesResponse(
        flow_id=flow_id,
        run_id=snapshot.run_id,
        queued=ChannelQueueInfo.of(snapshot.queued),
        prioritized=ChannelQueueInfo.of(snapshot.prioritized),
    )


@router.get(
    "/handled",
    operation_id="getChannelHandledMessages",
    response_model=HandledResponse,
    responses={
        400: {"description": "The Flow ID belongs to another Flow type", **PROBLEM},
        404: {"description": "No such Flow (FLOW_NOT_FOUND)", **PROBLEM},
    },
)
async def handled(request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID) -> HandledResponse:
    """Read the values HandlePrioritizedMessage has consumed, with GetAttributes.

    A moved message shows up here once the Step has taken it, just after the move commits.
    """
    read = await client_of(request).get_attributes(flow_id, [FLOW.handled.name])
    return HandledResponse(
        flow_id=read.flow_id,
        run_id=read.run_id,
        handled=read.values.get(FLOW.handled.name) or [],
    )
