"""RPC semantics of seed 002, one test per rule."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeLock,
    AttributeMap,
    AttributeMapLoad,
    AttributeMapNotLoadedError,
    Context,
    EngineConfig,
    Flow,
    FlowNotActiveOrNotFoundError,
    FlowTypeNotFoundError,
    InvalidArgumentError,
    RPCHandlerError,
    RPCInvokeOptions,
    RPCLockConflictError,
    RPCNotFoundError,
    RPCResult,
    RPCTimeoutError,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    dead_end,
    go_to,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.backends import backend_independent
from tests.support.flow_clients import ServeFlows

#: Refused before anything reaches the database: the same on every backend.
REFUSED_EARLY = backend_independent("the options are refused before the database is read")


@dataclasses.dataclass
class Gate:
    """Events a test opens to move handlers along: a test makes its own and hands it to the
    CounterFlow it registers (``CounterFlow(gate)``)."""

    step_entered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    step_release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    rpc_entered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    rpc_release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class HoldCounter(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.counter.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.gate.step_entered.set()
        await self.flow.gate.step_release.wait()
        self.flow.counter.set(context, 100)
        return dead_end()


class ForeignNotes(Flow[None]):
    """Declares a map with the same name as CounterFlow's: never registered with it."""

    notes = AttributeMap("notes", str)


class CounterFlow(Flow[None]):
    counter = Attribute("counter", int)
    label = Attribute("label", str)
    notes = AttributeMap("notes", str)
    other = AttributeMap("other", str)

    def __init__(self, gate: Gate | None = None) -> None:
        # Without one (a test that opens no gate, or the server process of ``serve_flows``,
        # which instantiates the class without arguments) the Flow has a gate of its own.
        self.gate = Gate() if gate is None else gate

    @rpc(lock_attributes=(counter.lock(),))
    def increment(self, context: Context, input: int) -> int:
        value = (self.counter.get(context) or 0) + input
        self.counter.set(context, value)
        return value

    @rpc(lock_attributes=(counter.lock(),))
    async def hold_counter(self, context: Context) -> None:
        self.gate.rpc_entered.set()
        await self.gate.rpc_release.wait()

    @rpc
    def start_holder(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(HoldCounter, None),))

    @rpc
    def read(self, context: Context, input: str) -> Any:
        return {
            "counter": self.counter.get(context),
            "label": self.label.get(context),
            "note": self.notes.get(context, input),
        }

    @rpc(load_attribute_map_instances=(notes.load("fixed"),))
    def read_fixed(self, context: Context) -> str | None:
        return self.notes.get(context, "fixed")

    @rpc(load_attribute_maps=(notes,))
    def read_all(self, context: Context) -> dict[str, str]:
        return self.notes.items(context)

    @rpc
    def peek(self, context: Context) -> int | None:
        return self.counter.get(context)

    @rpc
    def write_label(self, context: Context, input: str) -> None:
        self.label.set(context, input)

    @rpc(is_transactional=True)
    def transactional_peek(self, context: Context) -> int | None:
        return self.counter.get(context)

    @rpc(lock_attributes=(notes.lock("x"),))
    async def lock_note(self, context: Context, input: None) -> str:
        self.gate.rpc_entered.set()
        await self.gate.rpc_release.wait()
        return "done"

    @rpc(timeout=timedelta(milliseconds=200))
    async def too_slow(self, context: Context) -> None:
        self.label.set(context, "never committed")
        await asyncio.Event().wait()  # never set: only the RPC timeout ends this call

    @rpc
    async def waits_for_the_gate(self, context: Context) -> str:
        await self.gate.rpc_release.wait()
        return "released"

    @rpc(timeout=timedelta(seconds=30))
    async def waits_with_its_own_timeout(self, context: Context) -> str:
        await self.gate.rpc_release.wait()
        return "released"

    @rpc
    def explode(self, context: Context) -> None:
        raise KeyError("missing")

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(HoldCounter())


async def _start(eng: Any, flow_id: str = "c", **initial: Any) -> None:
    await eng.start_flow(CounterFlow, flow_id, None, StartFlowOptions(initial_attributes=initial))


async def test_rpc_lock_held_by_a_step_fails_at_once_with_the_seed_message(
    engine_config: EngineConfig,
) -> None:
    gate = Gate()
    async with running_engine([CounterFlow(gate)], engine_config) as eng:
        await _start(eng, counter=1)
        await eng.invoke_rpc("start_holder", "c")
        await asyncio.wait_for(gate.step_entered.wait(), 5)
        with pytest.raises(RPCLockConflictError) as info:
            await eng.invoke_rpc("increment", "c", 1)
        assert str(info.value) == "RPC lock conflict: attribute key counter is locked by a Step"
        gate.step_release.set()
        await settle(eng)  # the Step's decision has committed and released the lock
        assert await eng.invoke_rpc("increment", "c", 1) == 101


async def test_rpc_lock_held_by_another_rpc_fails_at_once_naming_an_rpc(
    engine_config: EngineConfig,
) -> None:
    gate = Gate()
    async with running_engine([CounterFlow(gate)], engine_config) as eng:
        await _start(eng)
        holder = asyncio.create_task(eng.invoke_rpc("hold_counter", "c"))
        await asyncio.wait_for(gate.rpc_entered.wait(), 5)
        with pytest.raises(RPCLockConflictError) as info:
            await eng.invoke_rpc("increment", "c", 1)
        assert str(info.value) == "RPC lock conflict: attribute key counter is locked by an RPC"
        # A lock-free RPC is not affected.
        assert await eng.invoke_rpc("peek", "c") is None
        gate.rpc_release.set()
        await holder
        assert await eng.invoke_rpc("increment", "c", 1) == 1


async def test_parallel_read_modify_write_callers_retrying_conflicts_lose_no_update(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await _start(flows)
        conflicts = 0

        async def caller() -> int:
            nonlocal conflicts
            delay = 0.001
            while True:
                try:
                    return int(await flows.invoke_rpc("increment", "c", 1))
                except RPCLockConflictError:
                    conflicts += 1
                    await asyncio.sleep(random.uniform(0, delay))
                    delay = min(delay * 2, 0.05)

        results = await asyncio.gather(*(caller() for _ in range(20)))
        final = await flows.get_attributes("c", ["counter"])
    assert sorted(results) == list(range(1, 21))
    assert final.values == {"counter": 20}
    assert conflicts > 0  # the callers really did collide


async def test_regular_attributes_are_always_loaded_but_map_instances_only_when_loaded(
    engine_config: EngineConfig,
) -> None:
    flow = CounterFlow()
    async with running_engine([flow], engine_config) as eng:
        await _start(eng, counter=3, label="hi", **{"notes/fixed": "F", "notes/a": "A"})
        with pytest.raises(AttributeMapNotLoadedError, match="'notes' instance 'a' was not loaded"):
            await eng.invoke_rpc("read", "c", "a")
        loaded = RPCInvokeOptions(load_attribute_map_instances=(flow.notes.load("a"),))
        assert await eng.invoke_rpc(flow.read, "c", "a", options=loaded) == {
            "counter": 3,
            "label": "hi",
            "note": "A",
        }
        absent = RPCInvokeOptions(load_attribute_map_instances=(flow.notes.load("zzz"),))
        assert (await eng.invoke_rpc(flow.read, "c", "zzz", options=absent))["note"] is None
        assert await eng.invoke_rpc(flow.read_fixed, "c") == "F"
        assert await eng.invoke_rpc(flow.read_all, "c") == {"a": "A", "fixed": "F"}


@REFUSED_EARLY
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            RPCInvokeOptions(load_attribute_map_instances=(AttributeMapLoad("ghost", "a"),)),
            "load of undeclared state 'ghost'",
        ),
        (
            RPCInvokeOptions(load_attribute_map_instances=(AttributeMapLoad("counter", "a"),)),
            "'counter' is an Attribute, not an AttributeMap",
        ),
        (
            RPCInvokeOptions(lock_attribute_map_instances=(AttributeLock("counter"),)),
            "'counter' is not an AttributeMap instance lock",
        ),
        (
            RPCInvokeOptions(lock_attribute_map_instances=(AttributeLock("notes", ""),)),
            "must be a non-blank string",
        ),
        (
            RPCInvokeOptions(load_attribute_map_instances=(AttributeMapLoad("notes", "a/b"),)),
            "must not contain '/'",
        ),
        (
            RPCInvokeOptions(lock_attribute_map_instances=(AttributeLock("elsewhere", "k"),)),
            "lock on undeclared state 'elsewhere'",
        ),
        # Another Flow type's map of the same name: its definition is not this Flow's.
        (
            RPCInvokeOptions(lock_attribute_map_instances=(ForeignNotes.notes.lock("k"),)),
            "made by another Flow type's definition",
        ),
        (
            RPCInvokeOptions(load_attribute_map_instances=(ForeignNotes.notes.load("k"),)),
            "made by another Flow type's definition",
        ),
    ],
)
async def test_invoke_options_are_validated_before_anything_runs(
    serve_flows: ServeFlows, options: RPCInvokeOptions, message: str
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await _start(flows)
        with pytest.raises(InvalidArgumentError, match=message):
            await flows.invoke_rpc("write_label", "c", "changed", options=options)
        assert (await flows.get_attributes("c", ["label"])).values == {}


async def test_invoke_options_are_unioned_and_deduplicated_with_the_definition(
    engine_config: EngineConfig,
) -> None:
    gate = Gate()
    flow = CounterFlow(gate)
    async with running_engine([flow], engine_config) as eng:
        await _start(eng)
        # The same lock as the definition's plus one more: no conflict with itself.
        options = RPCInvokeOptions(
            lock_attribute_map_instances=(
                flow.notes.lock("x"),
                flow.notes.lock("y"),
                flow.notes.lock("x"),
            ),
        )
        task = asyncio.create_task(eng.invoke_rpc(flow.lock_note, "c", None, options=options))
        await asyncio.wait_for(gate.rpc_entered.wait(), 5)
        other = RPCInvokeOptions(lock_attribute_map_instances=(flow.notes.lock("y"),))
        with pytest.raises(RPCLockConflictError, match="attribute key notes/y is locked by an RPC"):
            await eng.invoke_rpc(flow.write_label, "c", "z", options=other)
        gate.rpc_release.set()
        assert await task == "done"
        assert await eng.invoke_rpc(flow.write_label, "c", "z", options=other) is None


async def test_read_only_rpc_without_locks_answers_on_a_closed_run(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await _start(flows, counter=7)
        await flows.stop_flow("c")
        assert await flows.invoke_rpc("peek", "c") == 7


@pytest.mark.parametrize("rpc_name", ["write_label", "increment", "transactional_peek"])
async def test_rpc_with_durable_effects_locks_or_transactional_is_rejected_on_a_closed_run(
    serve_flows: ServeFlows, rpc_name: str
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await _start(flows, counter=7)
        await flows.stop_flow("c")
        arg = {"write_label": "late", "increment": 1, "transactional_peek": None}[rpc_name]
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.invoke_rpc(rpc_name, "c", arg)
        assert (await flows.get_attributes("c", ["counter", "label"])).values == {"counter": 7}


async def test_rpc_on_a_missing_flow_raises_flow_not_active_or_not_found(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.invoke_rpc("peek", "nobody")
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.invoke_rpc(CounterFlow().peek, "nobody")


async def test_rpc_timeout_fails_the_call_and_commits_nothing(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await _start(flows)
        with pytest.raises(RPCTimeoutError, match="within 0.2 s"):
            await flows.invoke_rpc("too_slow", "c")
        assert (await flows.get_attributes("c", ["label"])).values == {}


async def test_the_servers_default_rpc_timeout_bounds_rpcs_without_their_own(
    engine_config: EngineConfig,
) -> None:
    config = dataclasses.replace(engine_config, default_rpc_timeout=timedelta(milliseconds=150))
    gate = Gate()
    async with running_engine([CounterFlow(gate)], config) as eng:
        await _start(eng)
        with pytest.raises(RPCTimeoutError, match="within 0.15 s"):
            await eng.invoke_rpc("waits_for_the_gate", "c")
        # An RPC's own timeout wins over the server's default.
        own = asyncio.create_task(eng.invoke_rpc("waits_with_its_own_timeout", "c"))
        done, _ = await asyncio.wait([own], timeout=0.5)
        assert not done  # still running well past the server's default
        gate.rpc_release.set()
        assert await own == "released"
        described = {
            r.name: r.timeout_seconds
            for t in eng.list_flow_types()
            if t.flow_type == "CounterFlow"
            for r in t.rpcs
        }
    # listFlowTypes shows the timeout each RPC runs under on this engine.
    assert described["waits_for_the_gate"] == 0.15
    assert described["waits_with_its_own_timeout"] == 30.0


async def test_a_server_running_every_rpc_transactionally_refuses_them_on_a_closed_run(
    engine_config: EngineConfig,
) -> None:
    plain = engine_config
    strict = dataclasses.replace(engine_config, transactional_rpcs=True)
    async with running_engine([CounterFlow()], plain) as eng:
        await _start(eng, counter=7)
        await eng.stop_flow("c")
        assert await eng.invoke_rpc("peek", "c") == 7  # read-only on a closed run: answered
    async with running_engine([CounterFlow()], strict) as eng:
        with pytest.raises(FlowNotActiveOrNotFoundError, match="transactional"):
            await eng.invoke_rpc("peek", "c")


async def test_a_raising_handler_surfaces_as_rpc_handler_error_naming_the_type(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await _start(flows)
        with pytest.raises(RPCHandlerError) as info:
            await flows.invoke_rpc("explode", "c")
        assert info.value.error_type == "KeyError"


# -- canceling Steps: the seed's report/stop example ------------------------------------------

REPORT_READY, REPORT_STOPPED = "ready", "stopped"
REPORT_STATUS = Attribute("report-status", str)
SECTIONS = Attribute("report-sections", int)


@dataclasses.dataclass
class ReportGate:
    """Events a report test opens, handed to the ReportFlow it registers."""

    report_started: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release_report: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    delivery_started: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    rpc_snapshot_taken: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release_rpc: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release_delivery: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    block_rpc: bool = False


class GenerateReport(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        SECTIONS.set(context, 1)
        self.flow.gate.report_started.set()
        await self.flow.gate.release_report.wait()  # a Stop cancels this task here
        REPORT_STATUS.set(context, REPORT_READY)
        return go_to(DeliverReport, None)


class DeliverReport(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.gate.delivery_started.set()
        await self.flow.gate.release_delivery.wait()
        return graceful_complete("report delivered")


class FinishReportStop(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        # The report can commit after stop_report read its snapshot.
        if REPORT_STATUS.get(context) == REPORT_READY:
            return dead_end()
        REPORT_STATUS.set(context, REPORT_STOPPED)
        return graceful_complete(REPORT_STOPPED)


class ReportFlow(Flow[None]):
    report_status = REPORT_STATUS
    sections = SECTIONS

    def __init__(self, gate: ReportGate) -> None:
        self.gate = gate

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(GenerateReport()).other_steps(
            DeliverReport(), FinishReportStop()
        )

    @rpc(timeout=timedelta(seconds=30))
    async def stop_report(self, context: Context, input: None) -> RPCResult[bool]:
        if REPORT_STATUS.get(context) in (REPORT_READY, REPORT_STOPPED):
            return RPCResult(False)
        if self.gate.block_rpc:
            self.gate.rpc_snapshot_taken.set()
            await self.gate.release_rpc.wait()
        return RPCResult(
            True, next_steps=(StepMovement.of(FinishReportStop, None),)
        ).with_canceling_steps(GenerateReport)


@pytest.fixture
def report_gate() -> ReportGate:
    return ReportGate()


async def test_stop_rpc_cancels_the_running_step_and_its_follow_up_records_the_stop(
    engine_config: EngineConfig, report_gate: ReportGate
) -> None:
    async with running_engine([ReportFlow(report_gate)], engine_config) as eng:
        await eng.start_flow(ReportFlow, "report", None)
        await asyncio.wait_for(report_gate.report_started.wait(), 5)
        assert await eng.invoke_rpc("stop_report", "report") is True
        report_gate.release_report.set()  # too late: the attempt was canceled
        result = await eng.wait_for_flow("report", wait_seconds=10)
        values = (await eng.get_attributes("report", ["report-status"])).values
        history = await eng.get_flow_history("report")
    assert result.status == "COMPLETED"
    assert [(c.step_type, c.output) for c in result.completions] == [
        ("FinishReportStop", REPORT_STOPPED)
    ]
    assert values == {"report-status": REPORT_STOPPED}
    rpc_event = next(e for e in history.events if e.event_type == "RPC_COMMITTED")
    assert len(rpc_event.details["canceledSteps"]) == 1
    assert rpc_event.details["nextSteps"] == ["FinishReportStop"]
    # The canceled attempt's decision never committed.
    closed = [e.details["stepType"] for e in history.events if e.event_type == "STEP_CLOSED"]
    assert "GenerateReport" not in closed


async def test_a_report_committed_after_the_rpc_snapshot_wins_and_the_follow_up_dead_ends(
    engine_config: EngineConfig, report_gate: ReportGate
) -> None:
    report_gate.block_rpc = True
    async with running_engine([ReportFlow(report_gate)], engine_config) as eng:
        await eng.start_flow(ReportFlow, "race", None)
        await asyncio.wait_for(report_gate.report_started.wait(), 5)
        stop = asyncio.create_task(eng.invoke_rpc("stop_report", "race"))
        await asyncio.wait_for(report_gate.rpc_snapshot_taken.wait(), 5)
        report_gate.release_report.set()
        # The report commits while the RPC still runs: its follow-up Step has begun.
        await asyncio.wait_for(report_gate.delivery_started.wait(), 5)
        assert not stop.done()
        values = (await eng.get_attributes("race", ["report-status"])).values
        assert values == {"report-status": REPORT_READY}
        report_gate.release_rpc.set()
        assert await stop is True  # not rejected, though there was nothing left to cancel
        report_gate.release_delivery.set()
        result = await eng.wait_for_flow("race", wait_seconds=10)
        history = await eng.get_flow_history("race")
    assert result.status == "COMPLETED"
    assert [(c.step_type, c.output) for c in result.completions] == [
        ("DeliverReport", "report delivered")
    ]
    rpc_event = next(e for e in history.events if e.event_type == "RPC_COMMITTED")
    assert rpc_event.details["canceledSteps"] == []
    decisions = {
        e.details["stepType"]: e.details["decision"]
        for e in history.events
        if e.event_type == "STEP_CLOSED"
    }
    assert decisions["FinishReportStop"] == "DEAD_END"


class FirstKind(Flow[None]):
    @rpc
    def whoami(self, context: Context) -> str:
        return "first"


class SecondKind(Flow[None]):
    @rpc
    def whoami(self, context: Context) -> str:
        return "second"

    @rpc
    def only_second(self, context: Context) -> str:
        return "yes"


async def test_rpc_by_name_follows_a_flow_id_reused_by_another_flow_type(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([FirstKind(), SecondKind()]) as flows:
        await flows.start_flow(FirstKind, "shared-id", None)
        assert await flows.invoke_rpc("whoami", "shared-id") == "first"
        await flows.stop_flow("shared-id")
        await flows.start_flow(SecondKind, "shared-id", None)
        assert await flows.invoke_rpc("whoami", "shared-id") == "second"
        assert await flows.invoke_rpc("only_second", "shared-id") == "yes"
        await flows.stop_flow("shared-id")
        await flows.start_flow(FirstKind, "shared-id", None)
        with pytest.raises(RPCNotFoundError):
            await flows.invoke_rpc("only_second", "shared-id")
        assert await flows.invoke_rpc("whoami", "shared-id") == "first"


async def test_an_rpc_by_name_with_a_flow_type_refuses_a_run_of_another_type(
    serve_flows: ServeFlows,
) -> None:
    second = SecondKind()
    async with serve_flows([FirstKind(), second]) as flows:
        await flows.start_flow(FirstKind, "typed-id", None)
        mine = await flows.invoke_rpc("whoami", "typed-id", flow_type="FirstKind")
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.invoke_rpc("whoami", "typed-id", flow_type="SecondKind")
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.invoke_rpc(second.whoami, "typed-id")
        with pytest.raises(FlowTypeNotFoundError):
            await flows.invoke_rpc("whoami", "typed-id", flow_type="NoSuchKind")
    assert mine == "first"
