"""SkipTimer: an operator fires the Timers a pending Step execution waits on, now."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from engine import (
    Channel,
    Context,
    EngineConfig,
    Flow,
    FlowNotFoundError,
    InvalidArgumentError,
    ManualClock,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    graceful_complete,
)
from engine.testing import settle
from tests.conftest import running_engine

HOUR = timedelta(hours=1)


class Nap(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        flow = self.flow
        if input == "timer":
            return Wait.until(Timer.by_duration(HOUR))
        if input == "either":
            return Wait.any_of(flow.go.for_one(), Timer.by_duration(HOUR))
        if input == "both":
            return Wait.all_of(flow.go.for_one(), Timer.by_duration(HOUR))
        return Wait.until(flow.go.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"woke ({input})")


class NapFlow(Flow[str]):
    go = Channel("go", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Nap())


@pytest.fixture
def config(engine_config: EngineConfig) -> EngineConfig:
    return dataclasses.replace(engine_config, clock=ManualClock(), retention=None)


async def test_a_step_waiting_an_hour_runs_now(config: EngineConfig) -> None:
    async with running_engine([NapFlow()], config) as eng:
        await eng.start_flow("NapFlow", "n1", "timer")
        await settle(eng)
        fired = await eng.skip_timers("n1", "Nap-1")
        await settle(eng)
        result = await eng.wait_for_flow("n1")
        events = [e for e in (await eng.get_flow_history("n1")).events]
    assert (fired, result.status, result.completions[0].output) == (1, "COMPLETED", "woke (timer)")
    [skip] = [e.details for e in events if e.event_type == "TIMERS_SKIPPED"]
    assert skip == {"stepType": "Nap", "stepExecutionId": "Nap-1", "fired": 1}


async def test_a_wait_on_a_timer_or_a_message_completes_by_the_timer(config: EngineConfig) -> None:
    async with running_engine([NapFlow()], config) as eng:
        await eng.start_flow("NapFlow", "n2", "either")
        await settle(eng)
        assert await eng.skip_timers("n2", "Nap-1") == 1
        await settle(eng)
        result = await eng.wait_for_flow("n2")
    assert (result.status, result.completions[0].output) == ("COMPLETED", "woke (either)")


async def test_a_wait_on_a_timer_and_a_message_still_needs_the_message(
    config: EngineConfig,
) -> None:
    async with running_engine([NapFlow()], config) as eng:
        await eng.start_flow("NapFlow", "n3", "both")
        await settle(eng)
        assert await eng.skip_timers("n3", "Nap-1") == 1
        await settle(eng)
        waiting = await eng.wait_for_flow("n3")
        [pending] = (await eng.list_pending_steps("n3")).steps
        with pytest.raises(InvalidArgumentError) as again:
            await eng.skip_timers("n3", "Nap-1")  # its Timer has fired already
        await eng.publish_to_channel("n3", "go", "now")
        await settle(eng)
        result = await eng.wait_for_flow("n3")
    assert (waiting.status, pending.phase, pending.channels) == ("RUNNING", "WAITING", ["go"])
    assert again.value.field == "stepExecutionId"
    assert (result.status, result.completions[0].output) == ("COMPLETED", "woke (both)")


async def test_a_wait_without_a_timer_and_unknown_names_are_refused(config: EngineConfig) -> None:
    async with running_engine([NapFlow()], config) as eng:
        await eng.start_flow("NapFlow", "n4", "message")
        await settle(eng)
        with pytest.raises(InvalidArgumentError) as no_timer:
            await eng.skip_timers("n4", "Nap-1")
        with pytest.raises(InvalidArgumentError) as no_step:
            await eng.skip_timers("n4", "Nap-9")
        with pytest.raises(FlowNotFoundError):
            await eng.skip_timers("nobody", "Nap-1")
        still = await eng.wait_for_flow("n4")
    assert no_timer.value.field == no_step.value.field == "stepExecutionId"
    assert "waits on no Timer" in no_timer.value.detail
    assert still.status == "RUNNING"
