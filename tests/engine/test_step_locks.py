"""Step locks: taken at hand-out, held until the decision commits, queued among Steps."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest

from engine import (
    Attribute,
    Context,
    EngineConfig,
    Flow,
    ManualClock,
    RetryPolicy,
    RPCLockConflictError,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    dead_end,
    go_to_many,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine


class Trace:
    events: list[str]
    entered: asyncio.Event
    release: dict[str, asyncio.Event]


class Fork(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Worker, "first"), StepMovement.of(Worker, "second"))


class Worker(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_lock_attributes=(self.flow.ledger.lock(),),
            execute_retry=RetryPolicy(max_attempts=2, initial_interval=timedelta(seconds=10)),
        )

    async def execute(self, context: Context, input: str) -> StepDecision:
        Trace.events.append(f"enter {input}")
        Trace.entered.set()
        await Trace.release[input].wait()
        if input == "first" and context.attempt == 1:
            # Its retry keeps the lock while it waits: the engine is idle, the lock still held.
            Trace.events.append("fail first")
            raise RuntimeError("the first attempt fails")
        self.flow.ledger.set(context, [*(self.flow.ledger.get(context) or []), input])
        Trace.events.append(f"leave {input}")
        return dead_end()


class LedgerFlow(Flow[None]):
    ledger = Attribute("ledger", list[str])

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Fork()).other_steps(Worker())

    @rpc(lock_attributes=(ledger.lock(),))
    def append(self, context: Context, input: str) -> list[str]:
        value = [*(self.ledger.get(context) or []), input]
        self.ledger.set(context, value)
        return value


@pytest.fixture(autouse=True)
def _trace() -> None:
    Trace.events = []
    Trace.entered = asyncio.Event()
    Trace.release = {"first": asyncio.Event(), "second": asyncio.Event()}


async def test_steps_needing_the_same_lock_run_one_after_the_other_in_order(
    engine_config: EngineConfig,
) -> None:
    clock = ManualClock()  # no retention either: its hourly check would be a deadline too
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([LedgerFlow()], config) as eng:
        await eng.start_flow(LedgerFlow, "locks", None)
        await asyncio.wait_for(Trace.entered.wait(), 5)
        assert Trace.events == ["enter first"]
        with pytest.raises(RPCLockConflictError, match="locked by a Step"):
            await eng.invoke_rpc("append", "locks", "rpc")  # the running Step holds the lock
        # Let both go; the second would leave at once were it let in before the first is done.
        Trace.release["second"].set()
        Trace.release["first"].set()
        await settle(eng)  # the first Step's retry waits 10 s; the second Step waits behind it
        assert Trace.events == ["enter first", "fail first"]
        with pytest.raises(RPCLockConflictError, match="locked by a Step"):
            await eng.invoke_rpc("append", "locks", "rpc")
        await clock.advance_when_idle(10)
        assert Trace.events == [
            "enter first",
            "fail first",
            "enter first",
            "leave first",
            "enter second",
            "leave second",
        ]
        # Each Step saw the other's committed write: no lost update.
        ledger = (await eng.get_attributes("locks", ["ledger"])).values.get("ledger")
        assert ledger == ["first", "second"]
        assert await eng.invoke_rpc("append", "locks", "rpc") == ["first", "second", "rpc"]
