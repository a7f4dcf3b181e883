"""The single writer: group commit, and a failing unit that does not undo its neighbours."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from engine._storage.database import DatabaseSettings
from engine._storage.database import SQLiteDatabase as Database


class Boom(Exception):
    pass


def _insert(value: str, fail: bool = False) -> Any:
    def unit(conn: Connection) -> str:
        conn.execute(text("INSERT INTO probe (value) VALUES (:v)"), {"v": value})
        if fail:
            raise Boom(value)  # after a write: the write must not survive
        return value

    return unit


async def test_units_queued_together_commit_together_and_a_failure_stays_alone(
    tmp_path: Path,
) -> None:
    db = Database(DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path}/w.db"))
    await db.open()
    try:
        await db.write(lambda c: c.execute(text("CREATE TABLE probe (value TEXT)")))
        loop = asyncio.get_running_loop()
        holding = asyncio.Event()
        gate = threading.Event()

        def hold(conn: Connection) -> None:
            loop.call_soon_threadsafe(holding.set)
            gate.wait(5)  # keeps the writer busy while the next units queue up

        first = asyncio.ensure_future(db.write(hold))
        await asyncio.wait_for(holding.wait(), 5)  # the writer thread is inside hold
        queued = [
            asyncio.ensure_future(db.write(_insert("a"))),
            asyncio.ensure_future(db.write(_insert("b", fail=True))),
            asyncio.ensure_future(db.write(_insert("c"))),
            asyncio.ensure_future(db.write(_insert("d", fail=True))),
            asyncio.ensure_future(db.write(_insert("e"))),
        ]
        # Each write hands its unit to the writer in its task's first step, and the loop runs
        # callbacks in the order they were scheduled: this one runs after all five are queued.
        submitted = loop.create_future()
        loop.call_soon(submitted.set_result, None)
        await submitted
        assert db._writer is not None and db._writer._queue.qsize() == 5  # one batch behind hold
        assert not any(task.done() for task in queued)
        gate.set()
        await first
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
        rows = await db.read(
            lambda c: [r[0] for r in c.execute(text("SELECT value FROM probe ORDER BY value"))]
        )
    finally:
        await db.close()
    assert outcomes[0] == "a" and outcomes[2] == "c" and outcomes[4] == "e"
    assert isinstance(outcomes[1], Boom) and isinstance(outcomes[3], Boom)
    assert rows == ["a", "c", "e"]


async def test_a_unit_failing_alone_rolls_back_its_writes(tmp_path: Path) -> None:
    db = Database(DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path}/w.db"))
    await db.open()
    try:
        await db.write(lambda c: c.execute(text("CREATE TABLE probe (value TEXT)")))
        with pytest.raises(Boom):
            await db.write(_insert("x", fail=True))
        assert await db.write(_insert("y")) == "y"
        rows = await db.read(lambda c: [r[0] for r in c.execute(text("SELECT value FROM probe"))])
    finally:
        await db.close()
    assert rows == ["y"]
