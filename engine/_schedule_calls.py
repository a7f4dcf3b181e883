"""The Engine's Schedule calls and SkipTimer, kept apart so ``engine.py`` stays readable.

:class:`ScheduleCalls` is a base of :class:`engine.Engine`; each call validates eagerly and
raises the engine's errors (ScheduleNotFoundError, ScheduleAlreadyExistsError,
InvalidArgumentError naming the field).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from engine._ids import check_id
from engine._storage.timer_skips import skip_timers
from engine.clock import to_micros
from engine.errors import InvalidArgumentError
from engine.schedule import (
    BackfillResult,
    ScheduleDescription,
    SchedulePage,
    ScheduleSpec,
    ScheduleTriggerResult,
)

if TYPE_CHECKING:
    from engine._runtime.composition import Services


class ScheduleCalls:
    """createSchedule, describeSchedule, listSchedules, updateSchedule, pauseSchedule,
    unpauseSchedule, triggerSchedule, backfillSchedule and deleteSchedule."""

    _services: Services

    async def create_schedule(self, spec: ScheduleSpec) -> ScheduleDescription:
        """Create a Schedule; its first time is the first one after now."""
        return await self._services.schedules.create(spec)

    async def describe_schedule(self, schedule_id: str) -> ScheduleDescription:
        """Describe a Schedule: its spec, next times, recent actions, running Flows, skips."""
        return await self._services.schedules.describe(schedule_id)

    async def list_schedules(self, page_size: int = 100, page_token: str = "") -> SchedulePage:
        """Return a page of Schedules ordered by ID; pass ``next_page_token`` back for more."""
        return await self._services.schedules.list(page_size, page_token)

    async def update_schedule(self, spec: ScheduleSpec) -> ScheduleDescription:
        """Replace the spec of the Schedule ``spec.schedule_id``; its counts and recent actions
        stay, and its next time moves only if its times changed."""
        return await self._services.schedules.update(spec)

    async def pause_schedule(self, schedule_id: str, note: str = "") -> ScheduleDescription:
        """Pause a Schedule with a note: it starts nothing on its own until unpaused."""
        return await self._services.schedules.set_paused(schedule_id, True, note)

    async def unpause_schedule(self, schedule_id: str, note: str = "") -> ScheduleDescription:
        """Unpause a Schedule with a note; the times it slept through are not made up."""
        return await self._services.schedules.set_paused(schedule_id, False, note)

    async def trigger_schedule(self, schedule_id: str) -> ScheduleTriggerResult:
        """Start one action now (``<scheduleId>-<now>``) under the overlap policy, paused or
        not; ``started`` is False when the policy skipped (or buffered) it."""
        return await self._services.schedules.trigger(schedule_id)

    async def backfill_schedule(
        self, schedule_id: str, start: datetime, end: datetime
    ) -> BackfillResult:
        """Act on every scheduled time in [start, end) as if it had come, under the overlap
        policy."""
        return await self._services.schedules.backfill(schedule_id, start, end)

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete a Schedule; the Flows it started keep running."""
        await self._services.schedules.delete(schedule_id)

    async def skip_timers(
        self, flow_id: str, step_execution_id: str, *, run_id: str | None = None
    ) -> int:
        """Fire now the Timers a pending Step execution's wait is on, as if their time had
        come; return how many fired. A wait with no Timer left raises InvalidArgumentError."""
        check_id(flow_id, "flowId")
        if not isinstance(step_execution_id, str) or not step_execution_id:
            raise InvalidArgumentError(
                "stepExecutionId must name a Step execution", field="stepExecutionId"
            )
        services = self._services
        result = await services.committer.commit(
            skip_timers(
                flow_id=flow_id,
                run_id=run_id,
                step_execution_id=step_execution_id,
                now=to_micros(services.clock.now()),
            )
        )
        fired: int = result.value
        return fired
