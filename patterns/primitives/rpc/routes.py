"""HTTP routes of the RPC primitive.

The increment route does not retry: a lock conflict reaches the caller as 409
RPC_LOCK_CONFLICT with Retry-After, which is the point of the example. (The Sequentially
Chunked AttributeMap pattern shows a route that retries with backoff instead.)
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import Field

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
from patterns.primitives.rpc.flow import (
    DEFAULT_HOLD_SECONDS,
    MAX_HOLD_SECONDS,
    MAX_INCREMENT,
    CounterFlow,
)

DEFAULT_FLOW_ID = "primitive-rpc"
# A declaration used to name the RPCs and the Attribute; it does no I/O.
FLOW = CounterFlow()

router = APIRouter(prefix="/primitives/rpc", tags=["primitive-rpc"])

_NOT_ACTIVE: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such Flow, or it has closed", **PROBLEM}
}


class CounterStartResponse(StartResponse):
    """The CounterFlow run."""


class IncrementBody(RequestBody):
    """How much to add."""

    by: int = Field(default=1, ge=1, le=MAX_INCREMENT)


class HoldBody(RequestBody):
    """How long the HoldCounterLock Step keeps the lock."""

    seconds: float = Field(default=DEFAULT_HOLD_SECONDS, gt=0, le=MAX_HOLD_SECONDS)


class CounterResponse(Wire):
    """The counter's value."""

    counter: int


class HoldResponse(Wire):
    """How long the started Step will hold the lock once it has it."""

    seconds: float


class FinishResponse(Wire):
    """The run FinishCounting will complete; its result holds the final count."""

    flow_id: str
    run_id: str


@router.post(
    "/start",
    operation_id="startCounterFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=CounterStartResponse,
    responses={200: {"model": CounterStartResponse, "description": "Already running"}},
)
async def start(
    request: Request, response: Response, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> CounterStartResponse:
    """Start the RPC-only CounterFlow with the counter at 0; 200 if it is already running."""
    options = StartFlowOptions(initial_attributes={FLOW.counter.name: 0})
    return await start_or_report_running(
        request, response, CounterStartResponse, CounterFlow, flow_id, None, options
    )


@router.post(
    "/increment",
    operation_id="incrementCounter",
    response_model=CounterResponse,
    responses={
        **_NOT_ACTIVE,
        409: {"description": "The counter lock is held (RPC_LOCK_CONFLICT)", **PROBLEM},
    },
)
async def increment(
    request: Request,
    body: Annotated[IncrementBody, Body(default_factory=IncrementBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> CounterResponse:
    """Invoke increment, a read-modify-write under the `counter` lock; return the new value.

    RPCs never queue for a lock: while HoldCounterLock (or another increment) holds it, this
    answers 409 RPC_LOCK_CONFLICT with Retry-After at once. Retrying is safe, and successful
    increments serialize through the lock, so none is lost.
    """
    by = body.by
    value = await client_of(request).invoke_rpc(FLOW.increment, flow_id, by)
    return CounterResponse(counter=value)


@router.post(
    "/hold",
    operation_id="holdCounterLock",
    response_model=HoldResponse,
    responses=_NOT_ACTIVE,
)
async def hold(
    request: Request,
    body: Annotated[HoldBody, Body(default_factory=HoldBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> HoldResponse:
    """Start a HoldCounterLock Step that keeps the `counter` lock for `seconds`.

    The Step writes to the `counter-lock` Stream when it has the lock and when it lets go;
    increments in between get 409. Several holds queue one behind the other.
    """
    seconds = body.seconds
    held = await client_of(request).invoke_rpc(FLOW.hold_counter_lock, flow_id, seconds)
    return HoldResponse(seconds=held)


@router.get(
    "/counter",
    operation_id="readCounter",
    response_model=CounterResponse,
    responses={404: {"description": "No such Flow", **PROBLEM}},
)
async def counter(request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID) -> CounterResponse:
    """Invoke read_counter, a read-only RPC: no lock, no commit, never a lock conflict.

    It also answers on a closed run, so its success does not prove the Flow is running.
    """
    value = await client_of(request).invoke_rpc(FLOW.read_counter, flow_id)
    return CounterResponse(counter=value)


@router.post(
    "/finish",
    operation_id="finishCounterFlow",
    response_model=FinishResponse,
    responses=_NOT_ACTIVE,
)
async def finish(request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID) -> FinishResponse:
    """Invoke finish, which starts FinishCounting and answers with the run it will complete.

    FinishCounting queues for the lock behind any hold, then completes the Flow with the final
    count (see GET /api/v1/flows/{flowId}/result).
    """
    run_id = await client_of(request).invoke_rpc(FLOW.finish, flow_id)
    return FinishResponse(flow_id=flow_id, run_id=run_id)
