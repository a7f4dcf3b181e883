"""Statements that are their own transaction, on a pool of plain asyncpg connections.

The hot path of a locked RPC on PostgreSQL is three statements, each its own transaction (the
lock take, the snapshot read, the commit that drops the locks); a Flow start with a new Flow
ID and most Step decisions are one each. Through SQLAlchemy, every one of them paid a greenlet,
a pool check-out with its events, and a check-in: about 120 microseconds of CPU beyond
asyncpg's own work, more than the round trip itself (see ``bench/README.md``). None of that is
needed by a statement that needs no transaction around it, so these go straight to asyncpg.

The pool is ``connection_pool``'s: a check-out is a list pop, and a connection goes back as it
is, since the statements here leave nothing behind in a session (their advisory locks are
transaction-scoped, nothing LISTENs here). Connections carry the same server settings as
SQLAlchemy's pool (the timeouts, JIT off), and generic plans.

Errors follow the database's rules (``postgres``): an outage becomes UnavailableError; a read
whose connection was lost (a server restart) is tried once more on a new one; a write that
lost a conflict (a deadlock, a serialization failure) was rolled back by the server and is
replayed a few times; a write that lost its connection is never replayed, its COMMIT may have
reached the server, and is counted as an unknown outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from engine._storage.outage import PostgresTimeouts, raise_if_unavailable
from engine._storage.postgres.connection_pool import ConnectionPool, PoolTimeoutError
from engine.errors import UnavailableError

log = logging.getLogger("dexlite.postgres")

#: SQLSTATEs of a transaction PostgreSQL rolled back for a conflict that a replay can clear.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock
MAX_ATTEMPTS = 5


def server_settings(timeouts: PostgresTimeouts) -> dict[str, str]:
    """The session settings of every connection the engine opens for its statements."""
    return {
        "application_name": "dexlite",
        "statement_timeout": str(int(timeouts.statement * 1000)),
        "lock_timeout": str(int(timeouts.lock * 1000)),
        # The engine's statements are short; JIT compiling one costs more than it runs
        # (asyncpg's type introspection on a new connection, above all).
        "jit": "off",
    }


class StatementPool:
    """A pool of asyncpg connections that runs one statement at a time, each its own
    transaction."""

    def __init__(
        self,
        dsn: str,
        *,
        size: int,
        timeouts: PostgresTimeouts,
        on_unknown_outcome: Callable[[], None],
        announce: Callable[[str, Sequence[Any]], None],
    ) -> None:
        self._dsn = dsn
        self._size = size
        self._timeouts = timeouts
        self._on_unknown_outcome = on_unknown_outcome
        #: Tells SQL tracing about each statement (``before_cursor_execute``).
        self._announce = announce
        self._pool: Any = None

    async def open(self) -> None:
        """Open the pool with one connection (more are opened as they are needed, up to
        ``size``), raising as a failed connect does when the server cannot be reached."""
        pool = ConnectionPool(self._connect, self._size, self._timeouts.pool)
        pool.give(await pool.take())
        self._pool = pool

    async def _connect(self) -> Any:
        timeouts = self._timeouts
        return await asyncpg.connect(
            self._dsn,
            timeout=timeouts.connect,
            # Every statement here is a point read or write by key, where a plan made for
            # the statement's parameters is the generic plan: planning it once per
            # connection rather than per call takes a sixth off the server's CPU per RPC.
            server_settings={**server_settings(timeouts), "plan_cache_mode": "force_generic_plan"},
        )

    async def close(self) -> None:
        """Close every connection (statements under way close theirs as they end)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def fetch(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """Run ``sql``, a read, and return its rows (asyncpg Records)."""
        try:
            return await self._run(sql, args)
        except Exception as exc:
            if not _lost(exc):
                raise_if_unavailable(exc)
                raise
        # The pooled connection had been closed (a server restart): once more, on a new one.
        try:
            return await self._run(sql, args)
        except Exception as exc:
            raise_if_unavailable(exc, connecting=True)
            raise

    async def commit(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """Run ``sql``, a write, as its own transaction and return its rows once committed;
        replayed after a conflict, never after a lost connection."""
        return await self._committed(sql, args, many=False)

    async def commit_many(self, sql: str, batch: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once for each of ``batch``'s arguments, in order, all in one
        transaction and one round trip (asyncpg pipelines them, with one Sync); an error in
        any of them rolls back every one. Replayed as :meth:`commit` is."""
        await self._committed(sql, batch, many=True)

    async def commit_each(self, sql: str, batch: Sequence[Sequence[Any]]) -> list[Any]:
        """Run ``sql``, a write answering one row, once for each of ``batch``'s arguments, in
        order, in one transaction and one round trip, and return the rows (one per run, in
        order). Not replayed: an error rolls back every one and is raised (an outage as
        UnavailableError, a lost connection counted as an unknown outcome)."""
        try:
            return await self._run(sql, batch, many=True, rows=True)
        except Exception as exc:
            if _lost(exc):
                self._on_unknown_outcome()
            raise_if_unavailable(exc)
            raise

    async def fetch_each(self, sql: str, batch: Sequence[Sequence[Any]]) -> list[Any]:
        """Run ``sql``, a read, once for each of ``batch``'s arguments, in order, in one
        round trip, and return all their rows in that order (asyncpg Records). Not retried:
        an error is raised as it came."""
        return await self._run(sql, batch, many=True, rows=True)

    async def _committed(self, sql: str, args: Sequence[Any], *, many: bool) -> list[Any]:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await self._run(sql, args, many=many)
            except Exception as exc:
                state = getattr(exc, "sqlstate", None)
                if state not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                    if _lost(exc):
                        self._on_unknown_outcome()
                    raise_if_unavailable(exc)
                    raise
                log.info("replaying a statement after %s (attempt %d)", state, attempt)
                await asyncio.sleep(0.005 * attempt)  # let the winner of the conflict commit
        raise AssertionError("unreachable")

    async def _run(
        self, sql: str, args: Sequence[Any], *, many: bool = False, rows: bool = False
    ) -> list[Any]:
        pool = self._pool
        assert pool is not None, "database is not open"
        try:
            connection = await pool.take()
        except PoolTimeoutError as exc:
            raise UnavailableError(
                "no database connection became free within the pool timeout; retry shortly"
            ) from exc
        except Exception as exc:  # a new connection could not be opened
            raise_if_unavailable(exc, connecting=True)
            raise
        try:
            found: list[Any] = []
            if many:
                for one in args:
                    self._announce(sql, one)
                if rows:
                    found = await connection.fetchmany(sql, args)
                else:
                    await connection.executemany(sql, args)
            else:
                self._announce(sql, args)
                found = await connection.fetch(sql, *args)
        except asyncpg.PostgresError:
            pool.give(connection)  # the server answered with an error: the session is fine
            raise
        except BaseException:
            pool.discard(connection)  # lost, or interrupted mid-statement
            raise
        pool.give(connection)
        return found


def _lost(exc: BaseException) -> bool:
    """True when ``exc`` means the connection went away under the statement."""
    return isinstance(exc, (asyncpg.ConnectionDoesNotExistError, ConnectionError)) or (
        isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)
    )
