"""HTTP routes of the Timer primitive."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import Engine, FlowAlreadyStartedError, FlowNotFoundError
from patterns.primitives.timer.flow import DEFAULT_SECONDS, MAX_SECONDS, TimerFlow, TimerInput

DEFAULT_FLOW_ID = "primitive-timer"

router = APIRouter(prefix="/primitives/timer", tags=["Primitive: Timer"])

FlowIdQuery = Annotated[
    str, Query(alias="flowId", min_length=1, max_length=256, description="Target Flow ID")
]
_PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class TimerStartBody(_Wire):
    """How long the Step waits; defaults to a few seconds."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    seconds: float = Field(default=DEFAULT_SECONDS, ge=0, le=MAX_SECONDS)


class TimerStartResponse(_Wire):
    """The TimerFlow run."""

    flow_id: str
    run_id: str
    started: bool


class TimerStatusResponse(_Wire):
    """The latest run's status: RUNNING while the Timer waits, COMPLETED once it fired."""

    flow_id: str
    run_id: str
    flow_status: str
    started_at: datetime
    closed_at: datetime | None


def _engine(request: Request) -> Engine:
    return request.app.state.engine  # type: ignore[no-any-return]


@router.post(
    "/start",
    operation_id="startTimerFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=TimerStartResponse,
    responses={200: {"model": TimerStartResponse, "description": "Already running"}},
)
async def start(
    request: Request,
    response: Response,
    body: TimerStartBody | None = None,
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> TimerStartResponse:
    """Start a TimerFlow that waits `seconds` on a Timer, then completes; 200 if running."""
    payload = TimerInput(seconds=(body or TimerStartBody()).seconds)
    try:
        result = await _engine(request).start_flow(TimerFlow, flow_id, payload)
    except FlowAlreadyStartedError as exc:
        response.status_code = status.HTTP_200_OK
        return TimerStartResponse(flow_id=flow_id, run_id=exc.run_id or "", started=False)
    return TimerStartResponse(flow_id=result.flow_id, run_id=result.run_id, started=True)


@router.get(
    "/status",
    operation_id="getTimerStatus",
    response_model=TimerStatusResponse,
    responses={404: {"description": "No such TimerFlow (FLOW_NOT_FOUND)", **_PROBLEM}},
)
async def timer_status(
    request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> TimerStatusResponse:
    """Describe the latest TimerFlow run: RUNNING while the Timer waits, then COMPLETED.

    closedAt is set once the Timer has fired. The timer-status Attribute reads `waiting` once
    the wait has begun (its due time is committed), then `fired`.
    """
    info = await _engine(request).describe_flow(flow_id)
    if info.flow_type != TimerFlow.flow_type():
        raise FlowNotFoundError(
            f"Flow {flow_id} is a {info.flow_type}, not a {TimerFlow.flow_type()}",
            flow_id=flow_id,
            operation="getTimerStatus",
        )
    return TimerStatusResponse(
        flow_id=info.flow_id,
        run_id=info.run_id,
        flow_status=info.status,
        started_at=info.started_at,
        closed_at=info.closed_at,
    )
