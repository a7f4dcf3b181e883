"""An RPC's lock take and snapshot read as one call (``rpc_loads``, migration 0009), under
concurrent transactions on PostgreSQL: it reads what its plan names, changes nothing when it
cannot take the keys, and reads the writes of a commit it waited for."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from engine._runtime.postgres.lock_rows import lock_flow
from engine._storage import sqlalchemy_internals as pg_direct
from engine._storage import tables as t
from engine._storage import units
from engine._storage.postgres.rpc_loads import SQL, Loaded, loaded, take_and_load
from engine._storage.records import AttributeWrite, LoadPlan, StagedEffects, StoredValue
from tests.postgres.test_commit_units import (
    NOW,
    backend_pid,
    blocked_on_a_lock,
    run_statement,
    run_unit,
    start_request,
)


def writes_unit(flow_id: str, run_id: str, *writes: AttributeWrite) -> Any:
    """The unit of an RPC that writes ``writes``."""
    return units.commit_rpc(
        flow_id=flow_id,
        run_id=run_id,
        rpc_name="set",
        effects=StagedEffects(writes=writes),
        now=NOW,
    )


def take(flow_id: str, owner: str, plan: LoadPlan, keys: tuple[str, ...] = ("count",)) -> Any:
    """A unit calling the function for ``owner`` (in this process ``p``)."""
    args = take_and_load(
        flow_id=flow_id, keys=keys, owner=owner, kind="RPC", process="p", run_id=None, plan=plan
    )
    assert args is not None

    def unit(conn: Connection) -> Loaded | None:
        return loaded(pg_direct.fetch(conn, SQL, args))

    return unit


async def lock_rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        count: int = (
            await conn.execute(select(func.count()).select_from(t.attribute_locks))
        ).scalar_one()
    return count


async def test_it_reads_the_names_maps_and_instances_its_plan_names_once_it_holds_the_keys(
    pg_engine: AsyncEngine,
) -> None:
    request, _ = start_request("loads")
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(request, NOW))
        await run_unit(
            conn,
            writes_unit(
                "loads",
                request.run_id,
                AttributeWrite("count", "", "1"),
                AttributeWrite("other", "", '"x"'),
                AttributeWrite("chunks", "0", "[1]"),
                AttributeWrite("chunks", "1", "[2]"),
                AttributeWrite("seen", "a", "true"),
                AttributeWrite("seen", "b", "false"),
            ),
        )
        plan = LoadPlan(names=("count",), whole_maps=("chunks",), instances=(("seen", "b"),))
        found = await run_statement(conn, take("loads", "rpc-1", plan))
    assert found is not None and found.snapshot is not None
    assert found.snapshot.run.run_id == request.run_id
    assert found.snapshot.values == {
        ("count", ""): StoredValue("1", False),
        ("chunks", "0"): StoredValue("[1]", False),
        ("chunks", "1"): StoredValue("[2]", False),
        ("seen", "b"): StoredValue("false", False),
    }
    assert await lock_rows(pg_engine) == 1

    # Held keys: no row, nothing changed (the caller runs the full transaction instead).
    async with pg_engine.connect() as conn:
        assert await run_statement(conn, take("loads", "rpc-2", LoadPlan())) is None
    assert await lock_rows(pg_engine) == 1

    # Every singleton (names None) and no run (a Flow ID never started): the take only.
    async with pg_engine.connect() as conn:
        every = await run_statement(conn, take("loads", "rpc-3", LoadPlan(), keys=("other",)))
        nothing = await run_statement(conn, take("never-started", "rpc-4", LoadPlan()))
    assert every is not None and every.snapshot is not None
    assert set(every.snapshot.values) == {("count", ""), ("other", "")}
    assert nothing == Loaded(None)


async def test_a_take_that_waited_for_a_commit_of_the_flow_reads_that_commit(
    pg_engine: AsyncEngine,
) -> None:
    # The earlier holder's commit drops its lock rows and writes under the Flow's advisory
    # lock; a take that waited for that lock must read its writes. One SQL statement would
    # read as of its start, before the commit: the function reads after taking the keys.
    request, _ = start_request("race")
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(request, NOW))
        await run_unit(conn, writes_unit("race", request.run_id, AttributeWrite("count", "", "1")))
    async with pg_engine.connect() as a, pg_engine.connect() as b:
        pid = await backend_pid(b)
        transaction = await a.begin()
        await a.run_sync(lambda conn: lock_flow(conn, "race"))
        await a.run_sync(writes_unit("race", request.run_id, AttributeWrite("count", "", "2")))
        racing = asyncio.ensure_future(
            run_statement(b, take("race", "rpc-1", LoadPlan(names=("count",))))
        )
        await blocked_on_a_lock(pg_engine, pid)
        await transaction.commit()
        found = await racing
    assert found is not None and found.snapshot is not None
    assert found.snapshot.values == {("count", ""): StoredValue("2", False)}


def test_a_plan_that_reads_channels_reads_on_its_own() -> None:
    for plan in (
        LoadPlan(channel_sizes=True),
        LoadPlan(channels=("inbox",)),
        LoadPlan(channel_instances=(("boxes", "a"),)),
    ):
        args = take_and_load(
            flow_id="f", keys=["k"], owner="o", kind="RPC", process="p", run_id=None, plan=plan
        )
        assert args is None
