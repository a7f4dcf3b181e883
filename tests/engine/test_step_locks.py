"""Step locks: taken at hand-out, held until the decision commits, queued among Steps."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import (
    Attribute,
    Context,
    EngineConfig,
    Flow,
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
from tests.conftest import running_engine


class Trace:
    events: list[str]
    release: dict[str, asyncio.Event]


class Fork(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Worker, "first"), StepMovement.of(Worker, "second"))


class Worker(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.ledger.lock(),))

    async def execute(self, context: Context, input: str) -> StepDecision:
        Trace.events.append(f"enter {input}")
        await Trace.release[input].wait()
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
    Trace.release = {"first": asyncio.Event(), "second": asyncio.Event()}


async def _wait_for(predicate: Any) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


async def test_steps_needing_the_same_lock_run_one_after_the_other_in_order(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([LedgerFlow()], engine_config) as eng:
        await eng.start_flow(LedgerFlow, "locks", None)
        await _wait_for(lambda: Trace.events == ["enter first"])
        await asyncio.sleep(0.1)
        assert Trace.events == ["enter first"]  # the second Step waits behind the first
        with pytest.raises(RPCLockConflictError, match="locked by a Step"):
            await eng.invoke_rpc("append", "locks", "rpc")
        Trace.release["second"].set()
        Trace.release["first"].set()
        await _wait_for(lambda: len(Trace.events) == 4)
        assert Trace.events == ["enter first", "leave first", "enter second", "leave second"]

        # Each Step saw the other's committed write: no lost update.
        async def ledger() -> Any:
            return (await eng.get_attributes("locks", ["ledger"])).values.get("ledger")

        for _ in range(200):
            if await ledger() == ["first", "second"]:
                break
            await asyncio.sleep(0.01)
        assert await ledger() == ["first", "second"]
        assert await eng.invoke_rpc("append", "locks", "rpc") == ["first", "second", "rpc"]
