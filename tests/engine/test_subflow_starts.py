"""The storage side of a SubFlow start: a matching Request ID attaches whatever the policy.

A start retried in the same parent run (the parent's commit is the only place a child starts,
so the retry is what a future re-entry of the wait would do) carries the Request ID the first
start stored; it must attach to the running child, or return its terminal result, even under
ALWAYS_RESTART. A different Request ID goes by the reuse-policy table.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, select

from engine._ids import new_id
from engine._storage import start_units, units
from engine._storage import tables as t
from engine._storage.database_settings import DatabaseSettings
from engine._storage.records import (
    Phase,
    QueuedStep,
    RunClose,
    RunStatus,
    StartRequest,
    SubFlowStart,
)
from engine._storage.rows import lock_run
from engine._storage.sqlite.database import SQLiteDatabase
from engine._storage.units import journaled
from engine.options import IdReusePolicy
from engine.subflow import SubFlowReusePolicy

CHILD = "SubFlow:parent-Spawn-1-0"


def request(flow_id: str, flow_type: str, request_id: str | None) -> StartRequest:
    return StartRequest(
        flow_id=flow_id,
        flow_type=flow_type,
        run_id=new_id(),
        input="null",
        request_id=request_id,
        id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE,
        ignore_already_started=False,
        timeout_at=None,
        writes=(),
        start_step=None,
    )


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SQLiteDatabase]:
    database = SQLiteDatabase(DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path}/s.db"))
    await database.open()
    try:
        yield database
    finally:
        await database.close()


async def start_child(
    db: SQLiteDatabase, parent_run: str, request_id: str, policy: SubFlowReusePolicy
) -> tuple[str, str]:
    step = QueuedStep(
        f"{parent_run}:Spawn-1", parent_run, "parent", "Parent", "Spawn", "null", Phase.WAITING
    )

    def unit(conn: Connection) -> tuple[str, str]:
        parent = lock_run(conn, parent_run)
        assert parent is not None
        start = SubFlowStart(0, request(CHILD, "Child", request_id), policy)
        run_id, action, _ = start_units.start_subflow(conn, parent, step, start, 1)
        return run_id, action

    return await db.write(journaled(unit))


async def child_runs(db: SQLiteDatabase) -> list[tuple[str, str]]:
    def query(conn: Connection) -> list[tuple[str, str]]:
        rows = conn.execute(
            select(t.runs.c.run_id, t.runs.c.status)
            .where(t.runs.c.flow_id == CHILD)
            .order_by(t.runs.c.run_id)
        )
        return [(r.run_id, str(r.status)) for r in rows]

    return await db.read(query)


async def test_a_matching_request_id_attaches_even_under_always_restart(db: SQLiteDatabase) -> None:
    parent = request("parent", "Parent", None)
    await db.write(units.start_run(parent, 1))
    first, action = await start_child(db, parent.run_id, "r-1", SubFlowReusePolicy.ALWAYS_RESTART)
    assert action == start_units.STARTED
    # The same start again: attaches to the running child, which keeps its one run.
    again, action = await start_child(db, parent.run_id, "r-1", SubFlowReusePolicy.ALWAYS_RESTART)
    assert (again, action) == (first, start_units.ATTACHED)
    assert await child_runs(db) == [(first, "RUNNING")]
    # Once the child closed, the same start returns its terminal result: still no new run.
    await db.write(
        units.stop_run(flow_id=CHILD, run_id=first, close=RunClose(RunStatus.FAILED), now=2)
    )
    again, action = await start_child(db, parent.run_id, "r-1", SubFlowReusePolicy.ALWAYS_RESTART)
    assert (again, action) == (first, start_units.ATTACHED)
    assert await child_runs(db) == [(first, "FAILED")]
    # Another Request ID goes by the table: ALWAYS_RESTART starts a new run.
    new, action = await start_child(db, parent.run_id, "r-2", SubFlowReusePolicy.ALWAYS_RESTART)
    assert action == start_units.STARTED and new != first
    assert sorted(await child_runs(db)) == sorted([(first, "FAILED"), (new, "RUNNING")])
