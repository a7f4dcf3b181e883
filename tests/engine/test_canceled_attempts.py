"""A canceled attempt whose `def` handler is still running keeps its locks until the handler
returns, or about one second (the seed: "Dex waits about one second for the canceled attempt
to end"); whatever it returns is discarded."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

from engine import (
    Attribute,
    Context,
    Engine,
    EngineConfig,
    Flow,
    ManualClock,
    RPCLockConflictError,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)
from engine._runtime.scheduler import CANCEL_GRACE_SECONDS
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.waiting import eventually


class Trace:
    events: list[str] = []
    started = threading.Event()
    release = threading.Event()


class Start(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Slow, None), StepMovement.of(Canceler, None))


class Slow(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.guarded.lock(),))

    def execute(self, context: Context, input: None) -> StepDecision:  # a thread: uncancelable
        Trace.started.set()
        Trace.release.wait(30)
        Trace.events.append("slow returned")
        self.flow.guarded.set(context, "by slow")  # discarded: the attempt was canceled
        return graceful_complete("slow")


class Canceler(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        await asyncio.to_thread(Trace.started.wait, 30)
        return go_to(Next, None).with_canceling_steps(Slow)


class Next(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.guarded.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        Trace.events.append("next ran")
        self.flow.guarded.set(context, "by next")
        return graceful_complete("next")


class GuardedFlow(Flow[None]):
    guarded = Attribute("guarded", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Start()).other_steps(Slow(), Canceler(), Next())


def _reset() -> None:
    Trace.events = []
    Trace.started, Trace.release = threading.Event(), threading.Event()


async def test_the_next_step_waits_for_the_canceled_handler_to_return(
    engine_config: EngineConfig,
) -> None:
    _reset()
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([GuardedFlow()], config) as eng:
        await eng.start_flow(GuardedFlow, "g")
        await asyncio.to_thread(Trace.started.wait, 30)
        await settle(eng)  # Canceler's decision committed; Next waits for the lock
        waited = list(Trace.events)
        Trace.release.set()
        result = await eng.wait_for_flow("g", wait_seconds=30)
        values = await eng.get_attributes("g", ["guarded"])
    assert waited == []  # Next did not run beside the canceled handler
    assert Trace.events == ["slow returned", "next ran"]
    assert [c.step_type for c in result.completions] == ["Next"]
    assert values.values == {"guarded": "by next"}


async def test_a_canceled_handler_that_does_not_return_holds_its_locks_about_a_second(
    engine_config: EngineConfig,
) -> None:
    _reset()
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([GuardedFlow()], config) as eng:
        await eng.start_flow(GuardedFlow, "g")
        await asyncio.to_thread(Trace.started.wait, 30)
        await settle(eng)
        before = clock.now()
        released_at = await clock.advance_when_idle()  # to the grace's end
        result = await eng.wait_for_flow("g", wait_seconds=30)
        ran = list(Trace.events)
        Trace.release.set()  # let the thread end; its result is discarded
        await eventually(lambda: "slow returned" in Trace.events, what="the thread to end")
        await settle(eng)
        values = await eng.get_attributes("g", ["guarded"])
    assert released_at - before == 1.0
    assert ran == ["next ran"]
    assert result.status == "COMPLETED"
    assert values.values == {"guarded": "by next"}


# -- an ``async def`` handler that swallows its cancellation -----------------------------------


class Stubborn:
    release = asyncio.Event()


class SlowAsync(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.guarded.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        Trace.started.set()
        try:
            await Stubborn.release.wait()
        except asyncio.CancelledError:  # a handler that will not stop when told
            Trace.events.append("slow swallowed its cancellation")
            await Stubborn.release.wait()
        Trace.events.append("slow returned")
        self.flow.guarded.set(context, "by slow")  # discarded: the attempt was canceled
        return graceful_complete("slow")


class StartAsync(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(SlowAsync, None), StepMovement.of(CancelerAsync, None))


class CancelerAsync(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        await asyncio.to_thread(Trace.started.wait, 30)
        return go_to(Next, None).with_canceling_steps(SlowAsync)


class GuardedAsyncFlow(Flow[None]):
    guarded = Attribute("guarded", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(StartAsync()).other_steps(SlowAsync(), CancelerAsync(), Next())

    @rpc(lock_attributes=(guarded.lock(),))
    def touch(self, context: Context) -> str:
        return "touched"


async def _canceled_but_running(eng: Engine) -> None:
    """Start the Flow and return once the stubborn handler has swallowed its cancellation
    (the engine is not idle then: that attempt is still running, so no settle)."""
    await eng.start_flow(GuardedAsyncFlow, "a")
    await eventually(
        lambda: "slow swallowed its cancellation" in Trace.events, what="the cancellation"
    )


async def test_an_async_handler_that_swallows_its_cancellation_holds_its_locks_until_it_returns(
    engine_config: EngineConfig,
) -> None:
    _reset()
    Stubborn.release = asyncio.Event()
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([GuardedAsyncFlow()], config) as eng:
        await _canceled_but_running(eng)
        with pytest.raises(RPCLockConflictError):  # its lock is still held...
            await eng.invoke_rpc("touch", "a")
        pending = [s.step_type for s in (await eng.list_pending_steps("a")).steps]
        Stubborn.release.set()  # ...until it returns
        result = await eng.wait_for_flow("a", wait_seconds=30)
        values = await eng.get_attributes("a", ["guarded"])
    assert pending == ["Next"]  # queued behind the lock, not run beside the handler
    assert Trace.events == ["slow swallowed its cancellation", "slow returned", "next ran"]
    assert [c.step_type for c in result.completions] == ["Next"]
    assert values.values == {"guarded": "by next"}


async def test_an_async_handler_that_never_returns_holds_its_locks_about_a_second(
    engine_config: EngineConfig,
) -> None:
    _reset()
    Stubborn.release = asyncio.Event()
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([GuardedAsyncFlow()], config) as eng:
        await _canceled_but_running(eng)
        with pytest.raises(RPCLockConflictError):
            await eng.invoke_rpc("touch", "a")
        clock.advance(CANCEL_GRACE_SECONDS)  # the grace ends: its locks go
        await eventually(lambda: "next ran" in Trace.events, what="Next to run")
        result = await eng.wait_for_flow("a", wait_seconds=30)
        ran = list(Trace.events)
        Stubborn.release.set()  # let it end; what it returns is discarded
        await eventually(lambda: "slow returned" in Trace.events, what="the handler to end")
        await settle(eng)
        values = await eng.get_attributes("a", ["guarded"])
    assert ran == ["slow swallowed its cancellation", "next ran"]
    assert result.status == "COMPLETED"
    assert values.values == {"guarded": "by next"}
