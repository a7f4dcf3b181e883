"""SearchFlows at the storage level: index rows written by the commit units, read back with
``search_runs``, on any database (no Engine, so the same code drives SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Connection, delete, insert
from sqlalchemy.ext.asyncio import AsyncEngine

from engine import IdReusePolicy, IndexType
from engine._storage import tables as t
from engine._storage import units
from engine._storage.indexes import index_write
from engine._storage.prepared import Prepared
from engine._storage.records import (
    AttributeWrite,
    CommitResult,
    RunClose,
    RunStatus,
    StagedEffects,
    StartRequest,
)
from engine._storage.search.queries import FoundRun, search_runs
from tests.support.search_model import KEY_TYPES, Run


class Reads:
    """What the search queries read through (``Database.read`` and ``scan``), over a bare
    AsyncEngine."""

    def __init__(self, db: AsyncEngine) -> None:
        self._db = db

    async def read(self, query: Callable[[Connection], Any]) -> Any:
        """Run ``query(conn)`` on a connection of its own."""
        async with self._db.connect() as conn:
            return await conn.run_sync(query)

    async def rows(
        self, statement: Prepared, params: Mapping[str, Any], *, grouped: bool = False
    ) -> list[Any]:
        """Run ``statement`` on a connection of its own (one at a time: never grouped)."""
        return await self.read(lambda conn: statement.rows(conn, params))

    async def scan(self, query: Callable[[Connection], Any]) -> Any:
        """Run ``query(conn)`` on a connection of its own (like :meth:`read`)."""
        return await self.read(query)


async def run_unit(db: AsyncEngine, unit: Any) -> CommitResult:
    """Run a commit unit in a transaction of its own."""
    async with db.begin() as conn:
        result: CommitResult = await conn.run_sync(unit)
        return result


def writes(
    values: Mapping[str, Any], key_types: Mapping[str, IndexType] = KEY_TYPES
) -> tuple[AttributeWrite, ...]:
    """The Attribute writes (with their index writes) setting ``values``; None removes a key.

    Each Attribute is named after its index key.
    """
    return tuple(
        AttributeWrite(
            key,
            "",
            None if value is None else json.dumps(value),
            index=index_write(key, key_types[key], value, key),
        )
        for key, value in values.items()
    )


async def start(
    db: AsyncEngine,
    flow_id: str,
    run_id: str,
    values: Mapping[str, Any],
    at: int,
    *,
    flow_type: str = "F",
    key_types: Mapping[str, IndexType] = KEY_TYPES,
) -> None:
    """Start a run at ``at`` (microseconds) with indexed Attributes ``values``."""
    request = StartRequest(
        flow_id=flow_id,
        flow_type=flow_type,
        run_id=run_id,
        input="null",
        request_id=None,
        id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE,
        ignore_already_started=False,
        timeout_at=None,
        writes=writes(values, key_types),
        start_step=None,
    )
    await run_unit(db, units.start_run(request, at))


async def set_values(
    db: AsyncEngine,
    flow_id: str,
    run_id: str,
    values: Mapping[str, Any],
    at: int,
    *,
    key_types: Mapping[str, IndexType] = KEY_TYPES,
) -> None:
    """Write indexed Attributes of an open run, as a client's SetAttributes does."""
    unit = units.set_attributes(
        flow_id=flow_id,
        run_id=run_id,
        effects=StagedEffects(writes=writes(values, key_types)),
        now=at,
        closed_erase=False,
    )
    await run_unit(db, unit)


async def close(db: AsyncEngine, flow_id: str, run_id: str, at: int, status: str) -> None:
    """Stop a run at ``at`` with ``status`` (CANCELED, TERMINATED or FAILED)."""
    close = RunClose(RunStatus(status))
    await run_unit(db, units.stop_run(flow_id=flow_id, run_id=run_id, close=close, now=at))


async def link_parent(
    db: AsyncEngine, run_id: str, parent_flow_id: str, parent_run_id: str
) -> None:
    """Record ``run_id`` as a SubFlow of the given parent (what a parent's commit writes)."""
    row = {
        "child_run_id": run_id,
        "parent_flow_id": parent_flow_id,
        "parent_run_id": parent_run_id,
        "parent_step_execution_id": "Spawn-1",
        "condition_index": 0,
    }
    async with db.begin() as conn:
        await conn.execute(insert(t.subflow_links), [row])


def _clear(conn: Connection) -> None:
    for table in reversed(t.metadata.sorted_tables):
        conn.execute(delete(table))


async def reset(db: AsyncEngine) -> None:
    """Delete every row of every table."""
    async with db.begin() as conn:
        await conn.run_sync(_clear)


async def load(db: AsyncEngine, world: list[Run]) -> None:
    """Write a storage world: starts, later writes, SubFlow parents, then closes."""
    for run in world:
        await start(db, run.flow_id, run.run_id, run.initial, run.started, flow_type=run.flow_type)
        if run.updates:
            await set_values(db, run.flow_id, run.run_id, run.updates, run.started)
        if run.parent_flow_id is not None and run.parent_run_id is not None:
            await link_parent(db, run.run_id, run.parent_flow_id, run.parent_run_id)
    for run in world:
        if run.closed is not None:
            await close(db, run.flow_id, run.run_id, run.closed, run.status)


async def search_all(
    db: AsyncEngine,
    text: str,
    page_size: int,
    key_types: Mapping[str, IndexType] = KEY_TYPES,
) -> tuple[list[FoundRun], list[FoundRun]]:
    """Return the runs ``text`` matches in one page of 1000, and page by page of ``page_size``."""
    reads = Reads(db)
    whole = (await search_runs(reads, text, dict(key_types), page_size=1000, page_token="")).runs
    paged: list[FoundRun] = []
    token = ""
    while True:
        page = await search_runs(
            reads, text, dict(key_types), page_size=page_size, page_token=token
        )
        paged.extend(page.runs)
        token = page.next_page_token
        if not token:
            return whole, paged
