"""Streams: client writes, resumable reads, newest-first listing and a live SSE follow.

Stream messages are best effort and live in the server's memory: they vanish on restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response, status
from fastapi.sse import EventSourceResponse, ServerSentEvent

import engine
from app.deps import EngineDep
from app.errors import responses
from app.long_polls import while_connected
from app.schemas import (
    ListStreamMessagesResponse,
    ReadStreamResponse,
    StreamMessageResponse,
    WriteStreamBody,
    WriteStreamResponse,
)

router = APIRouter(prefix="/api/v1/streams", tags=["streams"])

STREAM_PATH = "/{flowType}/{flowId}/{stream}"
#: The longest one readStream call of the events endpoint waits before looping.
_FOLLOW_WAIT_SECONDS = 30.0
#: How long a browser's EventSource waits before reconnecting, in milliseconds.
_RECONNECT_MS = 1000


def _message(message: engine.StreamMessage[Any]) -> StreamMessageResponse:
    return StreamMessageResponse.of(message)


@router.post(
    STREAM_PATH + "/messages",
    operation_id="writeStream",
    summary="Write a Stream message as a client",
    status_code=status.HTTP_201_CREATED,
    response_model=WriteStreamResponse,
    responses=responses(400, 404, 409, 422, 429),
)
async def write_stream(
    flowType: str,
    flowId: str,
    stream: str,
    body: WriteStreamBody,
    eng: EngineDep,
) -> WriteStreamResponse:
    """Append a message to the Stream of one Flow ID, whether or not that Flow exists or runs.

    The source must be non-empty. At the Stream's capacity (shared by every Flow ID of the
    Flow type) or the server's memory limit the write gets 429 RESOURCE_EXHAUSTED and trimming
    makes room: retry after a short delay, unless the problem says ``retryable: false`` (the
    message can never fit). 409 FAILED_PRECONDITION when the Stream Store is disabled.
    """
    token = await eng.write_stream(
        flowId, stream, body.value, source=body.source, flow_type=flowType
    )
    return WriteStreamResponse(resume_token=token)


@router.get(
    STREAM_PATH + "/messages",
    operation_id="listStreamMessages",
    summary="List retained Stream messages, newest first",
    response_model=ListStreamMessagesResponse,
    responses=responses(400, 404, 409, 422),
)
async def list_stream_messages(
    flowType: str,
    flowId: str,
    stream: str,
    eng: EngineDep,
    page_size: Annotated[
        int | None,
        Query(
            alias="pageSize",
            description="Between 1 and the server's maximum (1000 by default); anything else is "
            "400 INVALID_ARGUMENT, never reduced. Absent: 100, or the maximum when it is "
            "smaller.",
        ),
    ] = None,
    before_page_token: Annotated[
        str,
        Query(
            alias="beforePageToken",
            description="Empty for the newest messages; else a nextPageToken from this Stream.",
        ),
    ] = "",
) -> ListStreamMessagesResponse:
    """Return up to pageSize retained messages, newest first, without waiting.

    Pass nextPageToken unchanged for the next older page; it is bound to this Flow type, Flow
    ID and Stream, and empty on the last page. Messages written after the first page do not
    join its chain; when trimming has passed the page anchor the page is empty.
    """
    page = await eng.list_stream_messages(
        flowId, stream, page_size, before_page_token, flow_type=flowType
    )
    return ListStreamMessagesResponse(
        messages=[_message(m) for m in page.messages], next_page_token=page.next_page_token
    )


@router.get(
    STREAM_PATH + "/next",
    operation_id="readStream",
    summary="Read the next Stream message, long-polling",
    response_model=ReadStreamResponse,
    responses=responses(400, 404, 409, 422),
)
async def read_stream(
    request: Request,
    flowType: str,
    flowId: str,
    stream: str,
    eng: EngineDep,
    resume_token: Annotated[
        str,
        Query(
            alias="resumeToken",
            description="Empty for the oldest retained message; else a resumeToken of this Stream.",
        ),
    ] = "",
    wait_seconds: Annotated[
        float,
        Query(
            alias="waitSeconds",
            description="How long to wait for a message (0 to 60).",
        ),
    ] = 0.0,
) -> ReadStreamResponse | Response:
    """Return the message after resumeToken, waiting up to waitSeconds for one to be written.

    An empty token, or one older than the retained head, starts at the head. ``message`` is
    null when the wait ended first. Resume is best effort: a slow reader can miss messages
    trimmed before its next read.
    """
    message = await while_connected(
        request,
        wait_seconds,
        eng.read_stream(
            flowId, stream, resume_token, wait_seconds=wait_seconds, flow_type=flowType
        ),
    )
    if isinstance(message, Response):  # the client left
        return message
    return ReadStreamResponse(message=None if message is None else _message(message))


@dataclass
class _Follow:
    flow_type: str
    flow_id: str
    stream: str
    token: str
    first: engine.StreamMessage[Any] | None


async def _start_follow(
    flowType: str,
    flowId: str,
    stream: str,
    eng: EngineDep,
    resume_token: Annotated[
        str,
        Query(
            alias="resumeToken",
            description="Start after this message (empty: the oldest).",
        ),
    ] = "",
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            description="Sent by a reconnecting EventSource; wins over resumeToken.",
        ),
    ] = None,
) -> _Follow:
    # Runs before the response starts, so a bad Stream or token is a problem response.
    token = last_event_id or resume_token
    first = await eng.read_stream(flowId, stream, token, flow_type=flowType)
    return _Follow(flowType, flowId, stream, token, first)


@router.get(
    STREAM_PATH + "/events",
    operation_id="followStream",
    summary="Follow a Stream live (Server-Sent Events)",
    response_class=EventSourceResponse,
    responses=responses(400, 404, 409, 422),
)
async def follow_stream(
    request: Request,
    follow: Annotated[_Follow, Depends(_start_follow)],
    eng: EngineDep,
) -> AsyncIterable[ServerSentEvent]:
    """Send each message from resumeToken on as an event, live, until the client leaves.

    Each event's ``data`` is a StreamMessage as JSON and its ``id`` the message's resume token,
    so a reconnecting EventSource resumes with Last-Event-ID. The response ends after the
    server's events limit (60 s by default); EventSource then reconnects by itself.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.app.state.settings.stream.events_max_seconds
    yield ServerSentEvent(retry=_RECONNECT_MS, comment="following")
    message, token = follow.first, follow.token
    while True:
        if message is not None:
            token = message.resume_token
            yield ServerSentEvent(
                raw_data=_message(message).model_dump_json(by_alias=True), id=token
            )
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        try:
            message = await eng.read_stream(
                follow.flow_id,
                follow.stream,
                token,
                flow_type=follow.flow_type,
                wait_seconds=min(_FOLLOW_WAIT_SECONDS, remaining),
            )
        except engine.EngineError:  # the engine is shutting down: end the response cleanly
            return
