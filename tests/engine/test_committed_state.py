"""The copies of committed state (``engine/_runtime/committed_state.py``) are what a read returns.

On SQLite snapshots of running Flows are served from copies kept current by the writer. After
every operation of a mixed workload (RPC writes and deletes, Attribute writes from a client,
Step commits, map instances, hard-delete values, stops, a new run of the Flow ID), each plan the
copies can serve must give exactly the snapshot a read of the database gives.
"""

from __future__ import annotations

import random
from typing import Any

from engine import (
    Attribute,
    AttributeMap,
    Context,
    EngineConfig,
    Flow,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    dead_end,
    rpc,
)
from engine._runtime.committed_state import CommittedState
from engine._storage import reads
from engine._storage.records import (
    CommitResult,
    LoadPlan,
    RunChange,
    RunInfo,
    RunStatus,
    Snapshot,
    StoredValue,
)
from tests.conftest import running_engine
from tests.support.backends import sqlite_only
from tests.support.waiting import eventually

pytestmark = sqlite_only("only the single writer keeps copies of committed state")


class Bump(Step[str]):
    """Writes ``note`` and a map instance from a Step, then ends its branch (the Flow runs
    on)."""

    async def execute(self, context: Context, input: str) -> StepDecision:
        LedgerFlow.note.set(context, f"step {input}")
        LedgerFlow.rows.set(context, input, len(input))
        return dead_end()


class LedgerFlow(Flow[None]):
    count: Attribute[int] = Attribute("count", int)
    note: Attribute[str] = Attribute("note", str)
    secret: Attribute[str] = Attribute("secret", str, hard_delete_on_null=True)
    rows: AttributeMap[int] = AttributeMap("rows", int)

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Bump())

    @rpc(lock_attributes=(count.lock(),))
    async def add(self, context: Context, input: int) -> int:
        value = (self.count.get(context) or 0) + input
        self.count.set(context, value)
        return value

    @rpc
    async def write(self, context: Context, input: list[Any]) -> None:
        name, value = input
        if name == "note":
            self.note.set(context, value)
        elif name == "secret":
            self.secret.set(context, value)
        else:
            self.rows.set(context, str(name), value)

    @rpc
    async def bump(self, context: Context, input: str) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Bump, input),))


PLANS = [
    LoadPlan(),
    LoadPlan(names=("count",)),
    LoadPlan(names=("note", "secret", "missing")),
    LoadPlan(names=(), instances=(("rows", "a"), ("rows", "bb"))),
    LoadPlan(names=("count",), instances=(("rows", "a"),)),
]


async def _check(eng: Any, flow_id: str) -> int:
    """Assert every plan the copies serve equals a read; return how many they served."""
    services = eng._services
    committed = services.snapshots._committed
    served = 0
    for plan in PLANS:
        for run_id in (None, _latest(eng, flow_id)):
            copy = committed.snapshot(flow_id, run_id, plan)
            read = await reads.load_snapshot(services.database, flow_id, run_id, plan)
            if copy is not None:
                served += 1
                assert read is not None and read.run.is_running, (plan, run_id)
                assert (copy.run, copy.values) == (read.run, read.values), (plan, run_id)
            # What the engine would use: through the copies when they know it.
            through = await services.snapshots.read(flow_id, run_id, plan)
            assert (through is None) == (read is None)
            if read is not None and through is not None:
                assert (through.run, through.values) == (read.run, read.values)
    return served


def _latest(eng: Any, flow_id: str) -> str | None:
    copy = eng._services.snapshots._committed._copies.get(flow_id)
    return copy.run.run_id if copy is not None else None


async def test_copies_of_committed_state_equal_a_read_after_every_kind_of_commit(
    engine_config: EngineConfig,
) -> None:
    rng = random.Random(1202)
    async with running_engine([LedgerFlow()], engine_config) as eng:
        await eng.start_flow(LedgerFlow, "l")
        served = await _check(eng, "l")
        for n in range(120):
            kind = rng.choice(["add", "note", "secret", "row", "set", "delete", "step"])
            if kind == "add":
                await eng.invoke_rpc("add", "l", rng.randint(1, 5))
            elif kind == "note":
                await eng.invoke_rpc("write", "l", ["note", rng.choice([None, f"n{n}"])])
            elif kind == "secret":
                await eng.invoke_rpc("write", "l", ["secret", rng.choice([None, f"s{n}"])])
            elif kind == "row":
                await eng.invoke_rpc("write", "l", [rng.choice(["a", "bb", "c"]), n])
            elif kind == "set":
                await eng.set_attributes("l", {"count": n, "rows/a": None})
            elif kind == "delete":
                await eng.set_attributes("l", {"note": None, "count": None})
            else:
                await eng.invoke_rpc("bump", "l", rng.choice(["a", "bb"]))
                await eventually(lambda: _no_pending_steps(eng))
            served += await _check(eng, "l")
            if n == 80:
                # A stop closes the run: the copy goes, reads see the closed run.
                await eng.stop_flow("l")
                served += await _check(eng, "l")
                assert _latest(eng, "l") is None
                await eng.start_flow(LedgerFlow, "l")  # a new run: new copies
                served += await _check(eng, "l")
    # The copies served most plans: the comparisons above were not vacuous.
    assert served > 600


async def _no_pending_steps(eng: Any) -> bool:
    stats = await eng.stats()
    return stats.steps_pending == 0


async def test_copies_stay_within_their_flow_and_byte_bounds(engine_config: EngineConfig) -> None:
    import dataclasses

    config = dataclasses.replace(engine_config, state_cache_bytes=4096)
    async with running_engine([LedgerFlow()], config) as eng:
        committed = eng._services.snapshots._committed
        for n in range(40):
            await eng.start_flow(LedgerFlow, f"f{n}")
            await eng.invoke_rpc("write", f"f{n}", ["note", "x" * 200])
            await eng.get_attributes(f"f{n}", ["note"])
        assert committed._bytes <= 4096
        assert 0 < len(committed) < 40
        # Evicted Flows read from the database, and answer the same.
        found = await eng.get_attributes("f0", ["note"])
        assert found.values == {"note": "x" * 200}


def _kept(committed: Any, flow_id: str) -> None:
    run = RunInfo(
        f"run-{flow_id}",
        flow_id,
        "LedgerFlow",
        RunStatus.RUNNING,
        "null",
        None,
        1,
        None,
        None,
        None,
        None,
    )
    snapshot = Snapshot(run, {("note", ""): StoredValue('"kept"', False)})
    committed.remember(None, LoadPlan(names=("note",)), snapshot, committed.commits)


def test_copies_of_flows_whose_commit_is_on_its_way_are_not_served() -> None:
    """Between a batch's COMMIT and the writer handing its results on, a read of the database
    may already see the batch: the copies of its Flows must not answer older than that read
    (a waitForFlow that saw a run close, then a GetAttributes served from the copy)."""
    committed = CommittedState(1 << 20)
    _kept(committed, "a")
    _kept(committed, "b")
    plan = LoadPlan(names=("note",))
    assert committed.snapshot("a", None, plan) is not None
    change = RunChange("a", "LedgerFlow", "run-a")
    committed.committing([CommitResult((change,)), "not a CommitResult"])
    assert committed.snapshot("a", None, plan) is None
    assert committed.snapshot("b", None, plan) is not None  # not in the batch
    # An RPC or a Step lays the handed-off units over its snapshot: it is served.
    assert committed.snapshot("a", None, plan, overlaid=True) is not None
    committed.committed(CommitResult((change,)))
    committed.settled()
    assert committed.snapshot("a", None, plan) is not None
    # A batch whose units ran on the writer's thread: its Flows are unknown, none is served.
    committed.committing(None)
    assert committed.snapshot("b", None, plan) is None
    committed.settled()
    assert committed.snapshot("b", None, plan) is not None
