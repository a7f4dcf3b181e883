"""The PostgreSQL database: a pool of asyncpg connections, commit units run as they are.

A commit unit is a plain function of a synchronous SQLAlchemy Connection; here it runs in a
greenlet (SQLAlchemy's bridge to asyncio), which drives asyncpg from the unit's synchronous
calls without a thread hand-off. The check-out, the unit and the check-in run in one greenlet:
SQLAlchemy's AsyncConnection would spawn one for each (about 0.1 ms of CPU per unit more,
measured). There is no single writer: each unit takes a pooled connection and commits
its own transaction, and PostgreSQL serializes the units on one run through the row lock every
unit takes first (``SELECT ... FOR UPDATE``, see ``rows.lock_run``). Units on different runs
commit in parallel, and PostgreSQL's own group commit shares the WAL flushes.

A unit's last writes (its history and change-log rows, an RPC's lock
release) go to the server as one statement just before it commits (see ``deferred_flush``).

A statement that is its own transaction needs none of that: the point reads of a run or a
snapshot (:meth:`PostgresDatabase.rows`), an RPC's lock take and drop, and the one-statement
commits (``rpc_writes``, ``step_moves``, ``step_ends``, ``first_starts``) run on a second pool,
of plain asyncpg connections (``statement_pool``), with the same timeouts and outage rules.

A unit that loses a deadlock or a serialization check is rolled back by the server; it only
touches the database, so it is replayed, a few times, before the error reaches its caller.

Several processes may serve one database. Each pooled connection carries this process's ID
(``unit_statements.CLAIMANT``), so that the commits of this process claim the Step executions
they queue.

A server that is down or slow never hangs a caller or reaches it as a driver error: reaching
the server, waiting for a pooled connection, each statement and each lock wait are bounded
(:class:`PostgresTimeouts`), and an error that means the server is unavailable is raised as
UnavailableError (see ``outage``). A unit whose connection was lost is not replayed: its COMMIT
may have reached the server, and a replay would commit it twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, Dialect, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.outage import PostgresTimeouts, raise_if_unavailable
from engine._storage.postgres.commit_groups import CommitGroups
from engine._storage.postgres.deferred_flush import with_deferred_flush
from engine._storage.postgres.prepared_driver import ASYNCPG
from engine._storage.postgres.read_groups import ReadGroups
from engine._storage.postgres.statement_pool import (
    MAX_ATTEMPTS,
    RETRYABLE_SQLSTATES,
    StatementPool,
    server_settings,
)
from engine._storage.prepared import Prepared, use_driver
from engine._storage.schema import upgrade_postgres
from engine._storage.sqlalchemy_internals import AVAILABLE, announce_outside, run_in_greenlet
from engine._storage.unit_statements import CLAIMANT

log = logging.getLogger("dexlite.postgres")

T = TypeVar("T")


class PostgresDatabase:
    """The Database on PostgreSQL (``postgresql+asyncpg://...``)."""

    def __init__(
        self,
        url: str,
        *,
        claimant: str,
        pool_size: int = 20,
        timeouts: PostgresTimeouts | None = None,
        group_commits: bool = True,
        group_reads: bool = True,
    ) -> None:
        self.url = make_url(url)
        if self.url.get_backend_name() != "postgresql":
            raise ValueError(f"not a PostgreSQL URL: {url}")
        if self.url.get_driver_name() != "asyncpg":
            self.url = self.url.set(drivername="postgresql+asyncpg")
        self.claimant = claimant
        self._pool_size = pool_size
        #: Whether one-statement commits that arrive together go together (commit_groups).
        self._group_commits = group_commits
        #: Whether snapshot reads that arrive together go together (read_groups).
        self._group_reads = group_reads
        self.timeouts = timeouts or PostgresTimeouts()
        #: How many writes lost their connection with an outcome the server alone knows
        #: (their COMMIT may have reached it): what they claimed is looked for afterwards.
        self.unknown_outcomes = 0
        self._engine: AsyncEngine | None = None
        self._reads: AsyncEngine | None = None
        self._statements: StatementPool | None = None
        self._groups: CommitGroups | None = None
        self._read_groups: ReadGroups | None = None
        self._dialect: Dialect | None = None

    def _unknown_outcome(self) -> None:
        self.unknown_outcomes += 1

    async def open(self) -> None:
        """Create or upgrade the schema (safe when several processes start at once), then
        open the pool."""
        timeouts = self.timeouts
        engine = create_async_engine(
            self.url,
            pool_size=self._pool_size,
            # No overflow: SQLAlchemy closes an overflow connection as soon as it is returned,
            # so under a burst every unit past the pool's size paid a new backend's start and
            # asyncpg's type introspection (measured: a third of PostgreSQL's CPU per 3-Step
            # Flow at 64 in flight). Units past the pool wait for a connection instead; no unit
            # holds one while it waits for another.
            max_overflow=0,
            pool_timeout=timeouts.pool,
            # No pre-ping: it costs a round trip per checkout. A connection the server closed
            # fails its statement and is discarded; reads are retried once (see read).
            connect_args={
                "timeout": timeouts.connect,
                "server_settings": server_settings(timeouts),
            },
        )
        if AVAILABLE:
            use_driver(engine.sync_engine, ASYNCPG)
        claimant = self.claimant

        @event.listens_for(engine.sync_engine, "connect")
        def _tag(_dbapi_connection: Any, record: Any) -> None:
            record.info[CLAIMANT] = claimant

        @event.listens_for(engine.sync_engine, "checkout")
        def _outside_a_transaction(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
            # A unit canceled while its BEGIN was on its way leaves asyncpg in a transaction
            # that SQLAlchemy does not track (it records one only once BEGIN has returned), so
            # nothing rolls it back: the next unit on the connection would nest in it as a
            # savepoint and never commit. Such a connection is discarded instead; the pool
            # hands out another one.
            raw = dbapi_connection.driver_connection
            if raw.is_in_transaction() or getattr(raw, "_top_xact", None) is not None:
                raise DisconnectionError("a pooled connection was left inside a transaction")

        statements = StatementPool(
            self.dsn(),
            size=self._pool_size,
            timeouts=timeouts,
            on_unknown_outcome=self._unknown_outcome,
            announce=partial(announce_outside, engine.sync_engine),
        )
        try:
            async with engine.connect() as conn:
                await conn.run_sync(upgrade_postgres)
                await conn.commit()
            await statements.open()
        except BaseException:
            await engine.dispose()
            raise
        self._engine = engine
        self._dialect = engine.dialect
        self._statements = statements
        self._groups = CommitGroups(statements) if self._group_commits else None
        self._read_groups = ReadGroups(statements) if self._group_reads else None
        # Reads need no transaction: each statement sees the last commit (READ COMMITTED), so
        # AUTOCOMMIT spares the BEGIN and ROLLBACK round trips around every read.
        self._reads = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def close(self) -> None:
        """Release every connection (units under way finish first: their callers await them)."""
        if self._groups is not None:
            await self._groups.close()
            self._groups = None
        if self._read_groups is not None:
            await self._read_groups.close()
            self._read_groups = None
        if self._statements is not None:
            await self._statements.close()
            self._statements = None
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None
            self._reads = None

    async def read(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)`` against the last committed state and return its result."""
        assert self._reads is not None, "database is not open"
        reads = self._reads.sync_engine
        try:
            return await run_in_greenlet(_on_connection, reads.connect, query)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise_if_unavailable(exc)
                raise
        except Exception as exc:  # a connect or a pool checkout failed, say
            raise_if_unavailable(exc, connecting=True)
            raise
        # The pooled connection had been closed (a server restart): once more, on a new one.
        try:
            return await run_in_greenlet(_on_connection, reads.connect, query)
        except Exception as exc:
            raise_if_unavailable(exc, connecting=True)
            raise

    async def scan(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a read of many rows: like any read here (each is a round trip
        to the server on a pooled connection)."""
        return await self.read(query)

    async def write(self, unit: Callable[[Connection], T], *, slow: bool = False) -> T:
        """Apply ``unit(conn)`` in one transaction and return its result once committed
        (``slow`` changes nothing here: the server does the work)."""
        assert self._engine is not None, "database is not open"
        return await self._replayed(
            self._engine.sync_engine.begin, partial(with_deferred_flush, unit=unit)
        )

    async def rows(
        self, statement: Prepared, params: Mapping[str, Any], *, grouped: bool = False
    ) -> list[Any]:
        """Run ``statement``, a read, against the last committed state and return its rows
        (tuples that also name their columns). ``grouped``: a read whose rows' order does
        not matter, which may go with others of the same statement (see ``read_groups``)."""
        assert self._statements is not None, "database is not open"
        compiled = statement.compiled(self._dialect)
        arguments = compiled.arguments(params)
        if grouped and self._read_groups is not None:
            names, rows = await self._read_groups.fetch(compiled.sql, arguments)
            return compiled.named([(name,) for name in names], rows) if rows else []
        found = await self._statements.fetch(compiled.sql, arguments)
        return compiled.named_records(found) if found else []

    async def write_statement(
        self,
        sql: str,
        args: Sequence[Any],
        *,
        grouped: bool = False,
        rows: bool = False,
        flow_id: str = "",
    ) -> list[Any]:
        """Apply ``sql``, one statement, as its own transaction and return its rows once
        committed.

        Without the BEGIN and COMMIT of :meth:`write` it is one round trip instead of three;
        the statement is atomic and durable all the same (it commits as it ends). ``grouped``:
        a commit answering one row, which may go with others of the same statement in one
        transaction (see ``commit_groups``); ``rows``: a SELECT answering any number;
        ``flow_id``: the Flow whose rows it locks, by which a group orders its commits.
        """
        assert self._statements is not None, "database is not open"
        if grouped and self._groups is not None:
            return await self._groups.commit(sql, args, rows=rows, flow_id=flow_id)
        return await self._statements.commit(sql, args)

    async def write_batch(self, sql: str, batch: Sequence[Sequence[Any]]) -> None:
        """Apply ``sql`` once per arguments of ``batch``, in order, as one transaction in one
        round trip: all of them or, should one raise, none."""
        assert self._statements is not None, "database is not open"
        await self._statements.commit_many(sql, batch)

    async def write_prepared(self, statement: Prepared, params: Mapping[str, Any]) -> list[Any]:
        """Apply ``statement`` as :meth:`write_statement` does; return its rows as tuples."""
        compiled = statement.compiled(self._dialect)
        return [
            tuple(r) for r in await self.write_statement(compiled.sql, compiled.arguments(params))
        ]

    async def _replayed(
        self,
        connect: Callable[[], AbstractContextManager[Connection]],
        unit: Callable[[Connection], T],
    ) -> T:
        """Run ``unit`` on a connection from ``connect``, replaying it after a conflict."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await run_in_greenlet(_on_connection, connect, unit)
            except DBAPIError as exc:
                if _sqlstate(exc) not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                    # Never replayed here, a lost connection above all: its COMMIT may have
                    # reached the server.
                    if exc.connection_invalidated:
                        self.unknown_outcomes += 1
                    raise_if_unavailable(exc)
                    raise
                log.info("replaying a commit unit after %s (attempt %d)", _sqlstate(exc), attempt)
                await asyncio.sleep(0.005 * attempt)  # let the winner of the conflict commit
            except Exception as exc:  # no connection could be had (a pool timeout, say)
                raise_if_unavailable(exc, connecting=True)
                raise
        raise AssertionError("unreachable")

    async def ping(self) -> None:
        """Raise UnavailableError unless the server answers a statement now."""
        await self.read(_select_one)

    def dsn(self) -> str:
        """Return the database's URL for a plain asyncpg connection (LISTEN)."""
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def reader(self) -> AsyncEngine:
        """Return the async engine search pages read through."""
        assert self._reads is not None, "database is not open"
        return self._reads


def _on_connection(
    connect: Callable[[], AbstractContextManager[Connection]], work: Callable[[Connection], T]
) -> T:
    """Check a connection out, run ``work`` on it and check it back in (committing, when
    ``connect`` began a transaction), all in one greenlet: the asyncpg calls inside switch to
    the event loop and back, and the check-out costs no hand-off of its own."""
    with connect() as conn:
        return work(conn)


def _select_one(conn: Connection) -> None:
    conn.exec_driver_sql("SELECT 1")


def _sqlstate(exc: DBAPIError) -> str | None:
    """Return the SQLSTATE asyncpg reported for ``exc``, if any."""
    orig: Any = exc.orig
    for candidate in (orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if code:
            return str(code)
    return None
