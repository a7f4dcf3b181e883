"""The pool of one-statement transactions, on a real server: how connections are handed out
and given back (``connection_pool``), and what a statement that fails does to its connection
and to its caller (``statement_pool``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_

from engine._storage.outage import PostgresTimeouts
from engine._storage.postgres.connection_pool import ConnectionPool, PoolTimeoutError
from engine._storage.postgres.database import PostgresDatabase
from engine._storage.postgres.statement_pool import StatementPool
from engine.errors import UnavailableError
from tests.support.backends import admin_connection
from tests.support.waiting import eventually


@pytest.fixture
def dsn(pg_engine: AsyncEngine) -> str:
    """The plain asyncpg address of the test's fresh database."""
    return pg_engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def pool_of(dsn: str, size: int, wait_seconds: float = 10.0) -> ConnectionPool:
    async def connect() -> Any:
        return await asyncpg.connect(dsn)

    return ConnectionPool(connect, size, wait_seconds)


async def registered(pool: ConnectionPool) -> asyncio.Future[Any]:
    """Start a take that must wait, and return it once it waits."""
    waiting = asyncio.ensure_future(pool.take())
    await asyncio.sleep(0)  # one turn of the loop: the take registers as a waiter
    assert not waiting.done()
    return waiting


async def test_a_take_past_the_size_waits_for_the_connection_given_back(dsn: str) -> None:
    pool = pool_of(dsn, 1)
    held = await pool.take()
    waiting = await registered(pool)
    pool.give(held)
    assert await waiting is held
    pool.give(held)
    await pool.close()
    assert held.is_closed()


async def test_a_take_that_finds_none_free_in_time_fails_and_leaves_no_trace(dsn: str) -> None:
    pool = pool_of(dsn, 1, wait_seconds=0.05)
    held = await pool.take()
    with pytest.raises(PoolTimeoutError):
        await pool.take()
    pool.give(held)
    assert await pool.take() is held  # the timed-out take was not left in line
    pool.give(held)
    await pool.close()


async def test_a_canceled_take_gives_up_its_place_in_line(dsn: str) -> None:
    pool = pool_of(dsn, 1)
    held = await pool.take()
    waiting = await registered(pool)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    pool.give(held)
    assert await pool.take() is held
    pool.give(held)
    await pool.close()


async def test_a_discarded_connection_lets_the_next_in_line_open_a_new_one(dsn: str) -> None:
    pool = pool_of(dsn, 1)
    held = await pool.take()
    waiting = await registered(pool)
    pool.discard(held)
    fresh = await waiting
    assert held.is_closed()
    assert fresh is not held
    assert await fresh.fetchval("SELECT 1") == 1
    pool.give(fresh)
    await pool.close()


async def test_a_connection_in_a_transaction_or_closed_by_the_server_is_not_handed_out(
    dsn: str,
) -> None:
    pool = pool_of(dsn, 2)
    in_transaction = await pool.take()
    await in_transaction.execute("BEGIN")
    pool.give(in_transaction)
    assert in_transaction.is_closed()  # closed, not kept with its transaction open

    idle = await pool.take()
    pool.give(idle)
    admin = await admin_connection()
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", idle.get_server_pid())
    finally:
        await admin.close()
    await eventually(idle.is_closed, what="the client to see its server go")
    again = await pool.take()
    assert again is not idle
    assert await again.fetchval("SELECT 1") == 1
    pool.give(again)
    await pool.close()


@pytest.fixture
async def statements(dsn: str) -> AsyncIterator[tuple[StatementPool, list[str]]]:
    """A StatementPool of one connection, with the unknown outcomes it counted."""
    unknown: list[str] = []
    pool = StatementPool(
        dsn,
        size=1,
        timeouts=PostgresTimeouts(),
        on_unknown_outcome=lambda: unknown.append("unknown"),
        announce=lambda sql, args: None,
    )
    await pool.open()
    try:
        yield pool, unknown
    finally:
        await pool.close()


async def backend_of(pool: StatementPool) -> int:
    pid: int = (await pool.fetch("SELECT pg_backend_pid()", ()))[0][0]
    return pid


async def running(sql_start: str, other_than: int = 0) -> int:
    """Wait until a backend (not ``other_than``) runs a statement starting with
    ``sql_start``; return its pid."""
    admin = await admin_connection()
    try:

        async def pid() -> int | None:
            found: int | None = await admin.fetchval(
                "SELECT pid FROM pg_stat_activity"
                " WHERE query LIKE $1 AND state = 'active' AND pid <> $2",
                sql_start + "%",
                other_than,
            )
            return found

        found: int = await eventually(pid, what=f"a backend running {sql_start}")
        return found
    finally:
        await admin.close()


async def test_a_server_error_leaves_the_connection_in_the_pool(
    statements: tuple[StatementPool, list[str]],
) -> None:
    pool, unknown = statements
    before = await backend_of(pool)
    with pytest.raises(asyncpg.UndefinedTableError):
        await pool.commit("SELECT * FROM no_such_table", ())
    assert await backend_of(pool) == before
    assert unknown == []  # the server answered: the outcome is known


async def test_a_statement_its_caller_gave_up_on_closes_its_connection(
    statements: tuple[StatementPool, list[str]],
) -> None:
    pool, _ = statements
    before = await backend_of(pool)
    slow = asyncio.ensure_future(pool.fetch("SELECT pg_sleep(30), 'given up'", ()))
    await running("SELECT pg_sleep(30), 'given up'")
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    # The next statement runs on a new connection: the old one may still be canceling.
    assert await backend_of(pool) != before


async def test_a_read_whose_connection_was_lost_is_tried_once_more(
    statements: tuple[StatementPool, list[str]],
) -> None:
    pool, unknown = statements
    slow = asyncio.ensure_future(pool.fetch("SELECT pg_sleep(30), 'read'", ()))
    pid = await running("SELECT pg_sleep(30), 'read'")
    admin = await admin_connection()
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
        # The retry runs the same statement on a new connection: end that one quickly.
        retry = await running("SELECT pg_sleep(30), 'read'", other_than=pid)
        await admin.execute("SELECT pg_cancel_backend($1)", retry)
    finally:
        await admin.close()
    # A canceled statement reads as one that ran past the statement timeout.
    with pytest.raises(UnavailableError, match="statement timeout"):
        await slow
    assert unknown == []


async def test_a_write_whose_connection_was_lost_is_not_replayed_and_counts_as_unknown(
    statements: tuple[StatementPool, list[str]],
) -> None:
    pool, unknown = statements
    write = asyncio.ensure_future(pool.commit("SELECT pg_sleep(30), 'write'", ()))
    pid = await running("SELECT pg_sleep(30), 'write'")
    admin = await admin_connection()
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    with pytest.raises(UnavailableError, match="connection"):
        await write
    assert unknown == ["unknown"]
    assert await backend_of(pool) != pid  # and the pool goes on with a new connection


async def test_a_write_that_lost_a_deadlock_is_replayed(
    statements: tuple[StatementPool, list[str]],
) -> None:
    pool, unknown = statements
    await pool.commit("CREATE SEQUENCE calls", ())
    await pool.commit(
        """CREATE FUNCTION flaky(code text) RETURNS bigint LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('calls') < 3 THEN
                RAISE EXCEPTION 'rolled back by the server' USING ERRCODE = code;
            END IF;
            RETURN currval('calls');
        END $$""",
        (),
    )
    # A deadlock twice, then the third attempt commits.
    assert (await pool.commit("SELECT flaky('40P01')", ()))[0][0] == 3
    # Any other error is the caller's at once.
    await pool.commit("ALTER SEQUENCE calls RESTART", ())
    with pytest.raises(asyncpg.PostgresError, match="rolled back by the server"):
        await pool.commit("SELECT flaky('23505')", ())
    assert (await pool.fetch("SELECT last_value FROM calls", ()))[0][0] == 1
    assert unknown == []


async def test_a_pooled_connection_left_inside_a_transaction_is_not_handed_out_again(
    pg_engine: AsyncEngine,
) -> None:
    # A unit canceled while its BEGIN was on its way leaves asyncpg inside a transaction that
    # SQLAlchemy never recorded, so nothing rolled it back: the next unit on that connection
    # nested in it as a savepoint and never committed. The pool now discards such a one.
    url = pg_engine.url.render_as_string(hide_password=False)
    database = PostgresDatabase(url, claimant="test", pool_size=1)
    await database.open()
    try:

        def left_open(conn: Connection) -> int:
            raw = conn.connection.driver_connection
            assert raw is not None
            await_(raw.transaction().start())  # behind SQLAlchemy's back
            pid: int = raw.get_server_pid()
            return pid

        stranded = await database.read(left_open)

        def insert(conn: Connection) -> int:
            conn.execute(text("INSERT INTO kept (k) VALUES (1)"))
            pid: int = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
            return pid

        async with pg_engine.begin() as conn:
            await conn.execute(text("CREATE TABLE kept (k integer)"))
        assert await database.write(insert) != stranded
        async with pg_engine.connect() as conn:  # committed: another connection sees it
            assert (await conn.execute(text("SELECT count(*) FROM kept"))).scalar_one() == 1
    finally:
        await database.close()
