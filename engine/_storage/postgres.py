"""The PostgreSQL database: a pool of asyncpg connections, commit units run as they are.

A commit unit is a plain function of a synchronous SQLAlchemy Connection; here it runs through
``AsyncConnection.run_sync``, which drives asyncpg from the unit's synchronous calls without a
thread hand-off. There is no single writer: each unit takes a pooled connection and commits
its own transaction, and PostgreSQL serializes the units on one run through the row lock every
unit takes first (``SELECT ... FOR UPDATE``, see ``rows.lock_run``). Units on different runs
commit in parallel, and PostgreSQL's own group commit shares the WAL flushes.

A unit that loses a deadlock or a serialization check is rolled back by the server; it only
touches the database, so it is replayed, a few times, before the error reaches its caller.

Until the coordination parts (locks, the Step queue, timers, the notifier) have their
PostgreSQL versions, they live in one process's memory, as on SQLite: so one process serves a
database, and it holds a session advisory lock to refuse a second one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.schema import upgrade_postgres
from engine.errors import FailedPreconditionError

log = logging.getLogger("dexlite.postgres")

T = TypeVar("T")

#: The advisory lock the serving process holds ("dexlite:serve" folded to 63 bits).
SERVE_LOCK_KEY = 0x64786C7365727665

#: SQLSTATEs of a transaction PostgreSQL rolled back for a conflict that a replay can clear.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock
MAX_ATTEMPTS = 5


class PostgresDatabase:
    """The Database on PostgreSQL (``postgresql+asyncpg://...``)."""

    def __init__(self, url: str, *, pool_size: int = 10, max_overflow: int = 10) -> None:
        self.url = make_url(url)
        if self.url.get_backend_name() != "postgresql":
            raise ValueError(f"not a PostgreSQL URL: {url}")
        if self.url.get_driver_name() != "asyncpg":
            self.url = self.url.set(drivername="postgresql+asyncpg")
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self._engine: AsyncEngine | None = None
        self._reads: AsyncEngine | None = None
        self._owner: Any = None  # the connection holding the serve lock

    async def open(self) -> None:
        """Create or upgrade the schema (safe when several processes start at once), then
        open the pool."""
        engine = create_async_engine(
            self.url,
            pool_size=self._pool_size,
            max_overflow=self._max_overflow,
            pool_pre_ping=True,
            connect_args={"server_settings": {"application_name": "dexlite"}},
        )
        try:
            async with engine.connect() as conn:
                await conn.run_sync(upgrade_postgres)
                await conn.commit()
            self._owner = await _claim(engine, self.url.render_as_string(hide_password=True))
        except BaseException:
            await engine.dispose()
            raise
        self._engine = engine
        # Reads need no transaction: each statement sees the last commit (READ COMMITTED), so
        # AUTOCOMMIT spares the BEGIN and ROLLBACK round trips around every read.
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def close(self) -> None:
        """Release every connection (units under way finish first: their callers await them)."""
        if self._owner is not None:
            await self._owner.close()  # ending the session releases the serve lock
            self._owner = None
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None
            self._reads = None

    async def read(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)`` against the last committed state and return its result."""
        assert self._reads is not None, "database is not open"
        async with self._reads.connect() as conn:
            return await conn.run_sync(query)

    async def write(self, unit: Callable[[Connection], T]) -> T:
        """Apply ``unit(conn)`` in one transaction and return its result once committed."""
        assert self._engine is not None, "database is not open"
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                async with self._engine.begin() as conn:
                    return await conn.run_sync(unit)
            except DBAPIError as exc:
                if _sqlstate(exc) not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                    raise
                log.info("replaying a commit unit after %s (attempt %d)", _sqlstate(exc), attempt)
                await asyncio.sleep(0.005 * attempt)  # let the winner of the conflict commit
        raise AssertionError("unreachable")

    def reader(self) -> AsyncEngine:
        """Return the async engine search pages read through."""
        assert self._reads is not None, "database is not open"
        return self._reads


async def _claim(engine: AsyncEngine, shown_url: str) -> Any:
    """Take the serve lock on a connection of its own, or raise FailedPreconditionError."""
    conn = await engine.connect()
    try:
        got = (
            await conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": SERVE_LOCK_KEY})
        ).scalar()
        await conn.commit()
    except BaseException:
        await conn.close()
        raise
    if not got:
        await conn.close()
        raise FailedPreconditionError(
            f"the database {shown_url} is already served by another process; this build runs "
            "one engine process per PostgreSQL database"
        )
    return conn


def _sqlstate(exc: DBAPIError) -> str | None:
    """Return the SQLSTATE asyncpg reported for ``exc``, if any."""
    orig: Any = exc.orig
    for candidate in (orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if code:
            return str(code)
    return None
