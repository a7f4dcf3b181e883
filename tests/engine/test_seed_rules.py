"""Rules of seed 002 that held without a test: reads of committed state only, an RPC reading
its own staged writes, whole-map enumeration, RPCs pinned to an older run, closed-run erases."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeMap,
    AttributeMapNotLoadedError,
    Channel,
    Context,
    EngineConfig,
    Flow,
    FlowNotActiveOrNotFoundError,
    ManualClock,
    RetryPolicy,
    RPCLockConflictError,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Stream,
    Timer,
    Wait,
    go_to_many,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.flow_clients import ServeFlows


@dataclasses.dataclass
class Gate:
    """Where a gated handler waits: a test makes its own and hands it to the Flow it registers."""

    entered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class Busy(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.count.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.count.set(context, 99)  # staged: invisible until the decision commits
        self.flow.gate.entered.set()
        await self.flow.gate.release.wait()
        return graceful_complete(None)


class RulesFlow(Flow[None]):
    count = Attribute("count", int)
    notes = AttributeMap("notes", str)
    secret = Attribute("secret", str, hard_delete_on_null=True)
    label = Attribute("label", str)

    def __init__(self, gate: Gate | None = None) -> None:
        # Without one (a test that opens no gate, or the server process of ``serve_flows``,
        # which instantiates the class without arguments) the Flow has a gate of its own.
        self.gate = Gate() if gate is None else gate

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Busy())

    @rpc
    def bump_and_read(self, context: Context, input: int) -> RPCResult[int | None]:
        self.count.set(context, input)
        return RPCResult(self.count.get(context))  # its own staged write

    @rpc
    def list_notes(self, context: Context) -> dict[str, str]:
        return self.notes.items(context)  # no whole-map load declared

    @rpc(load_attribute_maps=(notes,))
    def all_notes(self, context: Context) -> dict[str, str]:
        return self.notes.items(context)

    @rpc
    def read_count(self, context: Context) -> int | None:
        return self.count.get(context)

    @rpc
    def start_busy(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Busy, None),))


async def test_get_attributes_reads_committed_state_and_takes_no_lock_a_step_holds(
    engine_config: EngineConfig,
) -> None:
    gate = Gate()
    options = StartFlowOptions(initial_attributes={"count": 1})
    async with running_engine([RulesFlow(gate)], engine_config) as eng:
        await eng.start_flow(RulesFlow, "r", options=options)
        await eng.invoke_rpc("start_busy", "r")
        await asyncio.wait_for(gate.entered.wait(), 10)
        during = await asyncio.wait_for(eng.get_attributes("r", ["count"]), 5)  # not blocked
        gate.release.set()
        await eng.wait_for_flow("r", wait_seconds=10)  # Busy's decision closes the run
        after = await eng.get_attributes("r", ["count"])
    assert during.values == {"count": 1}
    assert after.values == {"count": 99}


async def test_an_rpc_reads_its_own_staged_write(serve_flows: ServeFlows) -> None:
    async with serve_flows([RulesFlow()]) as flows:
        await flows.start_flow(RulesFlow, "r")
        assert await flows.invoke_rpc("bump_and_read", "r", 7) == 7


async def test_enumerating_map_instances_needs_a_whole_map_load(
    serve_flows: ServeFlows,
) -> None:
    options = StartFlowOptions(initial_attributes={"notes/a": "A", "notes/b": "B"})
    async with serve_flows([RulesFlow()]) as flows:
        await flows.start_flow(RulesFlow, "r", options=options)
        with pytest.raises(AttributeMapNotLoadedError):
            await flows.invoke_rpc("list_notes", "r")
        assert await flows.invoke_rpc("all_notes", "r") == {"a": "A", "b": "B"}


async def test_an_rpc_pinned_to_an_older_run_reads_that_run(serve_flows: ServeFlows) -> None:
    async with serve_flows([RulesFlow()]) as flows:
        first = await flows.start_flow(
            RulesFlow, "r", options=StartFlowOptions(initial_attributes={"count": 1})
        )
        await flows.stop_flow("r")
        await flows.start_flow(
            RulesFlow, "r", options=StartFlowOptions(initial_attributes={"count": 2})
        )
        assert await flows.invoke_rpc("read_count", "r") == 2
        assert await flows.invoke_rpc("read_count", "r", run_id=first.run_id) == 1


async def test_an_erase_after_close_is_refused_for_a_mixed_request_or_an_unstored_key(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([RulesFlow()]) as flows:
        initial = {"secret": "s", "label": "x"}
        await flows.start_flow(RulesFlow, "r", options=StartFlowOptions(initial_attributes=initial))
        await flows.stop_flow("r")
        refused = "only the erase \\(null\\) of stored hard-delete values is allowed"
        with pytest.raises(FlowNotActiveOrNotFoundError, match=refused):
            await flows.set_attributes("r", {"secret": None, "label": None})  # mixed
        still = await flows.get_attributes("r", ["secret", "label"])
        await flows.set_attributes("r", {"secret": None})  # the erase itself
        with pytest.raises(FlowNotActiveOrNotFoundError, match=refused):
            await flows.set_attributes("r", {"secret": None})  # nothing stored any more
        after = await flows.get_attributes("r", ["secret", "label"])
    assert still.values == {"secret": "s", "label": "x"}
    assert after.values == {"label": "x"}


class Phased(Step[None]):
    """Locks ``a`` while wait_for runs and ``b`` while execute runs."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            wait_for_lock_attributes=(self.flow.a.lock(),),
            execute_lock_attributes=(self.flow.b.lock(),),
        )

    async def wait_for(self, context: Context, input: None) -> Wait:
        self.flow.gate.in_wait_for.set()
        await self.flow.gate.leave_wait_for.wait()
        return Wait.until(Timer.by_duration(timedelta(0)))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.gate.in_execute.set()
        await self.flow.gate.leave_execute.wait()
        return graceful_complete(None)


@dataclasses.dataclass
class PhaseGate:
    """Where Phased waits in each phase, handed to the PhasedFlow a test registers."""

    in_wait_for: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    leave_wait_for: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    in_execute: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    leave_execute: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class PhasedFlow(Flow[None]):
    a = Attribute("a", int)
    b = Attribute("b", int)

    def __init__(self, gate: PhaseGate) -> None:
        self.gate = gate

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Phased())

    @rpc(lock_attributes=(a.lock(),))
    def touch_a(self, context: Context) -> RPCResult[str]:
        return RPCResult("a")

    @rpc(lock_attributes=(b.lock(),))
    def touch_b(self, context: Context) -> RPCResult[str]:
        return RPCResult("b")


async def test_wait_for_locks_are_separate_from_execute_locks(engine_config: EngineConfig) -> None:
    gate = PhaseGate()
    async with running_engine([PhasedFlow(gate)], engine_config) as eng:
        await eng.start_flow(PhasedFlow, "p")
        await asyncio.wait_for(gate.in_wait_for.wait(), 10)
        during_wait_b = await eng.invoke_rpc("touch_b", "p")
        with pytest.raises(RPCLockConflictError, match="attribute key a is locked by a Step"):
            await eng.invoke_rpc("touch_a", "p")
        gate.leave_wait_for.set()
        await asyncio.wait_for(gate.in_execute.wait(), 10)
        during_execute_a = await eng.invoke_rpc("touch_a", "p")
        with pytest.raises(RPCLockConflictError, match="attribute key b is locked by a Step"):
            await eng.invoke_rpc("touch_b", "p")
        gate.leave_execute.set()
        result = await eng.wait_for_flow("p", wait_seconds=10)
    assert (during_wait_b, during_execute_a, result.status) == ("b", "a", "COMPLETED")


class Pending(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        await asyncio.Event().wait()  # never set: stays active until canceled
        return graceful_complete(None)


class CancelFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Pending())

    @rpc
    def replace_pending(self, context: Context) -> RPCResult[None]:
        # Cancels the active Pending and starts a new one: the RPC's own is not canceled.
        result = RPCResult(None, next_steps=(StepMovement.of(Pending, None),))
        return result.with_canceling_steps(Pending)


async def test_an_rpcs_own_next_steps_of_a_canceled_type_are_not_canceled(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CancelFlow()]) as flows:
        await flows.start_flow(CancelFlow, "c")
        await flows.invoke_rpc("replace_pending", "c")
        history = (await flows.get_flow_history("c")).events
        info = await flows.describe_flow("c")
    committed = next(e for e in history if e.event_type == "RPC_COMMITTED")
    assert committed.details["canceledSteps"] == ["Pending-1"]
    assert info.status == "RUNNING"  # Pending-2 is active


class Flaky(Step[None]):
    """Fails every attempt; retried after an hour; on final failure routes to Recover."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                max_attempts=3, initial_interval=timedelta(hours=1), max_interval=timedelta(hours=1)
            ),
            failure_step=Recover,
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        Calls.flaky += 1
        raise RuntimeError("always")


class Recover(Step[dict[str, Any]]):
    def execute(self, context: Context, input: dict[str, Any]) -> StepDecision:
        Calls.recover += 1
        return graceful_complete(None)


class Listen(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.inbox.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        Calls.listen += 1
        return graceful_complete(None)


class Calls:
    flaky = recover = listen = 0


class Start2(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Flaky, None), StepMovement.of(Listen, None))


class WaitersFlow(Flow[None]):
    inbox = Channel("inbox", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Start2()).other_steps(Flaky(), Recover(), Listen())

    @rpc
    def cancel_all(self, context: Context) -> RPCResult[None]:
        return RPCResult(None).with_canceling_steps(Flaky, Listen)

    @rpc
    def only_moves(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Listen, None),))

    @rpc
    def only_cancels(self, context: Context) -> RPCResult[None]:
        return RPCResult(None).with_canceling_steps(Listen)


async def test_waiting_and_retry_waiting_steps_are_canceled_with_no_retry_or_failure_route(
    engine_config: EngineConfig,
) -> None:
    Calls.flaky = Calls.recover = Calls.listen = 0
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([WaitersFlow()], config) as eng:
        await eng.start_flow(WaitersFlow, "w")
        await settle(eng)  # Flaky failed once and waits an hour; Listen waits on inbox
        await eng.invoke_rpc("cancel_all", "w")
        await clock.advance_when_idle()  # past every deadline: nothing is left to run
        await settle(eng)
        await eng.publish_to_channel("w", "inbox", "late")
        await settle(eng)
        info = await eng.describe_flow("w")
    assert (Calls.flaky, Calls.recover, Calls.listen) == (1, 0, 0)
    assert info.status == "RUNNING"  # no active Step, nothing closed the run


async def test_an_rpc_of_only_movements_or_only_cancels_is_refused_on_a_closed_run(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([WaitersFlow()]) as flows:
        await flows.start_flow(WaitersFlow, "w")
        await flows.stop_flow("w")
        for name in ("only_moves", "only_cancels"):
            with pytest.raises(FlowNotActiveOrNotFoundError):
                await flows.invoke_rpc(name, "w")


class TypeThenFail(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        writer = self.flow.progress.buffered_text(context)
        writer.write("last ")
        writer.write("words")  # still buffered when the handler raises
        raise RuntimeError("gone")


class StreamingFlow(Flow[None]):
    progress = Stream("progress", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(TypeThenFail())


async def test_the_buffered_writer_sends_its_tail_when_an_async_step_raises(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([StreamingFlow()], engine_config) as eng:
        await eng.start_flow(StreamingFlow, "s")
        result = await eng.wait_for_flow("s", wait_seconds=30)
        page = await eng.list_stream_messages("s", StreamingFlow.progress)
    assert (result.status, result.error_type) == ("FAILED", "RuntimeError")
    assert "".join(m.value for m in reversed(page.messages)) == "last words"


class LateFlow(Flow[None]):
    def __init__(self, gate: LateGate) -> None:
        self.gate = gate

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Pending())

    @rpc
    def start_pending(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Pending, None),))

    @rpc
    async def cancel_after_a_while(self, context: Context) -> RPCResult[None]:
        self.gate.entered.set()
        await self.gate.release.wait()  # its snapshot was read before this point
        return RPCResult(None).with_canceling_steps(Pending)


@dataclasses.dataclass
class LateGate:
    """Where cancel_after_a_while waits, handed to the LateFlow a test registers."""

    entered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


async def test_a_step_started_after_the_rpcs_snapshot_is_canceled_too(
    engine_config: EngineConfig,
) -> None:
    gate = LateGate()
    async with running_engine([LateFlow(gate)], engine_config) as eng:
        await eng.start_flow(LateFlow, "l")
        canceling = asyncio.create_task(eng.invoke_rpc("cancel_after_a_while", "l"))
        await asyncio.wait_for(gate.entered.wait(), 10)
        await eng.invoke_rpc("start_pending", "l")  # Pending-1 starts after that snapshot
        gate.release.set()
        await canceling
        history = (await eng.get_flow_history("l")).events
    committed = [e for e in history if e.event_type == "RPC_COMMITTED"]
    assert committed[-1].details["canceledSteps"] == ["Pending-1"]
