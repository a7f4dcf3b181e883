"""listPendingSteps: each open Step execution's phase, attempt, due time and what it waits on."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from engine import (
    Channel,
    ChannelMap,
    Context,
    EngineConfig,
    Flow,
    FlowNotFoundError,
    ManualClock,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    SubFlow,
    Timer,
    Wait,
    graceful_complete,
)
from engine.testing import settle
from tests.conftest import running_engine

HOUR = timedelta(hours=1)


class Nap(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(Timer.by_duration(HOUR))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("rested")


class Listen(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        flow = self.flow
        return Wait.any_of(
            Wait.all_of(flow.orders.for_one(), flow.per_region.for_one("eu")),
            Timer.by_duration(timedelta(minutes=5)),
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("heard")


class Flaky(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(max_attempts=3, initial_interval=timedelta(seconds=10))
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        raise RuntimeError("not yet")


class Child(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(Timer.by_duration(HOUR))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("grown")


class ChildFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Child())


class Parent(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(SubFlow.run(ChildFlow))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("raised")


class NapFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Nap())


class ListenFlow(Flow[None]):
    orders = Channel("orders", str)
    per_region = ChannelMap("per-region", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Listen())


class FlakyFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Flaky())


class ParentFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Parent())


def _now(clock: ManualClock) -> datetime:
    return datetime.fromtimestamp(clock.now(), UTC)


FLOWS = [NapFlow(), ListenFlow(), FlakyFlow(), ParentFlow(), ChildFlow()]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def config(engine_config: EngineConfig, clock: ManualClock) -> EngineConfig:
    return dataclasses.replace(engine_config, clock=clock, retention=None)


async def test_a_step_waiting_on_a_timer_alone_is_due_when_it_fires(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        started = await eng.start_flow("NapFlow", "nap-1", None)
        await settle(eng)
        found = await eng.list_pending_steps("nap-1")
        fires = _now(clock) + HOUR
        [step] = found.steps
        assert (found.flow_id, found.run_id) == ("nap-1", started.run_id)
        assert (step.step_execution_id, step.step_type) == ("Nap-1", "Nap")
        assert (step.phase, step.attempt, step.due_at, step.timers) == (
            "EXECUTE",
            1,
            fires,
            [fires],
        )
        assert (step.channels, step.sub_flows) == ([], [])
        await clock.advance_when_idle(HOUR.total_seconds())
        assert (await eng.wait_for_flow("nap-1")).status == "COMPLETED"
        closed = await eng.list_pending_steps("nap-1")
    assert (closed.run_id, closed.steps) == (started.run_id, [])


async def test_a_waiting_step_names_its_channels_and_timers(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.start_flow("ListenFlow", "listen-1", None)
        await settle(eng)
        [step] = (await eng.list_pending_steps("listen-1")).steps
    assert (step.step_type, step.phase, step.attempt, step.due_at) == ("Listen", "WAITING", 1, None)
    assert step.channels == ["orders", "per-region/eu"]
    assert step.timers == [_now(clock) + timedelta(minutes=5)]
    assert step.sub_flows == []


async def test_a_retry_waiting_out_its_back_off_shows_its_attempt_and_when_it_runs(
    config: EngineConfig, clock: ManualClock
) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.start_flow("FlakyFlow", "flaky-1", None)
        await settle(eng)
        [step] = (await eng.list_pending_steps("flaky-1")).steps
    assert (step.step_execution_id, step.phase, step.attempt) == ("Flaky-1", "EXECUTE", 2)
    assert step.due_at == _now(clock) + timedelta(seconds=10)
    assert step.timers == []  # a back-off, not a Timer


async def test_a_step_waiting_on_a_subflow_names_the_child(config: EngineConfig) -> None:
    async with running_engine(FLOWS, config) as eng:
        await eng.start_flow("ParentFlow", "parent-1", None)
        await settle(eng)
        [step] = (await eng.list_pending_steps("parent-1")).steps
        [child] = step.sub_flows
        info = await eng.describe_flow(child)
    assert (step.phase, step.channels, step.timers) == ("WAITING", [], [])
    assert (info.flow_type, info.parent_flow_id) == ("ChildFlow", "parent-1")


async def test_an_earlier_run_and_an_unknown_flow(config: EngineConfig) -> None:
    async with running_engine(FLOWS, config) as eng:
        with pytest.raises(FlowNotFoundError):
            await eng.list_pending_steps("nobody")
        first = await eng.start_flow("NapFlow", "nap-2", None)
        await settle(eng)
        await eng.stop_flow("nap-2", "TERMINATE", "again")
        await eng.start_flow("NapFlow", "nap-2", None)
        await settle(eng)
        earlier = await eng.list_pending_steps("nap-2", first.run_id)
        latest = await eng.list_pending_steps("nap-2")
    assert (earlier.run_id, earlier.steps) == (first.run_id, [])
    assert latest.run_id != first.run_id and [s.step_type for s in latest.steps] == ["Nap"]
