"""Edges of seed 002 that held without a test: AtMost beside a Timer in ``all_of``, the SubFlow
reuse table's canceled, terminated and timed-out rows, a renamed index key (no backfill), a
definition that drops ``hard_delete_on_null``, GetAttributes while every Step thread blocks,
and an RPC that locks an AttributeMap instance without loading it."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    AttributeMapNotLoadedError,
    Channel,
    Context,
    Engine,
    EngineConfig,
    Flow,
    IdReusePolicy,
    IndexType,
    ManualClock,
    RPCInvokeOptions,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StopType,
    SubFlow,
    SubFlowOptions,
    SubFlowReusePolicy,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.waiting import eventually


def manual(config: EngineConfig) -> tuple[EngineConfig, ManualClock]:
    """A config on a ManualClock; no retention, whose hourly check would be a deadline too."""
    clock = ManualClock()
    return dataclasses.replace(config, clock=clock, retention=None), clock


# -- AtMost beside a Timer in all_of ----------------------------------------------------------

DELAY = timedelta(minutes=5)


class Batches:
    """The condition the next Batch waits on beside its Timer, and what its executes saw."""

    condition: Any = None
    seen: list[dict[str, Any]] = []


class Batch(Step[None]):
    """Waits for ``all_of(Timer of 5 minutes, Batches.condition)``, then records what it took."""

    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.all_of(Timer.by_duration(DELAY), Batches.condition(self.flow.inbox))

    def execute(self, context: Context, input: None) -> StepDecision:
        Batches.seen.append(
            {"took": list(self.flow.inbox.results(context)), "left": self.flow.inbox.size(context)}
        )
        return graceful_complete(len(Batches.seen))


class BatchFlow(Flow[None]):
    inbox = Channel("inbox", int)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Batch())


@pytest.fixture(autouse=True)
def _fresh_batches() -> None:
    Batches.seen = []


async def pending_count(eng: Engine, flow_id: str) -> int:
    [inbox] = (await eng.list_channels(flow_id)).channels
    return inbox.size


async def test_at_most_beside_a_timer_takes_up_to_its_limit_when_the_timer_fires(
    engine_config: EngineConfig,
) -> None:
    Batches.condition = lambda inbox: inbox.at_most(2)
    config, clock = manual(engine_config)
    async with running_engine([BatchFlow()], config) as eng:
        await eng.start_flow(BatchFlow, "b")
        await settle(eng)  # the wait has begun, on an empty queue
        for n in (1, 2, 3):
            await eng.publish_to_channel("b", BatchFlow.inbox, n)
            await settle(eng)
            # AtMost holds from the start, yet the wait is not over: the Timer is not due.
            assert Batches.seen == []
            assert await pending_count(eng, "b") == n  # nothing consumed while it waits
        await clock.advance_when_idle(DELAY.total_seconds() - 1)
        assert Batches.seen == []
        await clock.advance_when_idle(1)  # the Timer's deadline: the Wait completes
        result = await eng.wait_for_flow("b")
        assert await pending_count(eng, "b") == 1
    assert result.status == "COMPLETED"
    # It consumed the first two of the three queued at completion, in FIFO order.
    assert Batches.seen == [{"took": [1, 2], "left": 1}]


async def test_at_most_beside_a_timer_proceeds_with_nothing_when_the_queue_is_empty(
    engine_config: EngineConfig,
) -> None:
    Batches.condition = lambda inbox: inbox.at_most(2)
    config, clock = manual(engine_config)
    async with running_engine([BatchFlow()], config) as eng:
        await eng.start_flow(BatchFlow, "b")
        await settle(eng)
        started = clock.now()
        fired = await clock.advance_when_idle()  # to the next deadline: the Timer's
        result = await eng.wait_for_flow("b")
    assert fired - started == DELAY.total_seconds()
    assert result.status == "COMPLETED"
    assert Batches.seen == [{"took": [], "left": 0}]  # AtMost did not wait for a message


async def test_a_lower_bound_of_one_beside_a_timer_waits_past_the_timer_for_a_message(
    engine_config: EngineConfig,
) -> None:
    Batches.condition = lambda inbox: inbox.for_range(at_least=1, at_most=2)
    config, clock = manual(engine_config)
    async with running_engine([BatchFlow()], config) as eng:
        await eng.start_flow(BatchFlow, "b")
        await settle(eng)
        await clock.advance_when_idle(DELAY.total_seconds())
        assert Batches.seen == []  # the Timer fired, the Channel condition does not hold
        assert (await eng.describe_flow("b")).status == "RUNNING"
        await eng.publish_to_channel("b", BatchFlow.inbox, 7)
        await settle(eng)
        result = await eng.wait_for_flow("b")
    assert result.status == "COMPLETED"
    assert Batches.seen == [{"took": [7], "left": 0}]


# -- the reuse table's canceled, terminated and timed-out rows ------------------------------

ATTACH = SubFlowReusePolicy.ATTACH
RESTART = SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
ALWAYS = SubFlowReusePolicy.ALWAYS_RESTART
CHILD_TIMEOUT = timedelta(minutes=1)


class Errand(Step[bool]):
    """Holds until a message reaches ``release`` when its input says so, then completes."""

    def wait_for(self, context: Context, input: bool) -> Wait:
        return Wait.until(self.flow.release.for_one()) if input else Wait.skip_immediately()

    def execute(self, context: Context, input: bool) -> StepDecision:
        return graceful_complete("done")


class ErrandFlow(Flow[bool]):
    """The child: completes at once, or (input True) holds until released."""

    release = Channel("release", str)

    def get_steps(self) -> StepList[bool]:
        return StepList.start_step(Errand())


class Order(BaseModel):
    policy: SubFlowReusePolicy
    hold: bool
    child_timeout_seconds: float | None = None


class Delegate(Step[Order]):
    """Runs one ErrandFlow and completes with what it read of it."""

    def wait_for(self, context: Context, input: Order) -> Wait:
        timeout = (
            None
            if input.child_timeout_seconds is None
            else timedelta(seconds=input.child_timeout_seconds)
        )
        options = SubFlowOptions(reuse_policy=input.policy, timeout=timeout)
        return Wait.until(SubFlow.run(ErrandFlow, input.hold, options))

    def execute(self, context: Context, input: Order) -> StepDecision:
        result = SubFlow.get_condition_results(context)
        return graceful_complete(
            {
                "runId": result.run_id,
                "status": str(result.status),
                "outputs": [c.output for c in result.completions],
                "errorType": result.error_type,
                "errorMessage": result.error_message,
            }
        )


class DelegateFlow(Flow[Order]):
    def get_steps(self) -> StepList[Order]:
        return StepList.start_step(Delegate())


CHILD = "SubFlow:boss-Delegate-1-0"


async def start_boss(eng: Engine, order: Order) -> str:
    options = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE)
    return (await eng.start_flow(DelegateFlow, "boss", order, options)).run_id


async def boss_saw(eng: Engine) -> dict[str, Any]:
    result = await eng.wait_for_flow("boss")
    assert result.status == "COMPLETED", result
    [completion] = result.completions
    return completion.output  # type: ignore[no-any-return]


async def child_runs(eng: Engine) -> set[tuple[str, str]]:
    """Return (run ID, status) of every run of the child's Flow ID (they start at one
    ManualClock instant, so StartTime does not order them)."""
    page = await eng.search_flows(f"FlowId = '{CHILD}'")
    return {(f.run_id, f.status) for f in page.flows}


#: Each way the first child ends, and what its parent reads of it then.
ENDINGS = {
    "CANCELED": "by hand",
    "TERMINATED": "by hand",
    "TIMED_OUT": "the Flow timed out",
}


@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("policy", [ATTACH, RESTART, ALWAYS], ids=str)
async def test_a_child_that_was_canceled_terminated_or_timed_out_follows_the_reuse_table(
    engine_config: EngineConfig, ending: str, policy: SubFlowReusePolicy
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([DelegateFlow(), ErrandFlow()], config) as eng:
        # The parent's first run waits on a child that holds; the child ends abnormally.
        timeout = CHILD_TIMEOUT.total_seconds() if ending == "TIMED_OUT" else None
        await start_boss(eng, Order(policy=policy, hold=True, child_timeout_seconds=timeout))
        await settle(eng)
        if ending == "TIMED_OUT":
            await clock.advance_when_idle(CHILD_TIMEOUT.total_seconds())
        else:
            stop = StopType.CANCEL if ending == "CANCELED" else StopType.TERMINATE
            await eng.stop_flow(CHILD, stop, reason="by hand")
            await settle(eng)
        first = await boss_saw(eng)
        [(first_child, first_status)] = await child_runs(eng)
        assert first_status == ending
        # Its wait holds once the child closes, whatever its status: the parent reads it.
        assert first == {
            "runId": first_child,
            "status": ending,
            "outputs": [],
            "errorType": None,
            "errorMessage": ENDINGS[ending],
        }
        # A new run of the parent's Flow ID derives the same SubFlow ID, with another
        # Request ID; this time a new child would complete at once.
        second_boss = await start_boss(eng, Order(policy=policy, hold=False))
        await settle(eng)
        second = await boss_saw(eng)
        history = (await eng.get_flow_history("boss", run_id=second_boss)).events
        [meeting] = [e for e in history if e.event_type in ("SUBFLOW_STARTED", "SUBFLOW_ATTACHED")]
        runs = await child_runs(eng)
    if policy == ATTACH:
        # ATTACH: return its result. The parent reads the abnormal end again, and nothing new runs.
        assert meeting.event_type == "SUBFLOW_ATTACHED"
        assert second == first
        assert runs == {(first_child, ending)}
    else:
        # RESTART_IF_PREVIOUS_EXITS_ABNORMALLY and ALWAYS_RESTART: start a new child.
        assert meeting.event_type == "SUBFLOW_STARTED"
        assert second["runId"] != first_child
        assert second == {
            "runId": second["runId"],
            "status": "COMPLETED",
            "outputs": ["done"],
            "errorType": None,
            "errorMessage": None,
        }
        assert runs == {(first_child, ending), (second["runId"], "COMPLETED")}
    assert meeting.details["runId"] == second["runId"]


# -- renaming an index key does not backfill ------------------------------------------------


class TicketFlow(Flow[None]):
    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def set_status(self, context: Context, input: str) -> None:
        self.status.set(context, input)


class RenamedTicketFlow(Flow[None]):
    """TicketFlow after its ``status`` index key was renamed from keyword1 to keyword2."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword2"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def set_status(self, context: Context, input: str) -> None:
        self.status.set(context, input)

    @classmethod
    def flow_type(cls) -> str:
        return "TicketFlow"


async def found(eng: Engine, query: str) -> set[str]:
    return {f.flow_id for f in (await eng.search_flows(query)).flows}


async def test_a_renamed_index_key_finds_old_runs_only_once_they_write_again(
    engine_config: EngineConfig,
) -> None:
    opened = StartFlowOptions(initial_attributes={"status": "open"})
    async with running_engine([TicketFlow()], engine_config) as eng:
        await eng.start_flow(TicketFlow, "old", options=opened)
        assert await found(eng, "keyword1 = 'open'") == {"old"}
    query = "FlowType = 'TicketFlow' AND keyword2 = 'open'"
    async with running_engine([RenamedTicketFlow()], engine_config) as eng:
        # No backfill: the run written under keyword1 is not found under keyword2, although
        # its value is still there.
        assert await found(eng, query) == set()
        assert (await eng.get_attributes("old", ["status"])).values == {"status": "open"}
        assert "keyword2" not in (await eng.describe_flow("old")).indexed_attributes
        # A run written after the rename is found under the new key.
        await eng.start_flow(RenamedTicketFlow, "new", options=opened)
        assert await found(eng, query) == {"new"}
        # The old run is found once it writes the Attribute again, even with the same value.
        await eng.invoke_rpc("set_status", "old", "open")
        assert await found(eng, query) == {"new", "old"}
        assert (await eng.describe_flow("old")).indexed_attributes["keyword2"] == "open"


# -- dropping hard_delete_on_null from a definition -----------------------------------------


class VaultFlow(Flow[None]):
    api_key = Attribute("api-key", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def read_key(self, context: Context) -> str | None:
        return self.api_key.get(context)


class PlainVaultFlow(Flow[None]):
    """VaultFlow after ``hard_delete_on_null=True`` was removed from its Attribute."""

    api_key = Attribute("api-key", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def read_key(self, context: Context) -> str | None:
        return self.api_key.get(context)

    @classmethod
    def flow_type(cls) -> str:
        return "VaultFlow"


STORED = StartFlowOptions(initial_attributes={"api-key": "sk-1"})


async def test_dropping_hard_delete_on_null_leaves_the_stored_value_readable(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([VaultFlow()], engine_config) as eng:
        await eng.start_flow(VaultFlow, "v", options=STORED)
    async with running_engine([PlainVaultFlow()], engine_config) as eng:
        read = await eng.get_attributes("v", ["api-key"])
        by_rpc = await eng.invoke_rpc("read_key", "v")
    assert read.values == {"api-key": "sk-1"}
    assert by_rpc == "sk-1"


async def test_only_the_hard_delete_definition_deletes_a_value_it_stored(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([VaultFlow()], engine_config) as eng:
        await eng.start_flow(VaultFlow, "v", options=STORED)
    async with running_engine([PlainVaultFlow()], engine_config) as eng:
        await eng.set_attributes("v", {"api-key": None})
        deleted_plainly = await eng.get_attributes("v", ["api-key"])
    async with running_engine([VaultFlow()], engine_config) as eng:
        # The plain delete left the stored value in place: the hard-delete definition reads it.
        still_stored = await eng.get_attributes("v", ["api-key"])
        await eng.set_attributes("v", {"api-key": None})  # the delete the seed asks for first
        deleted = await eng.get_attributes("v", ["api-key"])
    async with running_engine([PlainVaultFlow()], engine_config) as eng:
        after = await eng.get_attributes("v", ["api-key"])
    assert deleted_plainly.values == {}
    assert still_stored.values == {"api-key": "sk-1"}
    assert deleted.values == {} and after.values == {}


async def test_a_value_stored_by_a_dropped_hard_delete_option_goes_when_the_flow_is_purged(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    config = dataclasses.replace(config, retention=timedelta(days=1))
    async with running_engine([VaultFlow()], config) as eng:
        await eng.start_flow(VaultFlow, "v", options=STORED)
    async with running_engine([PlainVaultFlow()], config) as eng:
        await eng.stop_flow("v")
        await clock.advance_when_idle(timedelta(days=2).total_seconds())
        await eng.purge_closed_runs()
        assert (await eng.search_flows("FlowId = 'v'")).flows == []
    async with running_engine([VaultFlow()], config) as eng:
        # Every run of a Flow ID reads its one stored value, unless the Flow was removed.
        await eng.start_flow(VaultFlow, "v")
        read = await eng.get_attributes("v", ["api-key"])
    assert read.values == {}


# -- GetAttributes while every handler thread blocks ----------------------------------------


@dataclasses.dataclass
class Turnstile:
    """``def`` handlers block on ``opened``; ``inside`` counts those blocked right now, by
    kind (``step`` or ``rpc``)."""

    opened: threading.Event = dataclasses.field(default_factory=threading.Event)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    inside: dict[str, int] = dataclasses.field(default_factory=lambda: {"step": 0, "rpc": 0})

    def pass_through(self, kind: str) -> None:
        with self.lock:
            self.inside[kind] += 1
        try:
            assert self.opened.wait(timeout=30), "the test never opened the turnstile"
        finally:
            with self.lock:
                self.inside[kind] -= 1


TURNSTILE = Turnstile()


@pytest.fixture(autouse=True)
def _fresh_turnstile() -> Any:
    global TURNSTILE
    TURNSTILE = Turnstile()
    yield
    TURNSTILE.opened.set()  # never leave a handler thread blocked past its test


class Chore(Step[None]):
    """A ``def`` Step that blocks its handler thread, then writes ``label``."""

    def execute(self, context: Context, input: None) -> StepDecision:
        TURNSTILE.pass_through("step")
        self.flow.label.set(context, "done")
        return graceful_complete(None)


class ChoreFlow(Flow[None]):
    label = Attribute("label", str)
    notes = AttributeMap("notes", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Chore())

    @rpc
    def stall(self, context: Context) -> None:
        TURNSTILE.pass_through("rpc")


async def test_get_attributes_answers_while_every_handler_thread_blocks(
    engine_config: EngineConfig,
) -> None:
    config = dataclasses.replace(engine_config, step_threads=2, rpc_threads=1)
    async with running_engine([ChoreFlow()], config) as eng:
        for n in range(3):
            initial = {"label": f"chore {n}", "notes/k": f"note {n}"}
            await eng.start_flow(
                ChoreFlow, f"c{n}", options=StartFlowOptions(initial_attributes=initial)
            )
        stalled = asyncio.ensure_future(eng.invoke_rpc("stall", "c0"))
        # Both Step threads and the one RPC thread block; the third Step waits for a thread.
        every_thread = {"step": 2, "rpc": 1}
        await eventually(lambda: TURNSTILE.inside == every_thread, what="every thread blocked")
        reads = [
            await asyncio.wait_for(eng.get_attributes(f"c{n}", ["label", "notes/k"]), 5)
            for n in range(3)
        ]
        # Still blocked: the reads needed none of their threads.
        assert TURNSTILE.inside == every_thread
        assert not stalled.done()
        TURNSTILE.opened.set()
        await stalled
        closed = [(await eng.wait_for_flow(f"c{n}", wait_seconds=30)).status for n in range(3)]
        after = await eng.get_attributes("c2", ["label"])
    assert [r.values for r in reads] == [
        {"label": f"chore {n}", "notes/k": f"note {n}"} for n in range(3)
    ]
    assert closed == ["COMPLETED"] * 3
    assert after.values == {"label": "done"}


# -- a lock is not a load -------------------------------------------------------------------


class LedgerFlow(Flow[None]):
    balances = AttributeMap("balances", int)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc(lock_attributes=(balances.lock("k"),))
    def read_locked(self, context: Context) -> int | None:
        return self.balances.get(context, "k")

    @rpc(lock_attributes=(balances.lock("k"),))
    def add_locked(self, context: Context, input: int) -> int:
        value = (self.balances.get(context, "k") or 0) + input
        self.balances.set(context, "k", value)
        return value

    @rpc
    def read(self, context: Context) -> int | None:
        return self.balances.get(context, "k")


NOT_LOADED = "AttributeMap 'balances' instance 'k' was not loaded for this invocation"


async def test_an_rpc_locking_a_map_instance_without_loading_it_cannot_read_it(
    engine_config: EngineConfig,
) -> None:
    flow = LedgerFlow()
    initial = StartFlowOptions(initial_attributes={"balances/k": 5})
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(LedgerFlow, "l", options=initial)
        with pytest.raises(AttributeMapNotLoadedError, match=NOT_LOADED):
            await eng.invoke_rpc(flow.read_locked, "l")
        # A read-modify-write under the lock alone fails before it writes: nothing commits.
        with pytest.raises(AttributeMapNotLoadedError, match=NOT_LOADED):
            await eng.invoke_rpc(flow.add_locked, "l", 1)
        unchanged = await eng.get_attributes("l", ["balances/k"])
        # A lock chosen at call time does not load either.
        locked = RPCInvokeOptions(lock_attribute_map_instances=(LedgerFlow.balances.lock("k"),))
        with pytest.raises(AttributeMapNotLoadedError, match=NOT_LOADED):
            await eng.invoke_rpc(flow.read, "l", options=locked)
        # The same lock with the load reads and writes (and the failed calls left no lock).
        loaded = RPCInvokeOptions(load_attribute_map_instances=(LedgerFlow.balances.load("k"),))
        added = await eng.invoke_rpc(flow.add_locked, "l", 1, options=loaded)
        after = await eng.get_attributes("l", ["balances/k"])
    assert unchanged.values == {"balances/k": 5}
    assert added == 6
    assert after.values == {"balances/k": 6}
