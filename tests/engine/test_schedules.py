"""Schedules through the engine API: times, overlap policies, pause, trigger, backfill,
catch-up across a restart, and delayed starts, on a ManualClock (no sleeps)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine import (
    Channel,
    Context,
    EngineConfig,
    Flow,
    InvalidArgumentError,
    ManualClock,
    OverlapPolicy,
    RPCResult,
    ScheduleAlreadyExistsError,
    ScheduleNotFoundError,
    ScheduleSpec,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    SubFlowOptions,
    Wait,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine

MINUTE = timedelta(minutes=1)
#: The ManualClock starts at 2027-01-15T08:00:00Z, a whole minute.
T0 = 1_800_000_000


class Work(Step[str]):
    """Runs until a message arrives on ``done``: a scheduled action that is still running."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(self.flow.done.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"did {input}")


class Job(Flow[str]):
    done = Channel("done", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Work())

    @rpc
    def ping(self, context: Context, input: str) -> RPCResult[str]:
        return RPCResult(f"pong {input}")


FLOWS = [Job()]


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def every_minute(schedule_id: str = "job", **changes: Any) -> ScheduleSpec:
    spec = ScheduleSpec(schedule_id, "Job", "nightly", every=MINUTE)
    return dataclasses.replace(spec, **changes)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=T0)


@pytest.fixture
def config(engine_config: EngineConfig, clock: ManualClock) -> EngineConfig:
    return dataclasses.replace(engine_config, clock=clock, retention=None)


async def statuses(eng: Any, schedule_id: str = "job") -> dict[str, str]:
    page = await eng.search_flows(f"ScheduleId = '{schedule_id}'")
    return {info.flow_id: info.status for info in page.flows}


async def test_every_minute_starts_one_flow_per_time_named_by_the_time(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        described = await eng.create_schedule(every_minute(overlap=OverlapPolicy.ALLOW_ALL))
        assert described.next_action_times == [at(T0 + 60 * n) for n in range(1, 6)]
        assert (described.recent_actions, described.running, described.skipped) == ([], [], 0)
        await clock.advance_when_idle(60)
        await clock.advance_when_idle(60)
        described = await eng.describe_schedule("job")
        started = await statuses(eng)
        result = await eng.invoke_rpc("ping", "job-20270115T080100Z", "a")
    assert started == {"job-20270115T080100Z": "RUNNING", "job-20270115T080200Z": "RUNNING"}
    assert [(a.flow_id, a.scheduled_at, a.status) for a in described.recent_actions] == [
        ("job-20270115T080200Z", at(T0 + 120), "RUNNING"),
        ("job-20270115T080100Z", at(T0 + 60), "RUNNING"),
    ]
    assert described.running == ["job-20270115T080100Z", "job-20270115T080200Z"]
    assert described.next_action_times[0] == at(T0 + 180)
    assert result == "pong a"


async def test_skip_skips_a_time_while_the_previous_action_runs(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute())
        await clock.advance_when_idle(120)
        described = await eng.describe_schedule("job")
        await eng.publish_to_channel("job-20270115T080100Z", "done", "ok")
        await settle(eng)
        await clock.advance_when_idle(60)
        after = await statuses(eng)
    assert described.skipped == 1 and described.running == ["job-20270115T080100Z"]
    assert after == {"job-20270115T080100Z": "COMPLETED", "job-20270115T080300Z": "RUNNING"}


async def test_buffer_one_starts_the_held_time_when_the_running_one_closes(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute(overlap=OverlapPolicy.BUFFER_ONE))
        await clock.advance_when_idle(180)  # 08:01 starts, 08:02 waits, 08:03 is skipped
        held = await eng.describe_schedule("job")
        await eng.publish_to_channel("job-20270115T080100Z", "done", "ok")
        await settle(eng)
        after = await statuses(eng)
    assert (held.running, held.skipped) == (["job-20270115T080100Z"], 1)
    assert after == {"job-20270115T080100Z": "COMPLETED", "job-20270115T080200Z": "RUNNING"}


@pytest.mark.parametrize(
    ("policy", "closed"),
    [(OverlapPolicy.CANCEL_OTHER, "CANCELED"), (OverlapPolicy.TERMINATE_OTHER, "TERMINATED")],
)
async def test_cancel_and_terminate_other_stop_the_running_action_then_start(
    config: EngineConfig, clock: ManualClock, policy: OverlapPolicy, closed: str
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute(overlap=policy))
        await clock.advance_when_idle(120)
        after = await statuses(eng)
        skipped = (await eng.describe_schedule("job")).skipped
    assert after == {"job-20270115T080100Z": closed, "job-20270115T080200Z": "RUNNING"}
    assert skipped == 0


async def test_pause_trigger_while_paused_and_unpause_without_making_up(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute(overlap=OverlapPolicy.ALLOW_ALL))
        paused = await eng.pause_schedule("job", "maintenance")
        await clock.advance_when_idle(150)  # 08:02:30: two times slept through
        assert await statuses(eng) == {}
        triggered = await eng.trigger_schedule("job")
        resumed = await eng.unpause_schedule("job", "back")
        await clock.advance_when_idle(30)
        after = await statuses(eng)
    assert (paused.spec.paused, paused.spec.note, paused.next_action_times) == (
        True,
        "maintenance",
        [],
    )
    assert (triggered.flow_id, triggered.started) == ("job-20270115T080230Z", True)
    assert triggered.run_id is not None
    assert (resumed.spec.paused, resumed.spec.note) == (False, "back")
    assert resumed.next_action_times[0] == at(T0 + 180)
    assert after == {"job-20270115T080230Z": "RUNNING", "job-20270115T080300Z": "RUNNING"}


async def test_trigger_under_skip_does_not_start_while_an_action_runs(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute())
        await clock.advance_when_idle(60)
        clock.advance(5)
        refused = await eng.trigger_schedule("job")
        skipped = (await eng.describe_schedule("job")).skipped
    assert (refused.flow_id, refused.run_id, refused.started) == (
        "job-20270115T080105Z",
        None,
        False,
    )
    assert skipped == 1


async def test_backfill_acts_on_every_time_of_the_range_under_the_policy(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute("all", overlap=OverlapPolicy.ALLOW_ALL))
        await eng.create_schedule(every_minute("one"))
        everything = await eng.backfill_schedule("all", at(T0 - 180), at(T0))
        first_only = await eng.backfill_schedule("one", at(T0 - 180), at(T0))
        with pytest.raises(InvalidArgumentError) as backwards:
            await eng.backfill_schedule("all", at(T0), at(T0 - 60))
    assert everything.started == [
        "all-20270115T075700Z",
        "all-20270115T075800Z",
        "all-20270115T075900Z",
    ]
    assert (everything.skipped, first_only.started, first_only.skipped) == (
        0,
        ["one-20270115T075700Z"],
        2,
    )
    assert backwards.value.field == "startAt"


async def test_a_cron_line_in_a_time_zone_across_the_spring_forward(
    config: EngineConfig, clock: ManualClock
) -> None:
    # 2027-03-14 02:30 does not exist in New York: cron fires at the change (03:00 EDT).
    clock.advance(datetime(2027, 3, 13, 17, 0, tzinfo=UTC).timestamp() - clock.now())
    spec = ScheduleSpec(
        "night",
        "Job",
        "n",
        cron="30 2 * * *",
        timezone="America/New_York",
        overlap=OverlapPolicy.ALLOW_ALL,
    )
    async with running_engine(FLOWS, config) as eng:
        described = await eng.create_schedule(spec)
        await clock.advance_when_idle(timedelta(hours=14).total_seconds())
        started = await statuses(eng, "night")
    assert described.next_action_times[:3] == [
        datetime(2027, 3, 14, 7, 0, tzinfo=UTC),  # 03:00 EDT, the change
        datetime(2027, 3, 15, 6, 30, tzinfo=UTC),  # 02:30 EDT
        datetime(2027, 3, 16, 6, 30, tzinfo=UTC),
    ]
    assert started == {"night-20270314T070000Z": "RUNNING"}


async def test_times_missed_while_down_fire_within_the_catchup_window_and_older_are_skipped(
    config: EngineConfig, clock: ManualClock
) -> None:
    spec = every_minute(overlap=OverlapPolicy.ALLOW_ALL, catchup_window=timedelta(minutes=3))
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(spec)
    clock.advance(5 * 60 + 30)  # down from 08:00 to 08:05:30: 08:01 and 08:02 are too old
    async with running_engine(FLOWS, config) as eng:
        await settle(eng)
        started = await statuses(eng)
        described = await eng.describe_schedule("job")
    assert sorted(started) == [
        "job-20270115T080300Z",
        "job-20270115T080400Z",
        "job-20270115T080500Z",
    ]
    assert described.skipped == 2
    assert described.next_action_times[0] == at(T0 + 360)


async def test_a_spec_is_checked_eagerly_naming_the_field(config: EngineConfig) -> None:
    bad = [
        (every_minute(flow_type="Nope"), "flowType"),
        (every_minute(cron="* * * * *"), "everySeconds"),
        (every_minute(every=None), "everySeconds"),
        (every_minute(every=None, cron="61 * * * *"), "cron"),
        (every_minute(every=None, cron="@daily", timezone="Mars/Olympus"), "timezone"),
        (every_minute(input=7), "input"),
        (every_minute(schedule_id="a/b"), "scheduleId"),
        (every_minute(start_options=StartFlowOptions(request_id="r")), "startOptions.requestId"),
    ]
    async with running_engine(FLOWS, config) as eng:
        for spec, field in bad:
            with pytest.raises(InvalidArgumentError) as refused:
                await eng.create_schedule(spec)
            assert refused.value.field == field, (spec, refused.value)
        await eng.create_schedule(every_minute())
        with pytest.raises(ScheduleAlreadyExistsError):
            await eng.create_schedule(every_minute())
        assert (await eng.list_schedules()).schedules[0].schedule_id == "job"


async def test_update_and_delete(config: EngineConfig, clock: ManualClock) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute(overlap=OverlapPolicy.ALLOW_ALL))
        await clock.advance_when_idle(60)
        updated = await eng.update_schedule(every_minute(every=timedelta(minutes=5), note="n"))
        await eng.delete_schedule("job")
        with pytest.raises(ScheduleNotFoundError):
            await eng.describe_schedule("job")
        with pytest.raises(ScheduleNotFoundError):
            await eng.delete_schedule("job")
        await clock.advance_when_idle(600)
        left = await statuses(eng)
    assert (updated.spec.every, updated.spec.note, updated.spec.overlap) == (
        timedelta(minutes=5),
        "n",
        OverlapPolicy.SKIP,
    )
    assert updated.next_action_times[0] == at(T0 + 300)
    assert [a.flow_id for a in updated.recent_actions] == ["job-20270115T080100Z"]
    assert left == {"job-20270115T080100Z": "RUNNING"}  # deleting stops no Flow


async def test_a_delayed_start_exists_at_once_and_runs_its_first_step_later(
    config: EngineConfig, clock: ManualClock
) -> None:
    options = StartFlowOptions(start_delay=timedelta(hours=1))
    async with running_engine(FLOWS, config) as eng:
        await eng.start_flow("Job", "later", "x", options)
        await settle(eng)
        info = await eng.describe_flow("later")
        [pending] = (await eng.list_pending_steps("later")).steps
        answer = await eng.invoke_rpc("ping", "later", "early")
        events = [e.event_type for e in (await eng.get_flow_history("later")).events]
        await clock.advance_when_idle(3600)
        await eng.publish_to_channel("later", "done", "ok")
        result = await eng.wait_for_flow("later", wait_seconds=5)
    assert (info.status, answer) == ("RUNNING", "pong early")
    assert (pending.phase, pending.due_at) == ("WAIT_FOR", at(T0 + 3600))
    assert events == ["FLOW_STARTED"]  # its first Step has not run
    assert (result.status, result.completions[0].output) == ("COMPLETED", "did x")


async def test_schedules_outlive_the_engine_that_created_them(
    config: EngineConfig, tmp_path: Path
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.create_schedule(every_minute(note="kept"))
    async with running_engine(FLOWS, config) as eng:
        described = await eng.describe_schedule("job")
    assert (described.spec.note, described.spec.input, described.spec.every) == (
        "kept",
        "nightly",
        MINUTE,
    )


class Child(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("child done")


class ChildFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Child())


class Parent(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(SubFlow.run(ChildFlow, None, SubFlowOptions(start_delay=MINUTE)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("parent done")


class ParentFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Parent())


async def test_a_subflow_with_a_start_delay_exists_at_once_and_runs_later(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine([ParentFlow(), ChildFlow()], config) as eng:
        await eng.start_flow(ParentFlow, "parent")
        await settle(eng)
        [waiting] = (await eng.list_pending_steps("parent")).steps
        [child_id] = waiting.sub_flows
        child = await eng.describe_flow(child_id)
        [delayed] = (await eng.list_pending_steps(child_id)).steps
        await clock.advance_when_idle(60)
        result = await eng.wait_for_flow("parent", wait_seconds=5)
    assert (child.status, child.parent_flow_id) == ("RUNNING", "parent")
    assert (delayed.step_type, delayed.due_at) == ("Child", at(T0 + 60))
    assert (result.status, result.completions[0].output) == ("COMPLETED", "parent done")
