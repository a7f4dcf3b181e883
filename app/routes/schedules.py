"""Schedules (create, list, describe, update, pause, unpause, trigger, backfill, delete) and
SkipTimer: a Flow type started on its own, and a Timer an operator fires early."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response, status

from app.deps import EngineDep, LimitsDep, PageSizeQuery, PageTokenQuery
from app.errors import responses
from app.limits import check_value_size, check_values_size
from app.schedule_schemas import (
    BackfillBody,
    BackfillResponse,
    NoteBody,
    ScheduleBody,
    ScheduleListResponse,
    ScheduleResponse,
    SkipTimersBody,
    SkipTimersResponse,
    TriggerResponse,
)
from engine import InvalidArgumentError

router = APIRouter(prefix="/api/v1", tags=["schedules"])


@router.post(
    "/schedules",
    operation_id="createSchedule",
    status_code=status.HTTP_201_CREATED,
    response_model=ScheduleResponse,
    responses=responses(400, 409, 422),
)
async def create_schedule(
    body: ScheduleBody, eng: EngineDep, limits: LimitsDep
) -> ScheduleResponse:
    """Create a Schedule; its first time is the first one after now.

    400 INVALID_ARGUMENT names the field: an unknown flowType, both or neither of everySeconds
    and cron, a cron line or timezone that does not parse, an input its Flow type refuses; 409
    SCHEDULE_ALREADY_EXISTS.
    """
    if body.schedule_id is None:
        raise InvalidArgumentError(
            "scheduleId is required to create a Schedule", field="scheduleId"
        )
    _check_sizes(body, limits)
    return ScheduleResponse.of(await eng.create_schedule(body.to_spec(body.schedule_id)))


@router.get(
    "/schedules",
    operation_id="listSchedules",
    response_model=ScheduleListResponse,
    responses=responses(400, 422),
)
async def list_schedules(
    eng: EngineDep, page_size: PageSizeQuery = 100, page_token: PageTokenQuery = ""
) -> ScheduleListResponse:
    """Return a page of Schedules ordered by ID."""
    page = await eng.list_schedules(page_size, page_token)
    return ScheduleListResponse(
        schedules=[ScheduleResponse.of(found) for found in page.schedules],
        next_page_token=page.next_page_token,
    )


@router.get(
    "/schedules/{scheduleId}",
    operation_id="describeSchedule",
    response_model=ScheduleResponse,
    responses=responses(400, 404, 422),
)
async def describe_schedule(scheduleId: str, eng: EngineDep) -> ScheduleResponse:
    """Describe a Schedule: its spec, next five times, last ten actions, running Flows, skips."""
    return ScheduleResponse.of(await eng.describe_schedule(scheduleId))


@router.put(
    "/schedules/{scheduleId}",
    operation_id="updateSchedule",
    response_model=ScheduleResponse,
    responses=responses(400, 404, 422),
)
async def update_schedule(
    scheduleId: str,
    body: ScheduleBody,
    eng: EngineDep,
    limits: LimitsDep,
) -> ScheduleResponse:
    """Replace a Schedule's spec; its skipped count and recent actions stay, and its next time
    moves only when its times changed."""
    if body.schedule_id is not None and body.schedule_id != scheduleId:
        raise InvalidArgumentError(
            "scheduleId in the body must be the path's (or left out)", field="scheduleId"
        )
    _check_sizes(body, limits)
    return ScheduleResponse.of(await eng.update_schedule(body.to_spec(scheduleId)))


@router.delete(
    "/schedules/{scheduleId}",
    operation_id="deleteSchedule",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=responses(400, 404, 422),
)
async def delete_schedule(scheduleId: str, eng: EngineDep) -> Response:
    """Delete a Schedule; the Flows it started keep running."""
    await eng.delete_schedule(scheduleId)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/schedules/{scheduleId}/pause",
    operation_id="pauseSchedule",
    response_model=ScheduleResponse,
    responses=responses(400, 404, 422),
)
async def pause_schedule(
    scheduleId: str,
    eng: EngineDep,
    body: Annotated[NoteBody, Body(default_factory=NoteBody)],
) -> ScheduleResponse:
    """Pause a Schedule with a note: it starts nothing on its own until unpaused."""
    return ScheduleResponse.of(await eng.pause_schedule(scheduleId, body.note))


@router.post(
    "/schedules/{scheduleId}/unpause",
    operation_id="unpauseSchedule",
    response_model=ScheduleResponse,
    responses=responses(400, 404, 422),
)
async def unpause_schedule(
    scheduleId: str,
    eng: EngineDep,
    body: Annotated[NoteBody, Body(default_factory=NoteBody)],
) -> ScheduleResponse:
    """Unpause a Schedule with a note; the times it slept through are not made up."""
    return ScheduleResponse.of(await eng.unpause_schedule(scheduleId, body.note))


@router.post(
    "/schedules/{scheduleId}/trigger",
    operation_id="triggerSchedule",
    response_model=TriggerResponse,
    responses=responses(400, 404, 422),
)
async def trigger_schedule(scheduleId: str, eng: EngineDep) -> TriggerResponse:
    """Start one action now (<scheduleId>-<now>) under the overlap policy, paused or not;
    started is false (runId null) when the policy skipped or buffered it."""
    found = await eng.trigger_schedule(scheduleId)
    return TriggerResponse(flow_id=found.flow_id, run_id=found.run_id, started=found.started)


@router.post(
    "/schedules/{scheduleId}/backfill",
    operation_id="backfillSchedule",
    response_model=BackfillResponse,
    responses=responses(400, 404, 422),
)
async def backfill_schedule(
    scheduleId: str,
    body: BackfillBody,
    eng: EngineDep,
) -> BackfillResponse:
    """Act on every scheduled time in [startAt, endAt) as if it had come (at most 1,000),
    under the overlap policy."""
    found = await eng.backfill_schedule(scheduleId, body.start_at, body.end_at)
    return BackfillResponse(started=found.started, skipped=found.skipped)


@router.post(
    "/flows/{flowId}/timers/skip",
    operation_id="skipTimers",
    response_model=SkipTimersResponse,
    responses=responses(400, 404, 422),
    tags=["flows"],
)
async def skip_timers(
    flowId: str,
    body: SkipTimersBody,
    eng: EngineDep,
) -> SkipTimersResponse:
    """Fire now the Timers a pending Step execution's wait is on, as if their time had come.

    400 INVALID_ARGUMENT (stepExecutionId) when it is not pending or waits on no Timer left.
    """
    fired = await eng.skip_timers(flowId, body.step_execution_id, run_id=body.run_id)
    return SkipTimersResponse(fired=fired)


def _check_sizes(body: ScheduleBody, limits: LimitsDep) -> None:
    check_value_size(limits, body.input, "input")
    check_values_size(
        limits, body.start_options.initial_attributes, "startOptions.initialAttributes"
    )
