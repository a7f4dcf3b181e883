"""The contract of ``engine/_storage/sqlalchemy_internals.py`` with the installed SQLAlchemy.

That module is the only one in ``engine`` that uses SQLAlchemy's internals: its asyncpg
adapter's transaction and error translation, the flags and dispatch of its events, and its
greenlet bridge. Each test here runs them on a real server and checks the outcome against what
SQLAlchemy does itself: the transaction it commits or rolls back, the error it raises, the
connection it invalidates, the listener arguments it passes. A SQLAlchemy (or asyncpg) release
that changes one fails here, and the message names what changed and what relies on it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import sqlalchemy
from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine._storage import sqlalchemy_internals as pg_direct
from engine._storage.postgres.database import _sqlstate
from tests.support.backends import admin_connection

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = f"SQLAlchemy {sqlalchemy.__version__}, asyncpg {asyncpg.__version__}"
TABLE = "CREATE TABLE contract (id int PRIMARY KEY, v text)"
INSERT = "INSERT INTO contract (id, v) VALUES ($1, $2)"


def changed(what: str, relies: str) -> str:
    """The failure message: what the installed SQLAlchemy does differently, and what in
    dexlite relies on it."""
    return f"{VERSIONS}: {what}. sqlalchemy_internals.py relies on it for {relies}."


@pytest.fixture
async def engine(pg_engine: AsyncEngine) -> AsyncEngine:
    """The fresh database's engine, with a table of its own."""
    async with pg_engine.begin() as conn:
        await conn.exec_driver_sql(TABLE)
    return pg_engine


async def rows(engine: AsyncEngine) -> list[tuple[Any, ...]]:
    """The table's committed rows, read on another connection."""
    async with engine.connect() as conn:
        found = await conn.exec_driver_sql("SELECT id, v FROM contract ORDER BY id")
        return [tuple(row) for row in found]


async def in_transaction(conn: AsyncConnection, unit: Callable[[Connection], Any]) -> Any:
    """Run ``unit`` in a transaction SQLAlchemy begins and commits, as the engine's units are."""
    async with conn.begin():
        return await conn.run_sync(unit)


async def terminate(conn: AsyncConnection) -> None:
    """End ``conn``'s server process (as a server restart would), and wait until it ended."""
    raw = await conn.get_raw_connection()
    pid = raw.driver_connection.get_server_pid()  # type: ignore[union-attr]
    admin = await admin_connection()
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    finally:
        await admin.close()


async def test_the_asyncpg_adapter_has_the_members_direct_statements_use(
    engine: AsyncEngine,
) -> None:
    assert pg_direct.AVAILABLE, changed(
        "the asyncpg adapter lacks _transaction, _start_transaction, _handle_exception or "
        "run_async, so every prepared statement goes through Connection.execute",
        "running prepared statements straight on asyncpg",
    )
    async with engine.connect() as conn:
        assert await conn.run_sync(pg_direct.on_asyncpg)


async def test_a_direct_statement_runs_in_the_transaction_sqlalchemy_then_commits(
    engine: AsyncEngine,
) -> None:
    def unit(conn: Connection) -> tuple[int, int]:
        pg_direct.execute(conn, INSERT, [1, "direct first"])
        direct = pg_direct.fetch(conn, "SELECT txid_current()", [])[0][0]
        through = conn.exec_driver_sql("SELECT txid_current()").scalar_one()
        return direct, through

    def sqlalchemy_first(conn: Connection) -> tuple[int, int]:
        through = conn.exec_driver_sql("SELECT txid_current()").scalar_one()
        pg_direct.execute(conn, INSERT, [2, "sqlalchemy first"])
        direct = pg_direct.fetch(conn, "SELECT txid_current()", [])[0][0]
        return direct, through

    async with engine.connect() as conn:
        for order in (unit, sqlalchemy_first):
            direct, through = await in_transaction(conn, order)
            assert direct == through, changed(
                f"a direct statement ({order.__name__}) runs in transaction {direct}, "
                f"SQLAlchemy's in {through}",
                "joining the transaction SQLAlchemy tracks (_transaction, _start_transaction)",
            )
            driver = (await conn.get_raw_connection()).driver_connection
            assert not driver.is_in_transaction()  # type: ignore[union-attr]
    assert await rows(engine) == [(1, "direct first"), (2, "sqlalchemy first")], changed(
        "SQLAlchemy's COMMIT does not commit a transaction _start_transaction began",
        "committing a unit's direct statements",
    )


async def test_a_direct_statement_is_undone_by_sqlalchemys_rollback(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        transaction = await conn.begin()
        await conn.run_sync(lambda c: pg_direct.execute(c, INSERT, [1, "undone"]))
        await transaction.rollback()
        driver = (await conn.get_raw_connection()).driver_connection
        assert not driver.is_in_transaction()  # type: ignore[union-attr]
    assert await rows(engine) == [], changed(
        "SQLAlchemy's ROLLBACK does not end a transaction _start_transaction began",
        "rolling back a unit that raised",
    )


async def test_the_adapter_starts_the_transaction_it_then_tracks(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        adapter: Any = raw.dbapi_connection
        assert adapter._transaction is None
        await adapter._start_transaction()
        assert adapter._transaction is not None, changed(
            "_start_transaction() does not leave the transaction in _transaction",
            "starting a unit's transaction only once",
        )
        assert adapter.driver_connection.is_in_transaction()
        await conn.rollback()


async def test_in_autocommit_a_direct_statement_commits_as_it_ends(engine: AsyncEngine) -> None:
    reads = engine.execution_options(isolation_level="AUTOCOMMIT")
    async with reads.connect() as conn:

        def unit(c: Connection) -> bool:
            changed_rows = pg_direct.execute(c, INSERT, [1, "at once"])
            assert changed_rows == 1
            driver: Any = c.connection.driver_connection
            return bool(driver.is_in_transaction())

        assert not await conn.run_sync(unit), changed(
            "_start_transaction() begins a transaction in AUTOCOMMIT",
            "reads that need no transaction",
        )
        assert await rows(engine) == [(1, "at once")]


async def test_a_driver_error_is_raised_as_sqlalchemy_raises_it(engine: AsyncEngine) -> None:
    def twice(run: Callable[[Connection], Any]) -> Callable[[Connection], Any]:
        def unit(conn: Connection) -> Any:
            run(conn)
            return run(conn)

        return unit

    errors: dict[str, DBAPIError] = {}
    async with engine.connect() as conn:
        for name, run in (
            ("direct", lambda c: pg_direct.execute(c, INSERT, [1, "a"])),
            ("sqlalchemy", lambda c: c.exec_driver_sql(INSERT, (1, "a"))),
        ):
            with pytest.raises(DBAPIError) as raised:
                await in_transaction(conn, twice(run))
            errors[name] = raised.value
            assert not conn.invalidated
        assert await conn.run_sync(lambda c: pg_direct.fetch(c, "SELECT 1", [])[0][0]) == 1
        await conn.rollback()
    direct, through = errors["direct"], errors["sqlalchemy"]
    assert type(direct) is type(through) is IntegrityError, changed(
        f"a unique violation is {type(direct).__name__} directly, {type(through).__name__} "
        f"through SQLAlchemy",
        "raising driver errors as SQLAlchemy does (_handle_exception, DBAPIError.instance)",
    )
    assert type(direct.orig) is type(through.orig)
    assert _sqlstate(direct) == _sqlstate(through) == "23505", changed(
        "the SQLSTATE is not where PostgresDatabase reads it",
        "replaying a unit after a deadlock",
    )
    assert direct.statement == INSERT and not direct.connection_invalidated


async def test_a_lost_connection_is_invalidated_as_sqlalchemy_invalidates_it(
    engine: AsyncEngine,
) -> None:
    begun: dict[str, Callable[[Connection], Any]] = {
        "direct, before the transaction began": lambda c: pg_direct.fetch(c, "SELECT 1", []),
        "sqlalchemy": lambda c: c.exec_driver_sql("SELECT 1"),
    }
    for name, statement in begun.items():
        async with engine.connect() as conn:
            await conn.run_sync(lambda c: c.connection)  # checked out; nothing began yet
            await terminate(conn)
            with pytest.raises(DBAPIError) as raised:
                await in_transaction(conn, statement)
            assert raised.value.connection_invalidated and conn.invalidated, changed(
                f"a statement ({name}) on a connection the server closed raises "
                f"{raised.value!r} without invalidating it",
                "never handing a lost connection out again (_handle_exception, is_disconnect)",
            )
    async with engine.connect() as conn:
        await conn.run_sync(lambda c: pg_direct.fetch(c, "SELECT 1", []))  # the transaction began
        await terminate(conn)
        with pytest.raises(DBAPIError) as raised:
            await conn.run_sync(lambda c: pg_direct.fetch(c, "SELECT 1", []))
        assert raised.value.connection_invalidated and conn.invalidated, changed(
            "a direct statement in a transaction whose connection the server closed does not "
            "invalidate it",
            "never handing a lost connection out again",
        )


async def test_announce_calls_the_listeners_sqlalchemy_calls_with_the_same_arguments(
    engine: AsyncEngine,
) -> None:
    heard: list[dict[str, Any]] = []

    def listener(**arguments: Any) -> None:
        heard.append(arguments)

    sync_engine = engine.sync_engine
    async with engine.connect() as conn:
        await conn.run_sync(lambda c: pg_direct.announce(c, "SELECT 0", (), False))
        for target in (sync_engine, conn.sync_connection, Engine):
            event.listen(target, "before_cursor_execute", listener, named=True)
            try:
                heard.clear()
                await conn.exec_driver_sql("SELECT $1::int", (1,))
                await conn.run_sync(lambda c: pg_direct.announce(c, "SELECT $1::int", (1,), False))
                assert len(heard) == 2, changed(
                    f"announce() does not reach a listener on {target!r} (_has_events, dispatch)",
                    "SQL tracing and the bench seeing every prepared statement",
                )
                theirs, ours = heard
            finally:
                event.remove(target, "before_cursor_execute", listener)
            assert (ours["conn"], ours["statement"], ours["parameters"]) == (
                theirs["conn"],
                theirs["statement"],
                theirs["parameters"],
            )
            assert ours["executemany"] is theirs["executemany"] is False
            assert ours["cursor"] is None and ours["context"] is None
        heard.clear()
        await conn.run_sync(lambda c: pg_direct.announce(c, "SELECT 0", (), False))
        assert heard == [], "announce() calls a listener that was removed"
        await conn.rollback()
    event.listen(sync_engine, "before_cursor_execute", listener, named=True)
    try:
        pg_direct.announce_outside(sync_engine, "SELECT 2", (2,))
    finally:
        event.remove(sync_engine, "before_cursor_execute", listener)
    assert [(h["conn"], h["statement"], h["parameters"]) for h in heard] == [
        (None, "SELECT 2", (2,))
    ], changed(
        "announce_outside() does not reach an engine's listener (_has_events, dispatch)",
        "the statement pool's statements in SQL tracing",
    )


async def test_run_in_greenlet_runs_a_unit_whose_statements_await_the_driver(
    engine: AsyncEngine,
) -> None:
    def unit(connect: Callable[[], Any]) -> int:
        with connect() as conn:
            return int(conn.exec_driver_sql("SELECT 41 + 1").scalar_one())

    assert await pg_direct.run_in_greenlet(unit, engine.sync_engine.connect) == 42, changed(
        "greenlet_spawn does not run a synchronous unit on an async engine's connection",
        "running commit units in one greenlet",
    )

    def failing() -> None:
        raise LookupError("from the unit")

    with pytest.raises(LookupError, match="from the unit"):
        await pg_direct.run_in_greenlet(failing)


#: SQLAlchemy's internals (attribute names, and modules that are not public API).
PRIVATE_ATTRIBUTES = {
    "_has_events",
    "dispatch",
    "_transaction",
    "_start_transaction",
    "_handle_exception",
    "_adapt_connection",
    "_connection",
}
PRIVATE_MODULES = ("sqlalchemy.util", "sqlalchemy.dialects.postgresql.asyncpg", "sqlalchemy.pool.")


def test_only_sqlalchemy_internals_reaches_sqlalchemy_internals() -> None:
    adapter = ROOT / "engine" / "_storage" / "sqlalchemy_internals.py"
    found = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        if path == adapter:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PRIVATE_MODULES):
                found.append(f"{where} {node.module}")
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if (node.attr in PRIVATE_ATTRIBUTES and owner not in ("self", "cls")) or (
                owner == "DBAPIError" and node.attr == "instance"
            ):
                found.append(f"{where} .{node.attr}")
    assert found == [], f"SQLAlchemy internals outside sqlalchemy_internals.py: {found}"
