"""HTTP routes of the Timer primitive."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import Field

from engine import FlowNotFoundError
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.timer.flow import DEFAULT_SECONDS, MAX_SECONDS, TimerFlow, TimerInput

DEFAULT_FLOW_ID = "primitive-timer"

router = APIRouter(prefix="/primitives/timer", tags=["primitive-timer"])


class TimerStartBody(RequestBody):
    """How long the Step waits; defaults to a few seconds."""

    seconds: float = Field(default=DEFAULT_SECONDS, ge=0, le=MAX_SECONDS)


class TimerStartResponse(StartResponse):
    """The TimerFlow run."""


class TimerStatusResponse(Wire):
    """The latest run's status: RUNNING while the Timer waits, COMPLETED once it fired."""

    flow_id: str
    run_id: str
    flow_status: str
    started_at: datetime
    closed_at: datetime | None


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
    body: Annotated[TimerStartBody, Body(default_factory=TimerStartBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> TimerStartResponse:
    """Start a TimerFlow that waits `seconds` on a Timer, then completes; 200 if running."""
    payload = TimerInput(seconds=body.seconds)
    return await start_or_report_running(
        request, response, TimerStartResponse, TimerFlow, flow_id, payload
    )


@router.get(
    "/status",
    operation_id="getTimerStatus",
    response_model=TimerStatusResponse,
    responses={404: {"description": "No such TimerFlow (FLOW_NOT_FOUND)", **PROBLEM}},
)
async def timer_status(
    request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> TimerStatusResponse:
    """Describe the latest TimerFlow run: RUNNING while the Timer waits, then COMPLETED.

    closedAt is set once the Timer has fired. The timer-status Attribute reads `waiting` once
    the wait has begun (its due time is committed), then `fired`.
    """
    info = await client_of(request).describe_flow(flow_id)
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
