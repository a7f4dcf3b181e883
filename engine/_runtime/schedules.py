"""Schedules at run time: the calls that change and read them, and the firing of their times.

A Schedule's spec is validated once, eagerly (its Flow type, its times, its start's input and
options), and kept as JSON. The firing sleeps on the engine's clock until the earliest next
time of any Schedule (on a PostgreSQL database it also looks every poll interval of real time,
since another process may have created or changed one), then acts on each due Schedule in a
commit of its own (``_storage.schedules.act``): the times within the catch-up window start
their Flows under the overlap policy, older ones are counted as skipped, and the row moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from datetime import datetime
from typing import Any

from engine import _codec
from engine._ids import moment
from engine._limits import check_page_size
from engine._runtime.committer import Committer
from engine._runtime.ports import Database, TimerQueue
from engine._runtime.schedule_specs import (
    after_token,
    checked_id,
    checked_state,
    instant,
    spec_of,
    start_options,
    times_of,
)
from engine._runtime.schedule_times import MICROS, action_flow_id
from engine._runtime.starts import Starter
from engine._runtime.workload import Workload
from engine._storage import schedule_rows as stored
from engine._storage.records import StartRequest
from engine._storage.schedule_rows import Acted, Acting, ScheduleState
from engine._tokens import seal
from engine.clock import Clock, to_micros
from engine.errors import (
    InvalidArgumentError,
    ScheduleNotFoundError,
)
from engine.registry import Registry
from engine.schedule import (
    BackfillResult,
    ScheduleAction,
    ScheduleDescription,
    SchedulePage,
    ScheduleSpec,
    ScheduleTriggerResult,
)
from engine.telemetry import Telemetry

log = logging.getLogger("dexlite.schedules")

FIRING = "Schedule times firing"
#: Times one commit acts on; a Schedule further behind catches up over several commits.
TIMES_PER_COMMIT = 100
#: Due Schedules read at once by the firing.
SCHEDULES_PER_ROUND = 200
#: The most times one backfill may start.
MAX_BACKFILL = 1000
#: Real seconds before a round that failed (an outage) is tried again.
RETRY_SECONDS = 1.0
#: How many next times a description lists.
NEXT_TIMES = 5


class Schedules:
    """createSchedule and the other Schedule calls, and the task that fires their times."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        committer: Committer,
        starter: Starter,
        timers: TimerQueue,
        workload: Workload,
        clock: Clock,
        telemetry: Telemetry,
        poll_seconds: float | None = None,
    ) -> None:
        self._telemetry = telemetry
        self._registry = registry
        self._database = database
        self._committer = committer
        self._starter = starter
        self._timers = timers
        self._workload = workload
        self._clock = clock
        #: On a PostgreSQL database: how often to look for Schedules other processes changed.
        self._poll_seconds = poll_seconds
        self._armed: tuple[float, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._again = False
        self._closing = False
        #: Flow IDs whose close releases a buffered time (BUFFER_ONE).
        self._blockers: set[str] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Fire what is due now (times missed while no process served), then sleep."""
        self._arm(self._clock.now())
        if self._poll_seconds is not None:
            self._watcher = asyncio.get_running_loop().create_task(
                self._watch_others(self._poll_seconds), name="dexlite-schedule-watch"
            )

    async def stop(self) -> None:
        """Stop firing; a commit in progress finishes first."""
        self._closing = True
        if self._armed is not None:
            self._armed[1].cancel()
        for task in (self._watcher, self._task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def closed(self, flow_id: str) -> None:
        """Hear that a run of ``flow_id`` closed: a buffered time it held back may start."""
        if flow_id in self._blockers:
            self._blockers.discard(flow_id)
            self._arm(self._clock.now())

    def _arm(self, when: float) -> None:
        if self._closing:
            return
        if self._task is not None and not self._task.done():
            self._again = True  # the round in progress looks again when it ends
            return
        if self._armed is not None:
            if self._armed[0] <= when:
                return
            self._armed[1].cancel()
        self._armed = (when, self._timers.call_at(when, self._fire))

    def _fire(self) -> None:
        self._armed = None
        self._workload.enter(FIRING)
        self._task = asyncio.get_running_loop().create_task(self._round())
        self._task.add_done_callback(lambda _task: self._workload.leave(FIRING))

    async def _round(self) -> None:
        try:
            while True:
                self._again = False
                now = to_micros(self._clock.now())
                due = await stored.due(self._database, now, SCHEDULES_PER_ROUND)
                # Concurrently: their commits share the writer's group commits (SQLite) or
                # the pool (PostgreSQL), so a thousand Schedules due at once start on time.
                outcomes = await asyncio.gather(
                    *(self._act_on_due(state, now) for state in due), return_exceptions=True
                )
                for state, outcome in zip(due, outcomes, strict=True):
                    if isinstance(outcome, Exception):
                        log.error(
                            "Schedule %s: acting on its times failed: %s",
                            state.schedule_id,
                            outcome,
                        )
                if not self._again and len(due) < SCHEDULES_PER_ROUND:
                    break
        except asyncio.CancelledError:
            raise
        except Exception:  # the database is out, say: a round a little later tries again
            log.exception("firing Schedule times failed")
            self._task = None
            self._arm(self._clock.now() + RETRY_SECONDS)
            return
        self._task = None
        await self._arm_earliest()

    async def _arm_earliest(self) -> None:
        found = await stored.earliest(self._database)
        if found is not None:
            self._arm(found / MICROS)

    async def _watch_others(self, poll_seconds: float) -> None:
        """Every ``poll_seconds`` of real time, arm for the earliest time of any Schedule:
        another process may have created or changed one (each time still fires once)."""
        while True:
            await asyncio.sleep(poll_seconds)
            try:
                await self._arm_earliest()
            except Exception as exc:  # an outage: the next poll tries again
                log.warning("looking for Schedules failed: %s", exc)

    async def _act_on_due(self, state: ScheduleState, now: int) -> None:
        times = times_of(state.spec)
        release = None
        if state.buffered is not None:
            release = (state.buffered, await self._request(state, state.buffered))
        acting = Acting(state.schedule_id, release=release)
        if not state.paused and state.next_time <= now:
            # Times older than the catch-up window are skipped (counted); the rest start.
            window = to_micros(float(state.spec["catchupWindowSeconds"]))
            missed, first = times.count_before(state.next_time, now - window)
            ready = times.between(first, now + 1, TIMES_PER_COMMIT)
            acting.times = [(when, await self._request(state, when)) for when in ready]
            acting.expect_next = state.next_time
            # After a full batch the next round goes on from there (its time is past).
            acting.new_next = times.next(ready[-1]) if ready else first
            acting.missed = missed
        result = await self._committer.commit(stored.act(acting, now))
        acted: Acted = result.value
        if acted.applied:
            # The lag runs to the start's commit, not to the round that found the time due.
            done = to_micros(self._clock.now())
            lags = [(done - when) / MICROS for when, _, _ in acted.started]
            self._report(state, acted, lags)
        if acted.buffered or (state.buffered is not None and acted.applied):
            await self._watch_blocker(state.schedule_id)
        if acted.started or acted.skipped:
            log.debug(
                "Schedule %s: started %s, skipped %d",
                state.schedule_id,
                [flow_id for _, flow_id, _ in acted.started],
                acted.skipped,
            )

    def _report(self, state: ScheduleState, acted: Acted, lags: list[float]) -> None:
        if acted.started or acted.skipped:
            self._telemetry.schedule_acted(
                state.schedule_id, state.overlap, len(acted.started), acted.skipped, lags
            )

    async def _watch_blocker(self, schedule_id: str) -> None:
        """Remember which Flow's close releases the Schedule's buffered time."""
        state = await stored.load(self._database, schedule_id)
        if state is not None and state.buffered is not None and state.last_flow_id:
            self._blockers.add(state.last_flow_id)
            if not await stored.flow_running(self._database, state.last_flow_id):
                self._arm(self._clock.now())  # it closed meanwhile

    async def _request(self, state: ScheduleState, when: int) -> StartRequest:
        """Prepare the start of the action of time ``when``."""
        spec = state.spec
        flow = self._registry.spec(state.flow_type)
        request = await self._starter.prepare(
            flow,
            action_flow_id(state.schedule_id, when),
            _codec.from_jsonable(spec["input"]),
            start_options(spec["startOptions"], state.schedule_id, when),
        )
        return dataclasses.replace(request, schedule_id=state.schedule_id)

    # -- calls --------------------------------------------------------------------------------

    async def create(self, spec: ScheduleSpec) -> ScheduleDescription:
        """Create a Schedule (createSchedule)."""
        state = await checked_state(
            self._registry, self._starter, spec, to_micros(self._clock.now())
        )
        await self._committer.commit(stored.create(state))
        self._arm(state.next_time / MICROS)
        return await self.describe(spec.schedule_id)

    async def update(self, spec: ScheduleSpec) -> ScheduleDescription:
        """Replace a Schedule's spec (updateSchedule); its counters and actions stay."""
        current = await self._load(spec.schedule_id)
        state = await checked_state(
            self._registry, self._starter, spec, to_micros(self._clock.now())
        )
        same_times = all(
            current.spec[key] == state.spec[key] for key in ("everySeconds", "cron", "timezone")
        )
        await self._committer.commit(stored.replace_spec(state, keep_next=same_times))
        self._arm(self._clock.now())
        return await self.describe(spec.schedule_id)

    async def set_paused(self, schedule_id: str, paused: bool, note: str) -> ScheduleDescription:
        """Pause or unpause a Schedule with a note (pauseSchedule, unpauseSchedule)."""
        if not isinstance(note, str):
            raise InvalidArgumentError("note must be a string", field="note")
        current = await self._load(schedule_id)
        now = to_micros(self._clock.now())
        next_time = times_of(current.spec).next(now)
        await self._committer.commit(stored.set_paused(schedule_id, paused, note, next_time, now))
        self._arm(self._clock.now())
        return await self.describe(schedule_id)

    async def delete(self, schedule_id: str) -> None:
        """Delete a Schedule; the Flows it started keep running (deleteSchedule)."""
        await self._committer.commit(stored.remove(checked_id(schedule_id)))

    async def trigger(self, schedule_id: str) -> ScheduleTriggerResult:
        """Start one action now, under the overlap policy (triggerSchedule)."""
        state = await self._load(schedule_id)
        now = to_micros(self._clock.now())
        when = now - now % MICROS  # the Flow ID names whole seconds
        flow_id = action_flow_id(schedule_id, when)
        request = await self._request(state, when)
        result = await self._committer.commit(
            stored.act(Acting(schedule_id, times=[(when, request)]), now)
        )
        acted: Acted = result.value
        self._report(state, acted, [])
        if acted.buffered:
            await self._watch_blocker(schedule_id)
        if not acted.started:
            return ScheduleTriggerResult(flow_id, None, False)
        _, started_id, run_id = acted.started[0]
        return ScheduleTriggerResult(started_id, run_id, True)

    async def backfill(self, schedule_id: str, start: datetime, end: datetime) -> BackfillResult:
        """Act on every scheduled time in [start, end) as if it had come (backfillSchedule)."""
        first, last = instant(start, "startAt"), instant(end, "endAt")
        if first >= last:
            raise InvalidArgumentError("startAt must be before endAt", field="startAt")
        state = await self._load(schedule_id)
        when = times_of(state.spec).between(first, last, MAX_BACKFILL + 1)
        if len(when) > MAX_BACKFILL:
            raise InvalidArgumentError(
                f"a backfill starts at most {MAX_BACKFILL} times; this range holds more",
                field="endAt",
            )
        requests = [(at, await self._request(state, at)) for at in when]
        now = to_micros(self._clock.now())
        result = await self._committer.commit(stored.act(Acting(schedule_id, times=requests), now))
        acted: Acted = result.value
        self._report(state, acted, [])
        if acted.buffered:
            await self._watch_blocker(schedule_id)
        return BackfillResult([flow_id for _, flow_id, _ in acted.started], acted.skipped)

    async def describe(self, schedule_id: str) -> ScheduleDescription:
        """Describe a Schedule (describeSchedule)."""
        return await self._described(await self._load(schedule_id))

    async def list(self, page_size: int, page_token: str) -> SchedulePage:
        """Return a page of Schedules by ID (listSchedules)."""
        check_page_size(page_size)
        after = after_token(page_token)
        found = await stored.page(self._database, after, page_size + 1)
        more = len(found) > page_size
        found = found[:page_size]
        token = seal(found[-1].schedule_id.encode()) if more else ""
        return SchedulePage([await self._described(state) for state in found], token)

    async def _load(self, schedule_id: str) -> ScheduleState:
        state = await stored.load(self._database, checked_id(schedule_id))
        if state is None:
            raise ScheduleNotFoundError(f"Schedule {schedule_id} was not found")
        return state

    async def _described(self, state: ScheduleState) -> ScheduleDescription:
        actions = await stored.actions(self._database, state.schedule_id)
        running = await stored.running(self._database, state.schedule_id)
        upcoming: list[datetime] = []
        if not state.paused:
            times = times_of(state.spec).after(state.next_time - 1)
            upcoming = [moment(next(times)) for _ in range(NEXT_TIMES)]
        return ScheduleDescription(
            spec=spec_of(state),
            next_action_times=upcoming,
            recent_actions=[
                ScheduleAction(
                    moment(a.scheduled_at), moment(a.started_at), a.flow_id, a.run_id, a.status
                )
                for a in actions
            ],
            running=running,
            skipped=state.skipped,
            created_at=moment(state.created_at),
            updated_at=moment(state.updated_at),
        )
