"""engine.testing: settle() waits for the engine's own work, ManualClock skips time when idle."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import timedelta

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from engine import (
    Attribute,
    Context,
    EngineConfig,
    Flow,
    ManualClock,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from engine.testing import WaitingCalls, settle, waiting_calls
from tests.conftest import running_engine
from tests.support.waiting import eventually


class Count(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        self.flow.reached.set(context, input)
        if input < 5:
            return go_to(Count, input + 1)
        return graceful_complete(input)


class CountingFlow(Flow[int]):
    reached = Attribute("reached", int)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Count())


class Nap(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=input)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(f"woke after {input} h")


class NapFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Nap())


class Flaky(Step[None]):
    attempts = 0

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                max_attempts=3,
                initial_interval=timedelta(minutes=10),
                max_interval=timedelta(hours=1),
            )
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        Flaky.attempts += 1
        if Flaky.attempts < 3:
            raise RuntimeError(f"attempt {Flaky.attempts} fails")
        return graceful_complete(Flaky.attempts)


class FlakyFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Flaky())


class Listener(Flow[None]):
    status = Attribute("status", str)
    news = Stream("news", str)

    @rpc
    def publish(self, context: Context, input: str) -> None:
        self.status.set(context, input)


class Stuck(Step[None]):
    gate = threading.Event()

    def execute(self, context: Context, input: None) -> StepDecision:
        Stuck.gate.wait(30)
        return graceful_complete(None)


class StuckFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Stuck())

    @rpc
    def ping(self, context: Context) -> str:
        return "pong"


def manual(config: EngineConfig) -> tuple[EngineConfig, ManualClock]:
    """A config on a ManualClock; no retention, whose hourly check would be a deadline too."""
    clock = ManualClock()
    return dataclasses.replace(config, clock=clock, retention=None), clock


async def test_settle_returns_once_every_step_has_committed(engine_config: EngineConfig) -> None:
    async with running_engine([CountingFlow()], engine_config) as eng:
        await eng.start_flow(CountingFlow, "c1", 1)
        await settle(eng)
        result = await eng.wait_for_flow("c1")  # no wait: it has closed already
        assert result.status == "COMPLETED"
        assert [c.output for c in result.completions] == [5]
        assert (await eng.get_attributes("c1", ["reached"])).values == {"reached": 5}


async def test_settle_leaves_a_step_waiting_on_a_timer_alone(engine_config: EngineConfig) -> None:
    config, clock = manual(engine_config)
    async with running_engine([NapFlow()], config) as eng:
        await eng.start_flow(NapFlow, "n1", 3)
        await settle(eng)
        assert (await eng.wait_for_flow("n1")).status == "RUNNING"
        events = (await eng.get_flow_history("n1")).events
        assert [e.event_type for e in events] == ["FLOW_STARTED", "STEP_WAITING"]


async def test_advance_when_idle_skips_to_the_next_timer_and_runs_what_it_wakes(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([NapFlow()], config) as eng:
        started_at = clock.now()
        await eng.start_flow(NapFlow, "n2", 3)
        now = await clock.advance_when_idle()
        assert now == started_at + 3 * 3600
        result = await eng.wait_for_flow("n2")
        assert (result.status, result.completions[0].output) == ("COMPLETED", "woke after 3 h")


async def test_advance_when_idle_by_an_amount_stops_at_each_deadline_on_the_way(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    Flaky.attempts = 0
    async with running_engine([FlakyFlow()], config) as eng:
        started_at = clock.now()
        await eng.start_flow(FlakyFlow, "f1")
        # Two retries, ten and twenty minutes apart: one skip of an hour runs both.
        now = await clock.advance_when_idle(3600)
        assert now == started_at + 3600
        result = await eng.wait_for_flow("f1")
        assert (result.status, result.completions[0].output) == ("COMPLETED", 3)
        failed = [
            e.details["attempt"]
            for e in (await eng.get_flow_history("f1")).events
            if e.event_type == "STEP_ATTEMPT_FAILED"
        ]
        assert failed == [1, 2]


async def test_advance_when_idle_with_nothing_asleep_leaves_the_time_alone(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([CountingFlow()], config):
        before = clock.now()
        assert await clock.advance_when_idle() == before


async def test_settle_gives_up_naming_the_work_still_in_hand(engine_config: EngineConfig) -> None:
    Stuck.gate.clear()
    async with running_engine([StuckFlow()], engine_config) as eng:
        await eng.start_flow(StuckFlow, "s1")
        with pytest.raises(TimeoutError, match="1 Step attempts running"):
            await settle(eng, give_up_after=0.5)
        Stuck.gate.set()
        await settle(eng)
        assert (await eng.wait_for_flow("s1")).status == "COMPLETED"


async def test_waiting_calls_counts_the_long_polls_an_engine_holds_open(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([Listener()], engine_config) as eng:
        await eng.start_flow(Listener, "l1")
        assert waiting_calls(eng) == WaitingCalls(0, 0, 0)
        result = asyncio.create_task(eng.wait_for_flow("l1", wait_seconds=30))
        match = asyncio.create_task(
            eng.wait_for_attribute_match("l1", "status", "EQ", "on", wait_seconds=30)
        )
        read = asyncio.create_task(eng.read_stream("l1", Listener.news, wait_seconds=30))
        await eventually(lambda: waiting_calls(eng) == WaitingCalls(1, 1, 1))
        await eng.invoke_rpc("publish", "l1", "on")
        assert (await match).value == "on"
        await eng.write_stream("l1", Listener.news, "hello", source="test")
        message = await read
        assert message is not None and message.value == "hello"
        await eng.stop_flow("l1")
        assert (await result).status == "CANCELED"
        assert waiting_calls(eng) == WaitingCalls(0, 0, 0)


async def test_an_app_runs_on_a_manual_clock_given_by_engine_config(
    settings: Settings, engine_config: EngineConfig
) -> None:
    config, clock = manual(engine_config)
    app = create_app(settings, engine_config=config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            started = await client.post("/primitives/timer/start", json={"seconds": 600})
            assert started.status_code == 201
            flow_id = started.json()["flowId"]
            await clock.advance_when_idle(600)
            result = await client.get(f"/api/v1/flows/{flow_id}/result")
            assert result.json()["status"] == "COMPLETED"
            assert app.state.engine.clock is clock
            assert not asyncio.iscoroutine(clock.now())
