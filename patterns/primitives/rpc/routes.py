"""HTTP routes of the RPC primitive.

The increment route does not retry: a lock conflict reaches the caller as 409
RPC_LOCK_CONFLICT with Retry-After, which is the point of the example. (The Sequentially
Chunked AttributeMap pattern shows a route that retries with backoff instead.)
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import Engine, FlowAlreadyStartedError, StartFlowOptions
from patterns.primitives.rpc.flow import (
    DEFAULT_HOLD_SECONDS,
    MAX_HOLD_SECONDS,
    MAX_INCREMENT,
    CounterFlow,
)

DEFAULT_FLOW_ID = "primitive-rpc"
# A declaration used to name the RPCs and the Attribute; it does no I/O.
FLOW = CounterFlow()

router = APIRouter(prefix="/primitives/rpc", tags=["Primitive: RPC"])

FlowIdQuery = Annotated[
    str, Query(alias="flowId", min_length=1, max_length=256, description="Target Flow ID")
]
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}
_NOT_ACTIVE: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such Flow, or it has closed", **_PROBLEM}
}


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class CounterStartResponse(_Wire):
    """The CounterFlow run."""

    flow_id: str
    run_id: str
    started: bool


class IncrementBody(_Wire):
    """How much to add."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    by: int = Field(default=1, ge=1, le=MAX_INCREMENT)


class HoldBody(_Wire):
    """How long the HoldCounterLock Step keeps the lock."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    seconds: float = Field(default=DEFAULT_HOLD_SECONDS, gt=0, le=MAX_HOLD_SECONDS)


class CounterResponse(_Wire):
    """The counter's value."""

    counter: int


class HoldResponse(_Wire):
    """How long the started Step will hold the lock once it has it."""

    seconds: float


class FinishResponse(_Wire):
    """The run FinishCounting will complete; its result holds the final count."""

    flow_id: str
    run_id: str


def _engine(request: Request) -> Engine:
    return request.app.state.engine  # type: ignore[no-any-return]


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
    try:
        result = await _engine(request).start_flow(CounterFlow, flow_id, None, options)
    except FlowAlreadyStartedError as exc:
        response.status_code = status.HTTP_200_OK
        return CounterStartResponse(flow_id=flow_id, run_id=exc.run_id or "", started=False)
    return CounterStartResponse(flow_id=result.flow_id, run_id=result.run_id, started=True)


@router.post(
    "/increment",
    operation_id="incrementCounter",
    response_model=CounterResponse,
    responses={
        **_NOT_ACTIVE,
        409: {"description": "The counter lock is held (RPC_LOCK_CONFLICT)", **_PROBLEM},
    },
)
async def increment(
    request: Request, body: IncrementBody | None = None, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> CounterResponse:
    """Invoke increment, a read-modify-write under the `counter` lock; return the new value.

    RPCs never queue for a lock: while HoldCounterLock (or another increment) holds it, this
    answers 409 RPC_LOCK_CONFLICT with Retry-After at once. Retrying is safe, and successful
    increments serialize through the lock, so none is lost.
    """
    by = (body or IncrementBody()).by
    value = await _engine(request).invoke_rpc(FLOW.increment, flow_id, by)
    return CounterResponse(counter=value)


@router.post(
    "/hold",
    operation_id="holdCounterLock",
    response_model=HoldResponse,
    responses=_NOT_ACTIVE,
)
async def hold(
    request: Request, body: HoldBody | None = None, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> HoldResponse:
    """Start a HoldCounterLock Step that keeps the `counter` lock for `seconds`.

    The Step writes to the `counter-lock` Stream when it has the lock and when it lets go;
    increments in between get 409. Several holds queue one behind the other.
    """
    seconds = (body or HoldBody()).seconds
    held = await _engine(request).invoke_rpc(FLOW.hold_counter_lock, flow_id, seconds)
    return HoldResponse(seconds=held)


@router.get(
    "/counter",
    operation_id="readCounter",
    response_model=CounterResponse,
    responses={404: {"description": "No such Flow", **_PROBLEM}},
)
async def counter(request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID) -> CounterResponse:
    """Invoke read_counter, a read-only RPC: no lock, no commit, never a lock conflict.

    It also answers on a closed run, so its success does not prove the Flow is running.
    """
    value = await _engine(request).invoke_rpc(FLOW.read_counter, flow_id)
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
    run_id = await _engine(request).invoke_rpc(FLOW.finish, flow_id)
    return FinishResponse(flow_id=flow_id, run_id=run_id)
