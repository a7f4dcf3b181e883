"""HTTP routes of the Schedule primitive: create the Schedule, read it, trigger it, delete it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import Field

from engine import OverlapPolicy, ScheduleAlreadyExistsError, ScheduleDescription, ScheduleSpec
from patterns._shared import PROBLEM, RequestBody, Wire, client_of
from patterns.primitives.schedule.flow import DigestFlow, DigestInput

SCHEDULE_ID = "primitive-schedule"
DEFAULT_EVERY_SECONDS = 10

router = APIRouter(prefix="/primitives/schedule", tags=["primitive-schedule"])


class ScheduleStartBody(RequestBody):
    """How often the Schedule starts a DigestFlow, and what its digests are about."""

    every_seconds: int = Field(default=DEFAULT_EVERY_SECONDS, ge=1, le=86400)
    topic: str = Field(default="news", min_length=1, max_length=100)


class RecentAction(Wire):
    """A DigestFlow the Schedule started."""

    scheduled_at: datetime
    flow_id: str
    run_id: str
    status: str


class ScheduleStatusResponse(Wire):
    """The Schedule: how often, its next times, what it started and skipped."""

    schedule_id: str
    every_seconds: int | None
    overlap: str
    paused: bool
    next_action_times: list[datetime]
    recent_actions: list[RecentAction]
    running: list[str]
    skipped: int


class TriggeredResponse(Wire):
    """The DigestFlow a trigger started (or the overlap policy's refusal)."""

    flow_id: str
    run_id: str | None
    started: bool


def _status(found: ScheduleDescription) -> ScheduleStatusResponse:
    every = found.spec.every
    return ScheduleStatusResponse(
        schedule_id=found.schedule_id,
        every_seconds=None if every is None else int(every.total_seconds()),
        overlap=str(found.spec.overlap),
        paused=found.spec.paused,
        next_action_times=found.next_action_times,
        recent_actions=[
            RecentAction(
                scheduled_at=a.scheduled_at, flow_id=a.flow_id, run_id=a.run_id, status=a.status
            )
            for a in found.recent_actions
        ],
        running=found.running,
        skipped=found.skipped,
    )


@router.post(
    "/start",
    operation_id="startDigestSchedule",
    status_code=status.HTTP_201_CREATED,
    response_model=ScheduleStatusResponse,
    responses={200: {"model": ScheduleStatusResponse, "description": "Already created"}},
)
async def start(
    request: Request,
    response: Response,
    body: Annotated[ScheduleStartBody, Body(default_factory=ScheduleStartBody)],
) -> ScheduleStatusResponse:
    """Create the Schedule that starts a DigestFlow every `everySeconds` (SKIP overlap);
    200 with the Schedule as it is when it exists already."""
    eng = client_of(request)
    spec = ScheduleSpec(
        SCHEDULE_ID,
        DigestFlow,
        DigestInput(topic=body.topic),
        every=timedelta(seconds=body.every_seconds),
        overlap=OverlapPolicy.SKIP,
        note="the Schedule primitive",
    )
    try:
        return _status(await eng.create_schedule(spec))
    except ScheduleAlreadyExistsError:
        response.status_code = status.HTTP_200_OK
        return _status(await eng.describe_schedule(SCHEDULE_ID))


@router.get(
    "/status",
    operation_id="getDigestSchedule",
    response_model=ScheduleStatusResponse,
    responses={404: {"description": "Not created yet (SCHEDULE_NOT_FOUND)", **PROBLEM}},
)
async def schedule_status(request: Request) -> ScheduleStatusResponse:
    """Describe the Schedule: next five times, last ten DigestFlows, running ones, skips."""
    return _status(await client_of(request).describe_schedule(SCHEDULE_ID))


@router.post(
    "/trigger",
    operation_id="triggerDigestSchedule",
    response_model=TriggeredResponse,
    responses={404: {"description": "Not created yet (SCHEDULE_NOT_FOUND)", **PROBLEM}},
)
async def trigger(request: Request) -> TriggeredResponse:
    """Start a DigestFlow now, under the Schedule's overlap policy."""
    found = await client_of(request).trigger_schedule(SCHEDULE_ID)
    return TriggeredResponse(flow_id=found.flow_id, run_id=found.run_id, started=found.started)


@router.post(
    "/stop",
    operation_id="deleteDigestSchedule",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "Not created yet (SCHEDULE_NOT_FOUND)", **PROBLEM}},
)
async def stop(request: Request) -> Response:
    """Delete the Schedule; the DigestFlows it started are kept."""
    await client_of(request).delete_schedule(SCHEDULE_ID)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
