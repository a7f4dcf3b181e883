"""The single writer: group commit, and a failing unit that does not undo its neighbours."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from engine._storage.database_settings import DatabaseSettings
from engine._storage.sqlite.database import SQLiteDatabase as Database
from tests.support.waiting import eventually


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

        # A slow unit runs on the writer's thread, so it can block there.
        first = asyncio.ensure_future(db.write(hold, slow=True))
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
        assert db._writer is not None and len(db._writer._pending) == 5  # one batch behind hold
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


async def test_units_run_on_the_loop_and_wait_for_a_lock_on_the_writers_thread(
    tmp_path: Path,
) -> None:
    """A unit's statements run on the event loop (no thread hop per statement). A batch whose
    BEGIN finds the lock taken (by a tool outside the engine) goes to the writer's thread,
    which waits for it: reads go on meanwhile, and the unit commits once the lock is free."""
    db = Database(DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path}/w.db"))
    await db.open()
    outside = sqlite3.connect(tmp_path / "w.db", isolation_level=None, check_same_thread=False)
    ran_on: list[str] = []

    def insert(value: str) -> Any:
        def unit(conn: Connection) -> str:
            ran_on.append(threading.current_thread().name)
            return str(_insert(value)(conn))

        return unit

    try:
        await db.write(lambda c: c.execute(text("CREATE TABLE probe (value TEXT)")))
        assert await db.write(insert("free")) == "free"
        outside.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(db.write(insert("after the lock")))
        await eventually(lambda: len(ran_on) == 1 and db._writer is not None and db._writer._busy)
        for _ in range(20):  # the loop stays free: reads answer while the write waits
            count = await db.read(lambda c: c.execute(text("SELECT count(*) FROM probe")).scalar())
            assert count == 1
            assert not write.done()
        outside.execute("COMMIT")
        assert await asyncio.wait_for(write, 10) == "after the lock"
        rows = await db.read(
            lambda c: [r[0] for r in c.execute(text("SELECT value FROM probe ORDER BY rowid"))]
        )
    finally:
        outside.close()
        await db.close()
    assert rows == ["free", "after the lock"]
    assert ran_on == [threading.current_thread().name, "dexlite-writer"]


async def test_a_read_that_meets_a_lock_waits_for_it_on_a_reader_thread(tmp_path: Path) -> None:
    """A read the loop's connection cannot make at once (SQLite answers busy) goes to a reader
    thread, which waits for the lock; the loop serves other reads meanwhile."""
    db = Database(DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path}/w.db"))
    await db.open()
    outside = sqlite3.connect(tmp_path / "w.db", isolation_level=None, check_same_thread=False)
    threads: list[str] = []

    def locking_read(conn: Connection) -> int:
        # A read inside a write transaction: it needs the lock the outside connection holds.
        threads.append(threading.current_thread().name)
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            return int(conn.execute(text("SELECT count(*) FROM probe")).scalar_one())
        finally:
            conn.exec_driver_sql("ROLLBACK")

    try:
        await db.write(lambda c: c.execute(text("CREATE TABLE probe (value TEXT)")))
        outside.execute("BEGIN IMMEDIATE")
        outside.execute("INSERT INTO probe VALUES ('outside')")
        read = asyncio.ensure_future(db.read(locking_read))
        await eventually(lambda: len(threads) == 2, within=10)
        assert threads[0] == threading.current_thread().name  # tried on the loop first
        assert threads[1].startswith("dexlite-read")
        assert await db.read(lambda c: c.execute(text("SELECT count(*) FROM probe")).scalar()) == 0
        assert not read.done()
        outside.execute("COMMIT")
        assert await asyncio.wait_for(read, 10) == 1
    finally:
        outside.close()
        await db.close()
