"""Lock rules of seed 002 that held without a test: a retry keeps its locks across a restart,
a Step waiting for locks holds none, and the map-wide singleton coordination lock."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest

from engine import (
    Attribute,
    AttributeMap,
    Context,
    EngineConfig,
    Flow,
    ManualClock,
    RetryPolicy,
    RPCLockConflictError,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine

HOUR = timedelta(hours=1)


class FailOnce(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_lock_attributes=(self.flow.k.lock(),),
            execute_retry=RetryPolicy(max_attempts=2, initial_interval=HOUR, max_interval=HOUR),
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        if context.attempt == 1:
            raise RuntimeError("first attempt fails")
        self.flow.k.set(context, 1)
        return graceful_complete(None)


class RetryFlow(Flow[None]):
    k = Attribute("k", int)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(FailOnce())

    @rpc(lock_attributes=(k.lock(),))
    def touch(self, context: Context) -> RPCResult[str]:
        return RPCResult("touched")


async def test_a_retry_keeps_its_locks_while_it_waits_also_across_a_restart(
    engine_config: EngineConfig,
) -> None:
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([RetryFlow()], config) as eng:
        await eng.start_flow(RetryFlow, "r")
        await settle(eng)  # attempt 1 failed; attempt 2 is due in an hour
        with pytest.raises(RPCLockConflictError, match="locked by a Step"):
            await eng.invoke_rpc("touch", "r")
    async with running_engine([RetryFlow()], config) as eng:  # a restart
        with pytest.raises(RPCLockConflictError, match="locked by a Step"):
            await eng.invoke_rpc("touch", "r")
        await clock.advance_when_idle()  # the retry runs and completes
        result = await eng.wait_for_flow("r", wait_seconds=10)
    assert result.status == "COMPLETED"


@dataclasses.dataclass
class Gates:
    """Where a gated handler waits: each test makes its own and hands it to its Flow."""

    entered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class HoldA(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.a.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.gates.entered.set()
        await self.flow.gates.release.wait()
        return graceful_complete("held a")


class NeedAB(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.a.lock(), self.flow.b.lock()))

    async def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("had a and b")


class QueueFlow(Flow[None]):
    a = Attribute("a", int)
    b = Attribute("b", int)

    def __init__(self, gates: Gates) -> None:
        self.gates = gates

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(HoldA(), NeedAB())

    @rpc
    def begin(self, context: Context) -> RPCResult[None]:
        return RPCResult(
            None, next_steps=(StepMovement.of(HoldA, None), StepMovement.of(NeedAB, None))
        )

    @rpc(lock_attributes=(b.lock(),))
    def touch_b(self, context: Context) -> RPCResult[str]:
        return RPCResult("b")


async def test_a_step_waiting_for_locks_holds_none_of_them(engine_config: EngineConfig) -> None:
    gates = Gates()
    async with running_engine([QueueFlow(gates)], engine_config) as eng:
        await eng.start_flow(QueueFlow, "q")
        await eng.invoke_rpc("begin", "q")
        await asyncio.wait_for(gates.entered.wait(), 10)
        # HoldA holds a, so NeedAB waits behind it; waiting, it holds nothing (not even the
        # free b), so the RPC takes b at once.
        assert await eng.invoke_rpc("touch_b", "q") == "b"
        gates.release.set()
        await settle(eng)
        history = (await eng.get_flow_history("q")).events
    closed = [e.details["stepExecutionId"] for e in history if e.event_type == "STEP_CLOSED"]
    assert closed == ["HoldA-1", "NeedAB-1"]


class CollectionFlow(Flow[None]):
    messages = AttributeMap("messages", str)
    messages_lock = Attribute("messages-lock", bool)  # the coordination key; never set

    def __init__(self, gates: Gates) -> None:
        self.gates = gates

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc(lock_attributes=(messages_lock.lock(),))
    async def archive(self, context: Context) -> RPCResult[str]:
        self.gates.entered.set()
        await self.gates.release.wait()
        return RPCResult("archived")

    @rpc(lock_attributes=(messages_lock.lock(),))
    def rewrite(self, context: Context, input: str) -> RPCResult[None]:
        self.messages.set(context, "m1", input)
        return RPCResult(None)

    @rpc
    def write_one(self, context: Context, input: str) -> RPCResult[None]:
        # An instance-only writer: it does not take (or conflict with) the singleton lock.
        self.messages.set(context, "m2", input)
        return RPCResult(None)


async def test_the_map_wide_singleton_lock_serializes_its_writers_only(
    engine_config: EngineConfig,
) -> None:
    gates = Gates()
    async with running_engine([CollectionFlow(gates)], engine_config) as eng:
        await eng.start_flow(CollectionFlow, "c")
        archiving = asyncio.create_task(eng.invoke_rpc("archive", "c"))
        await asyncio.wait_for(gates.entered.wait(), 10)
        with pytest.raises(RPCLockConflictError, match="messages-lock is locked by an RPC"):
            await eng.invoke_rpc("rewrite", "c", "x")
        await eng.invoke_rpc("write_one", "c", "y")
        gates.release.set()
        assert await archiving == "archived"
        await eng.invoke_rpc("rewrite", "c", "x")
        values = await eng.get_attributes("c", ["messages/m1", "messages/m2", "messages-lock"])
    assert values.values == {"messages/m1": "x", "messages/m2": "y"}  # the bool is never set


class RetryFlowWithoutItsStep(Flow[None]):
    """RetryFlow as a later deploy serves it: the FailOnce Step type is gone."""

    k = Attribute("k", int)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc(lock_attributes=(k.lock(),))
    def touch(self, context: Context) -> RPCResult[str]:
        return RPCResult("touched")

    @classmethod
    def flow_type(cls) -> str:
        return "RetryFlow"


async def test_a_queued_retry_of_an_unregistered_step_type_keeps_its_locks_until_the_flow_stops(
    engine_config: EngineConfig,
) -> None:
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([RetryFlow()], config) as eng:
        await eng.start_flow(RetryFlow, "r")
        await settle(eng)  # attempt 1 failed; the retry waits an hour, holding k
    async with running_engine([RetryFlowWithoutItsStep()], config) as eng:
        with pytest.raises(RPCLockConflictError, match="attribute key k is locked by a Step"):
            await eng.invoke_rpc("touch", "r")
        await eng.stop_flow("r")
        await settle(eng)
        info = await eng.describe_flow("r")
    assert info.status == "CANCELED"
