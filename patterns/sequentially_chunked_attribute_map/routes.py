"""HTTP routes of the Sequentially Chunked AttributeMap pattern."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import Field

from engine import RPCInvokeOptions, StartFlowOptions
from patterns import _shared
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    Wire,
    client_of,
    lock_retry,
    start_or_report_running,
)
from patterns.sequentially_chunked_attribute_map.flow import (
    CURRENT,
    ChunkedSubscriberFlow,
    GetSubscriberPageInput,
    RegisterSubscriberInput,
    SubscriberArchiveState,
    SubscriberEmail,
    SubscriberRecord,
    check_page_token,
)

DEFAULT_FLOW_ID = "sequentially-chunked-attribute-map"
# A declaration used to name the RPCs; it does no I/O.
FLOW = ChunkedSubscriberFlow()

router = APIRouter(
    prefix="/patterns/sequentially-chunked-attribute-map",
    tags=["pattern-sequentially-chunked-attribute-map"],
)


class StartResponse(_shared.StartResponse):
    """The subscriber log's run."""


class RegisterBody(RequestBody):
    """A subscriber to append."""

    email: SubscriberEmail
    name: str = Field(min_length=1, max_length=200)


class SubscriberResponse(Wire):
    """A registered subscriber."""

    sequence: int
    email: str
    name: str
    registered_at: datetime


class SubscribersPageResponse(Wire):
    """Records newest first, and the next older chunk's token ("" after the oldest)."""

    subscribers: list[SubscriberResponse]
    next_page_token: str


def initial_attributes() -> dict[str, object]:
    """Return the layout a new log starts with: sequence 1, no archive, an empty current."""
    return {
        FLOW.archive_state.name: SubscriberArchiveState(),
        f"{FLOW.subscriber_chunks.name}/{CURRENT}": [],
    }


def _record(record: SubscriberRecord) -> SubscriberResponse:
    return SubscriberResponse(
        sequence=record.sequence,
        email=record.email,
        name=record.name,
        registered_at=record.registered_at,
    )


@router.post(
    "/start",
    operation_id="startChunkedSubscriberFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=StartResponse,
    responses={200: {"model": StartResponse, "description": "Already running"}},
)
async def start(
    request: Request, response: Response, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> StartResponse:
    """Start the RPC-only subscriber Flow (no Flow timeout); 200 if it is already running."""
    options = StartFlowOptions(initial_attributes=initial_attributes())
    return await start_or_report_running(
        request, response, StartResponse, ChunkedSubscriberFlow, flow_id, None, options
    )


@router.post(
    "/register",
    operation_id="registerSubscriber",
    status_code=status.HTTP_201_CREATED,
    response_model=SubscriberResponse,
    responses={
        404: {"description": "Flow not started", **PROBLEM},
        409: {"description": "Lock conflicts outlasted the retry budget", **PROBLEM},
    },
)
async def register(
    body: RegisterBody, request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> SubscriberResponse:
    """Append a subscriber; retries RPC lock conflicts with jittered exponential backoff."""
    eng = client_of(request)
    payload = RegisterSubscriberInput(email=body.email, name=body.name)
    record = await eng.invoke_rpc(
        FLOW.register_subscriber,
        flow_id,
        payload,
        options=RPCInvokeOptions(lock_retry=lock_retry(request)),
    )
    return _record(record)


@router.get(
    "/subscribers",
    operation_id="listSubscribers",
    response_model=SubscribersPageResponse,
    responses={
        400: {"description": "Malformed page token (INVALID_PAGE_TOKEN)", **PROBLEM},
        404: {"description": "No such chunk (PAGE_NOT_FOUND) or Flow", **PROBLEM},
    },
)
async def subscribers(
    request: Request,
    page_token: Annotated[str, Query(alias="pageToken", max_length=64)] = CURRENT,
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> SubscribersPageResponse:
    """Return one chunk, newest first, loading exactly that AttributeMap instance."""
    token = check_page_token(page_token)
    page = await client_of(request).invoke_rpc(
        FLOW.get_subscriber_page,
        flow_id,
        GetSubscriberPageInput(page_token=token),
        options=RPCInvokeOptions(
            load_attribute_map_instances=(FLOW.subscriber_chunks.load(token),)
        ),
    )
    return SubscribersPageResponse(
        subscribers=[_record(r) for r in page.subscribers], next_page_token=page.next_page_token
    )
