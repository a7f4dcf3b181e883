"""One contract per port, run against each of its implementations.

The runtime talks to its storage and coordination through the Protocols of
``engine/_runtime/ports.py``: a Database (SQLite's one writer, PostgreSQL's pool) and a
LockTable (this process's memory, or lock rows every process sees). Each case here runs
against every implementation, so the two cannot drift apart unseen. The Stream Stores have
their own such module (``test_stream_store_backends.py``). These run in the SQLite half, with
a database of their own on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from engine import IdReusePolicy
from engine._ids import new_id
from engine._runtime.locks import MemoryLockTable
from engine._runtime.ports import Database, LockTable
from engine._runtime.postgres.lease import ProcessLease
from engine._runtime.postgres.lock_table import PostgresLockTable
from engine._runtime.workload import Workload
from engine._storage import units
from engine._storage.databases import DatabaseSettings, open_database
from engine._storage.postgres.database import PostgresDatabase
from engine._storage.records import LoadPlan, Phase, QueuedStep, StagedEffects, StartRequest
from engine.errors import RPCLockConflictError
from tests.support import backends
from tests.support.waiting import eventually

pytestmark = backends.backend_independent("runs every implementation itself")

EXECUTE = Phase.EXECUTE.value


def _postgres_url() -> str:
    backends.require_server()
    return backends.create_postgres_database(f"dexlite_test_ports_{uuid.uuid4().hex[:10]}")


async def _opened(kind: str, tmp_path: Path) -> Database:
    url = f"sqlite+aiosqlite:///{tmp_path / 'ports.db'}" if kind == "sqlite" else _postgres_url()
    database = open_database(DatabaseSettings(url=url), claimant="contract")
    await database.open()
    return database


# -- Database ---------------------------------------------------------------------------------


def _create_table(conn: Connection) -> None:
    conn.execute(text("CREATE TABLE contract_rows (k VARCHAR(40) PRIMARY KEY)"))


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    opened = await _opened(request.param, tmp_path)
    try:
        await opened.write(_create_table)
        yield opened
    finally:
        await opened.close()


def _insert(key: str) -> Any:
    def unit(conn: Connection) -> int:
        conn.execute(text("INSERT INTO contract_rows (k) VALUES (:k)"), {"k": key})
        return len(key)

    return unit


def _flow_ids(conn: Connection) -> list[str]:
    return list(conn.execute(text("SELECT k FROM contract_rows ORDER BY k")).scalars())


async def test_a_written_unit_is_read_back_by_reads_and_scans(database: Database) -> None:
    assert await database.write(_insert("a")) == 1
    assert await database.write(_insert("bb"), slow=True) == 2
    assert await database.read(_flow_ids) == ["a", "bb"]
    assert await database.scan(_flow_ids) == ["a", "bb"]
    await database.ping()


async def test_a_unit_that_raises_commits_nothing_and_the_error_reaches_its_caller(
    database: Database,
) -> None:
    class Refused(Exception):
        pass

    def half_done(conn: Connection) -> None:
        _insert("half")(conn)
        raise Refused

    with pytest.raises(Refused):
        await database.write(half_done)
    assert await database.read(_flow_ids) == []


async def test_concurrent_units_each_commit_once(database: Database) -> None:
    ids = [f"f{n:02d}" for n in range(40)]
    await asyncio.gather(*(database.write(_insert(flow_id)) for flow_id in ids))
    assert await database.read(_flow_ids) == ids


async def test_one_failing_unit_among_concurrent_ones_fails_alone(database: Database) -> None:
    # SQLite batches concurrent units into one transaction: the duplicate's failure must not
    # take its neighbours with it.
    await database.write(_insert("taken"))
    units = [_insert(f"n{n}") for n in range(10)]
    units.insert(5, _insert("taken"))
    results = await asyncio.gather(*(database.write(u) for u in units), return_exceptions=True)
    failed = [r for r in results if isinstance(r, Exception)]
    assert len(failed) == 1, results
    assert await database.read(_flow_ids) == sorted(["taken", *(f"n{n}" for n in range(10))])


# -- LockTable --------------------------------------------------------------------------------


#: The Step executions the cases lock for, pending in the execute phase of Flow "f"'s run
#: (lock rows of a shared database are alive while their execution is).
STEPS = ("step-1", "step-2", "step-3")


async def _run_with_steps(database: Database) -> list[str]:
    """Start Flow "f" with the Steps of STEPS pending; return their execution IDs."""
    run_id = new_id()
    steps = [
        QueuedStep(f"{run_id}:{name}", run_id, "f", "F", name, "null", Phase.EXECUTE)
        for name in STEPS
    ]
    request = StartRequest(
        flow_id="f",
        flow_type="F",
        run_id=run_id,
        input="null",
        request_id=None,
        id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE,
        ignore_already_started=False,
        timeout_at=None,
        writes=(),
        start_step=steps[0],
    )
    more = units.commit_rpc(
        flow_id="f",
        run_id=run_id,
        rpc_name="r",
        effects=StagedEffects(next_steps=tuple(steps[1:])),
        now=1,
    )
    await database.write(units.start_run(request, 1))
    await database.write(more)
    return [s.id for s in steps]


@pytest.fixture(params=["memory", "postgres"])
async def locks(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Locks]:
    if request.param == "memory":
        yield Locks(MemoryLockTable(), list(STEPS))
        return
    database = await _opened("postgres", tmp_path)
    assert isinstance(database, PostgresDatabase)
    ids = await _run_with_steps(database)
    lease = ProcessLease(database, "contract", 30)
    await lease.start()
    table = PostgresLockTable(database, lease, Workload())
    try:
        yield Locks(table, ids)
    finally:
        await table.close()
        await lease.stop()
        await database.close()


@dataclass
class Locks:
    """A LockTable under test and the IDs of the Steps that may lock."""

    table: LockTable
    steps: list[str]


async def _free(table: LockTable, key: str) -> bool:
    """Take ``key`` for an RPC and let it go again: True when it was free."""
    try:
        await table.acquire_for_rpc("f", [key], "probe")
    except RPCLockConflictError:
        return False
    await table.release_now("f", "probe")
    return True


def _step(locks: Locks, n: int, keys: list[str]) -> asyncio.Future[None]:
    return asyncio.ensure_future(locks.table.acquire_for_step("f", keys, locks.steps[n], EXECUTE))


async def test_an_rpc_takes_free_keys_and_a_second_rpc_on_a_held_key_conflicts(
    locks: Locks,
) -> None:
    table = locks.table
    await table.acquire_for_rpc("f", ["a", "b"], "rpc-1")
    with pytest.raises(RPCLockConflictError) as refused:
        await table.acquire_for_rpc("f", ["b", "c"], "rpc-2")
    assert refused.value.key == "b"
    # Other keys, and the same keys of another Flow, are free.
    await table.acquire_for_rpc("f", ["c"], "rpc-3")
    await table.acquire_for_rpc("g", ["a", "b"], "rpc-4")
    await table.release_now("f", "rpc-1")
    await table.acquire_for_rpc("f", ["a", "b"], "rpc-2")


async def test_an_rpc_take_with_a_load_reads_its_run_or_leaves_the_read_to_the_caller(
    locks: Locks,
) -> None:
    table = locks.table
    found = await table.acquire_for_rpc("f", ["a"], "rpc-1", (None, LoadPlan(names=())))
    # The in-process table leaves the read to the caller (committed state is in process); a
    # shared one reads the run with the take, in the same round trip.
    if isinstance(table, MemoryLockTable):
        assert found is None
    else:
        assert found is not None and found.snapshot is not None
        assert found.snapshot.run.flow_id == "f"
        assert found.snapshot.values == {}
    with pytest.raises(RPCLockConflictError) as refused:
        await table.acquire_for_rpc("f", ["a"], "rpc-2", (None, LoadPlan()))
    assert refused.value.key == "a"
    await table.release_now("f", "rpc-1")
    assert await _free(table, "a")


async def test_steps_get_a_key_first_come_first_served(locks: Locks) -> None:
    table = locks.table
    await table.acquire_for_rpc("f", ["k"], "rpc")
    # Asking is recorded when asked (the awaitable only waits): the first Step asks first.
    first, second = _step(locks, 0, ["k"]), _step(locks, 1, ["k"])
    await table.release_now("f", "rpc")
    await asyncio.wait_for(first, 10)
    assert not second.done()
    # An RPC never queues: the key is a Step's now.
    with pytest.raises(RPCLockConflictError):
        await table.acquire_for_rpc("f", ["k"], "rpc-late")
    table.release("f", locks.steps[0])
    await asyncio.wait_for(second, 10)
    table.release("f", locks.steps[1])
    await eventually(lambda: _free(table, "k"), what="the key free once both Steps let go")


async def test_a_waiting_step_holds_nothing_so_a_step_wanting_other_keys_goes_ahead(
    locks: Locks,
) -> None:
    table = locks.table
    await table.acquire_for_rpc("f", ["a"], "rpc")
    waiting = _step(locks, 0, ["a", "b"])
    # The third Step wants "b" too: it queues behind the first, which came first.
    behind = _step(locks, 2, ["b"])
    # The second wants only "c": nothing blocks it, and the waiting first holds no "b".
    await asyncio.wait_for(_step(locks, 1, ["c"]), 10)
    assert not waiting.done() and not behind.done()
    await table.release_now("f", "rpc")
    await asyncio.wait_for(waiting, 10)
    assert not behind.done()
    table.release("f", locks.steps[0])
    await asyncio.wait_for(behind, 10)


async def test_a_step_holding_past_its_end_keeps_its_keys_until_released(
    locks: Locks,
) -> None:
    table = locks.table
    await asyncio.wait_for(_step(locks, 0, ["k"]), 10)
    table.hold_past_end("f", locks.steps[0])
    with pytest.raises(RPCLockConflictError):
        await table.acquire_for_rpc("f", ["k"], "rpc")
    table.release("f", locks.steps[0])
    await eventually(lambda: _free(table, "k"), what="the key free once the Step let go")
