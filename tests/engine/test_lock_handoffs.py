"""Lock handoffs (``engine/_runtime/handoff.py``, issue 12).

On SQLite an RPC whose effects are Attribute writes releases its locks once its unit is queued
for the writer, before the fsync. These tests hold the writer on a gate (a unit that blocks
until the test opens it), so that several units are queued at once, and check what must hold:

- the next holder reads the handed-off value, so concurrent increments lose nothing;
- GetAttributes still reads committed state only;
- a handed-off unit that fails fails every unit that read its writes, and nothing else: a
  neighbour in the same batch on another Flow commits;
- an RPC is answered only once its unit committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import engine
from engine._storage.records import CommitResult
from patterns.primitives.rpc.flow import CounterFlow
from tests.conftest import running_engine
from tests.support.backends import sqlite_only
from tests.support.waiting import eventually

pytestmark = sqlite_only("lock handoffs needs the single writer's commit order")


@contextlib.asynccontextmanager
async def writer_held(eng: engine.Engine, then: Any = None) -> AsyncIterator[threading.Event]:
    """Block SQLite's writer on a unit until the returned event is set; ``then(conn)`` runs in
    that unit first (on the writer's own connection). The unit is a slow one, so it blocks the
    writer's thread, not the event loop, and the units submitted meanwhile queue behind it."""
    gate = threading.Event()
    entered = threading.Event()

    def unit(conn: Any) -> Any:
        entered.set()
        gate.wait(timeout=30)
        if then is not None:
            then(conn)
        return CommitResult()

    database = eng._services.database
    done = database.submit(unit, slow=True)
    # The writer takes the unit on the loop's next turn: wait for it without blocking the loop.
    assert await asyncio.to_thread(entered.wait, 10), "the writer did not reach the gate"
    try:
        yield gate
    finally:
        gate.set()
        del done


#: Increments retry their lock conflicts: those of one process take turns, each as soon as the
#: one before released the lock (before its commit), and nobody spins on RPC_LOCK_CONFLICT.
TURNS = engine.RPCInvokeOptions(lock_retry=timedelta(seconds=30))


async def _increment(eng: engine.Engine, flow_id: str) -> int:
    """Increment once, in turn with the other increments of the Flow."""
    return int(await eng.invoke_rpc("increment", flow_id, 1, options=TURNS))


async def _queued(eng: engine.Engine, flow_id: str, count: int) -> None:
    """Wait until ``count`` units of the Flow are handed off (their locks released)."""

    async def handed_off() -> bool:
        assert len(eng._services.committer.handoffs.pending(flow_id)) == count
        return True

    await eventually(handed_off, within=10, interval=0.01)


async def _counter(eng: engine.Engine, flow_id: str) -> int:
    found = await eng.get_attributes(flow_id, ["counter"])
    return int(found.values.get("counter") or 0)


@pytest.fixture
def full_sync(engine_config: engine.EngineConfig) -> engine.EngineConfig:
    return dataclasses.replace(engine_config, sqlite_synchronous="FULL")


async def test_the_next_holder_reads_the_handed_off_value_while_nothing_has_committed(
    full_sync: engine.EngineConfig,
) -> None:
    async with running_engine([CounterFlow()], full_sync) as eng:
        await eng.start_flow(CounterFlow, "c")
        async with writer_held(eng) as gate:
            first = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 1))
            await _queued(eng, "c", 1)
            # The lock is free again although nothing has committed.
            second = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 10))
            await _queued(eng, "c", 2)
            # Neither is answered, and clients still read the committed state.
            assert not first.done() and not second.done()
            assert await _counter(eng, "c") == 0
            gate.set()
            assert await first == 1
            assert await second == 11
        assert await _counter(eng, "c") == 11


async def test_concurrent_increments_on_one_flow_lose_and_duplicate_nothing(
    full_sync: engine.EngineConfig,
) -> None:
    calls = 200
    async with running_engine([CounterFlow()], full_sync) as flows:
        await flows.start_flow(CounterFlow, "c")
        answers = await asyncio.gather(*(_increment(flows, "c") for _ in range(calls)))
        assert sorted(answers) == list(range(1, calls + 1))
        assert await _counter(flows, "c") == calls


async def test_a_failed_hand_off_fails_its_readers_and_not_its_neighbours(
    full_sync: engine.EngineConfig,
) -> None:
    def refuse_the_first_value(conn: Any) -> None:
        # On the writer's connection only: the first increment's row cannot be written.
        conn.exec_driver_sql(
            "CREATE TEMP TRIGGER refuse_one BEFORE INSERT ON attributes "
            "WHEN NEW.value = '1' BEGIN SELECT RAISE(ABORT, 'refused for the test'); END"
        )

    async with running_engine([CounterFlow()], full_sync) as eng:
        await eng.start_flow(CounterFlow, "c")
        await eng.start_flow(CounterFlow, "neighbour")
        await _increment(eng, "neighbour")  # 1: its next value is 2, which is not refused
        async with writer_held(eng, then=refuse_the_first_value) as gate:
            first = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 1))
            await _queued(eng, "c", 1)
            reader = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 1))
            neighbour = asyncio.ensure_future(eng.invoke_rpc("increment", "neighbour", 1))
            await _queued(eng, "c", 2)
            await _queued(eng, "neighbour", 1)
            gate.set()
            results = await asyncio.gather(first, reader, neighbour, return_exceptions=True)
        assert isinstance(results[0], Exception) and "refused for the test" in str(results[0])
        # The reader wrote 2 on its own, which the trigger allows: it failed for reading 1.
        assert isinstance(results[1], Exception) and "refused for the test" in str(results[1])
        assert results[2] == 2
        assert await _counter(eng, "c") == 0
        assert await _counter(eng, "neighbour") == 2
        assert eng._services.committer.handoffs.pending("c") == ()
        # Nothing half-done: the next increment starts from the committed 0 again (and 1 is
        # still refused on the writer's connection, so it lands on 2 by way of two calls).
        with contextlib.suppress(Exception):
            await eng.invoke_rpc("increment", "c", 1)
        assert await eng.invoke_rpc("increment", "c", 2) == 2
        assert await _counter(eng, "c") == 2


class TwoCounters(engine.Flow[None]):
    """``bump`` locks and writes ``a`` and returns ``b`` too (every invocation loads every
    singleton Attribute); ``peek`` takes no lock."""

    a: engine.Attribute[int] = engine.Attribute("a", int)
    b: engine.Attribute[int] = engine.Attribute("b", int)

    def get_steps(self) -> engine.StepList[None]:
        return engine.StepList.empty()

    @engine.rpc(lock_attributes=(a.lock(),))
    async def bump(self, context: engine.Context) -> list[int | None]:
        a = (self.a.get(context) or 0) + 1
        self.a.set(context, a)
        return [a, self.b.get(context)]

    @engine.rpc
    async def peek(self, context: engine.Context) -> int | None:
        return self.a.get(context)


async def test_a_holder_reads_from_the_database_what_no_hand_off_wrote(
    full_sync: engine.EngineConfig,
) -> None:
    async with running_engine([TwoCounters()], full_sync) as eng:
        await eng.start_flow(TwoCounters, "t")
        await eng.set_attributes("t", {"b": 5})
        async with writer_held(eng) as gate:
            first = asyncio.ensure_future(eng.invoke_rpc("bump", "t", None))
            await _queued(eng, "t", 1)
            # The hand-off wrote ``a`` only: ``b`` comes from the committed state.
            second = asyncio.ensure_future(eng.invoke_rpc("bump", "t", None))
            await _queued(eng, "t", 2)
            gate.set()
            assert await first == [1, 5]
            assert await second == [2, 5]


async def test_an_rpc_without_locks_reads_committed_state_only(
    full_sync: engine.EngineConfig,
) -> None:
    async with running_engine([TwoCounters()], full_sync) as eng:
        await eng.start_flow(TwoCounters, "t")
        async with writer_held(eng) as gate:
            bumped = asyncio.ensure_future(eng.invoke_rpc("bump", "t", None))
            await _queued(eng, "t", 1)
            # It answers at once, from what has committed: not the write still on its way.
            assert await eng.invoke_rpc("peek", "t", None) is None
            gate.set()
            assert await bumped == [1, None]
        assert await eng.invoke_rpc("peek", "t", None) == 1


class Entry(BaseModel):
    """A frozen record: lists of it are handed from one holder to the next undecoded."""

    model_config = ConfigDict(frozen=True)
    n: int


class Loose(BaseModel):
    """A record that can change in place: never reused, each reader decodes its own."""

    n: int


class Journal(engine.Flow[None]):
    """``write`` appends and sets; ``scribble`` changes what it loaded without setting it."""

    entries: engine.Attribute[list[Entry]] = engine.Attribute("entries", list[Entry])
    loose: engine.Attribute[Loose] = engine.Attribute("loose", Loose)
    marks: engine.Attribute[int] = engine.Attribute("marks", int)

    def get_steps(self) -> engine.StepList[None]:
        return engine.StepList.empty()

    @engine.rpc(lock_attributes=(entries.lock(), loose.lock(), marks.lock()))
    async def write(self, context: engine.Context, input: int) -> list[int]:
        entries = self.entries.get(context) or []
        entries.append(Entry(n=input))
        self.entries.set(context, entries)
        self.loose.set(context, Loose(n=input))
        return [e.n for e in entries]

    @engine.rpc(lock_attributes=(entries.lock(), loose.lock(), marks.lock()))
    async def scribble(self, context: engine.Context) -> list[int]:
        entries = self.entries.get(context) or []
        seen = [e.n for e in entries]
        entries.append(Entry(n=-1))  # changes this holder's copy only
        entries.clear()
        loose = self.loose.get(context)
        if loose is not None:
            loose.n = -1  # a mutable model: this holder's own decoded copy
        self.marks.set(context, len(seen))
        return seen

    @engine.rpc(lock_attributes=(entries.lock(), loose.lock(), marks.lock()))
    async def read(self, context: engine.Context) -> list[int | None]:
        loose = self.loose.get(context)
        return [*(e.n for e in self.entries.get(context) or []), loose and loose.n]


async def test_values_handed_on_undecoded_are_each_holders_own(
    full_sync: engine.EngineConfig,
) -> None:
    """A list of frozen records a holder set reaches the next holders without being decoded
    again; a holder that changes its copy in place (and does not set it) changes nobody
    else's, and neither does one that changes a mutable model it loaded."""
    from engine._reuse import reuse_of

    assert reuse_of(list[Entry]) is list and reuse_of(Loose) is None
    async with running_engine([Journal()], full_sync) as eng:
        await eng.start_flow(Journal, "j")
        async with writer_held(eng) as gate:
            first = asyncio.ensure_future(eng.invoke_rpc("write", "j", 1))
            await _queued(eng, "j", 1)
            second = asyncio.ensure_future(eng.invoke_rpc("write", "j", 2))
            await _queued(eng, "j", 2)
            scribbled = asyncio.ensure_future(eng.invoke_rpc("scribble", "j", None))
            await _queued(eng, "j", 3)
            read = asyncio.ensure_future(eng.invoke_rpc("read", "j", None))
            # The handed-off entries are the object the second holder set, not decoded text.
            pending = eng._services.committer.handoffs.pending("j")
            handed = [w for w in pending[1].writes if w.name == "entries"][0]
            assert [e.n for e in handed.decoded] == [1, 2]
            gate.set()
            assert await first == [1]
            assert await second == [1, 2]
            assert await scribbled == [1, 2]
            assert await read == [1, 2, 2]
        # What committed is what was set, and reads back the same.
        assert await eng.invoke_rpc("read", "j", None) == [1, 2, 2]
