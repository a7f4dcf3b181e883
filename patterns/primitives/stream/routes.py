"""HTTP routes of the Stream primitive.

The playground follows the Stream live through the engine API's Server-Sent Events endpoint,
``GET /api/v1/streams/ProgressFlow/{flowId}/progress/events``; these routes start the Flow and
list what it wrote.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status
from pydantic import Field

from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.stream.flow import (
    DEFAULT_DELAY_SECONDS,
    DEFAULT_SECTIONS,
    MAX_DELAY_SECONDS,
    MAX_SECTIONS,
    ProgressFlow,
    ProgressInput,
)

DEFAULT_FLOW_ID = "primitive-stream"
# A declaration used to name the Stream; it does no I/O.
FLOW = ProgressFlow()

router = APIRouter(prefix="/primitives/stream", tags=["primitive-stream"])


class ProgressStartBody(RequestBody):
    """How much work the Step simulates; every field has a default."""

    sections: int = Field(default=DEFAULT_SECTIONS, ge=1, le=MAX_SECTIONS)
    delay_seconds: float = Field(default=DEFAULT_DELAY_SECONDS, ge=0, le=MAX_DELAY_SECONDS)


class ProgressStartResponse(StartResponse):
    """The ProgressFlow run."""


class ProgressMessageResponse(Wire):
    """One progress message; ``source`` is ``#<stepExecutionId>`` of the Step that wrote it."""

    value: str
    resume_token: str
    created_at: datetime
    source: str


class ProgressMessagesResponse(Wire):
    """Retained progress messages, newest first, and the token of the next older page."""

    messages: list[ProgressMessageResponse]
    next_page_token: str


@router.post(
    "/start",
    operation_id="startProgressFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=ProgressStartResponse,
    responses={200: {"model": ProgressStartResponse, "description": "Already running"}},
)
async def start(
    request: Request,
    response: Response,
    body: Annotated[ProgressStartBody, Body(default_factory=ProgressStartBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> ProgressStartResponse:
    """Start a ProgressFlow that writes one Stream message per section; 200 if already running.

    A Flow ID whose last run has closed starts a new run; its messages follow the earlier
    run's on the same Stream.
    """
    given = body
    payload = ProgressInput(sections=given.sections, delay_seconds=given.delay_seconds)
    return await start_or_report_running(
        request, response, ProgressStartResponse, ProgressFlow, flow_id, payload
    )


@router.get(
    "/messages",
    operation_id="listProgressMessages",
    response_model=ProgressMessagesResponse,
    responses={400: {"description": "Page size out of range or bad page token", **PROBLEM}},
)
async def messages(
    request: Request,
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
    page_size: Annotated[
        int, Query(alias="pageSize", description="Between 1 and the server's maximum (1000)")
    ] = 100,
    before_page_token: Annotated[
        str, Query(alias="beforePageToken", description="Empty for the newest messages")
    ] = "",
) -> ProgressMessagesResponse:
    """List the progress messages the Flow's Step wrote, newest first, without waiting.

    Pass nextPageToken as beforePageToken for the next older page (empty on the last page).
    Messages live in the server's memory: they vanish when it restarts.
    """
    page = await client_of(request).list_stream_messages(
        flow_id, FLOW.progress, page_size, before_page_token, flow_type=ProgressFlow
    )
    return ProgressMessagesResponse(
        messages=[
            ProgressMessageResponse(
                value=m.value,
                resume_token=m.resume_token,
                created_at=m.created_at,
                source=m.source,
            )
            for m in page.messages
        ],
        next_page_token=page.next_page_token,
    )
