"""SQLite's single writer: commit units run on the event loop, each batch's COMMIT on a thread.

Every change is a commit unit, ``unit(conn) -> result``, run inside one transaction on the one
connection that writes. Units queued while a batch is on its way are applied together in the
next one (group commit: one transaction and one fsync for all of them).

Where each part runs is chosen by what it costs under the GIL. A unit's statements are a few
microseconds of SQLite each, and every statement releases and retakes the GIL: on a thread of
its own, each retake waits for the event loop to let go, which made a batch of a few RPCs take
milliseconds and several times their CPU in thread switches. So the statements run on the
event loop, where the GIL is already held. The COMMIT is different: with synchronous=FULL it
waits for the disk, so it goes to the writer's thread and the loop serves requests (and reads,
which never wait for the writer) meanwhile. The thread also takes the rare cases that may
wait: a unit marked slow (a retention purge of many rows), a batch to replay after one of its
units failed, and a batch whose BEGIN found the database locked by another process (only a
tool outside the engine can hold it: this process is the file's only writer).

Units apply in the order they were submitted; lock handoffs (``_runtime.handoff``)
relies on it. A unit with a ``mark_failed(error)`` method is told, before the next batch runs,
when it did not commit; ``on_committed`` is given the result of every unit that did, in commit
order, before its caller hears of it (``_runtime.committed_state`` keeps its copies with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import StaticPool

from engine._storage.outage import unavailable
from engine._storage.prepared import use_driver
from engine._storage.schema import upgrade_sqlite
from engine._storage.sqlite.prepared_driver import CURSOR

T = TypeVar("T")
CommitUnit = Callable[[Connection], T]
Outcome = tuple[bool, Any]

_STOP = object()
#: How long the thread sleeps between tries at a database another process has locked.
_BUSY_RETRY_SECONDS = 0.005


class _Queued:
    """A unit waiting for its batch, with the future its caller awaits."""

    __slots__ = ("future", "slow", "unit")

    def __init__(self, unit: CommitUnit[Any], future: asyncio.Future[Any], slow: bool) -> None:
        self.unit = unit
        self.future = future
        self.slow = slow


class SQLiteWriter:
    """The only connection that writes, its queue of units and its commit thread."""

    def __init__(
        self,
        url: Any,
        *,
        synchronous: str,
        busy_timeout_ms: int,
        max_batch: int,
        on_batch: Callable[[int], None] | None = None,
        on_committed: Callable[[Any], None] | None = None,
        on_committing: Callable[[list[Any] | None], None] | None = None,
        on_settled: Callable[[], None] | None = None,
        prepared_statements: bool = True,
    ) -> None:
        # AUTOCOMMIT hands transaction control to us, so we can say BEGIN IMMEDIATE. The
        # connection is used by the loop and the commit thread, never by both at once.
        self._engine = create_engine(
            url,
            isolation_level="AUTOCOMMIT",
            poolclass=StaticPool,
            connect_args={"check_same_thread": False},
        )
        use_driver(self._engine, CURSOR if prepared_statements else None)
        self._synchronous = synchronous
        self._busy_timeout = busy_timeout_ms / 1000
        self._max_batch = max_batch
        self._on_batch = on_batch
        self._on_committed = on_committed
        self._on_committing = on_committing or _ignore
        self._on_settled = on_settled or _nothing
        self._conn: Connection | None = None
        self._sql: Callable[[str], Any] = _unopened
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: deque[_Queued] = deque()
        #: A batch is between its BEGIN and the end of its COMMIT (or on the thread).
        self._busy = False
        self._flush_scheduled = False
        self._idle: asyncio.Future[None] | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        """Connect, set the connection up and bring the schema up to date (blocking: run it
        off the loop)."""
        conn = self._engine.connect()
        # WAL: readers never block the writer and see the last commit.
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        # FULL fsyncs every commit so an acknowledged write survives power loss, not only a
        # killed process; group commit amortizes that cost over concurrent callers.
        conn.exec_driver_sql(f"PRAGMA synchronous={self._synchronous}")
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        # The upgrade may meet a tool holding the lock briefly: let SQLite wait for it.
        conn.exec_driver_sql(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
        upgrade_sqlite(conn)
        # From now on SQLite never waits for a lock: on the loop it must not block, and the
        # thread waits by retrying (see _begin_waiting).
        conn.exec_driver_sql("PRAGMA busy_timeout=0")
        self._conn = conn
        # BEGIN, COMMIT and ROLLBACK go straight to the driver: through SQLAlchemy each costs
        # an execution context, more than SQLite takes (in AUTOCOMMIT mode SQLAlchemy keeps no
        # transaction state to bypass).
        self._sql = conn.connection.driver_connection.execute  # type: ignore[union-attr]

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take units from callers on ``loop`` from now on."""
        self._loop = loop
        self._thread = threading.Thread(target=self._run_jobs, name="dexlite-writer", daemon=True)
        self._thread.start()

    async def drain(self) -> None:
        """Return once every unit submitted so far has committed or failed."""
        while self._busy or self._pending:
            if self._idle is None or self._idle.done():
                self._idle = asyncio.get_running_loop().create_future()
            await self._idle

    def stop(self) -> None:
        """Stop the thread and close the connection (blocking; after :meth:`drain`)."""
        if self._thread is not None:
            self._jobs.put(_STOP)
            self._thread.join()
            self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._engine.dispose()

    def submit(self, unit: CommitUnit[T], *, slow: bool = False) -> asyncio.Future[T]:
        """Queue ``unit`` (on the loop); the future resolves once it committed.

        A ``slow`` unit runs alone on the writer's thread, so the loop is not held while it
        works through many rows.
        """
        loop = self._loop
        assert loop is not None, "the writer is not started"
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append(_Queued(unit, future, slow))
        self._schedule_flush()
        return future

    def _schedule_flush(self) -> None:
        if not self._busy and not self._flush_scheduled:
            # Soon rather than now: units submitted by the callbacks already due on the loop
            # join the same batch.
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    # -- on the event loop ---------------------------------------------------------------------

    def _flush(self) -> None:
        """Start the next batch: run its units here and hand its COMMIT to the thread."""
        self._flush_scheduled = False
        if self._busy or not self._pending:
            return
        self._busy = True
        first = self._pending.popleft()
        if first.slow:
            self._on_committing(None)
            self._jobs.put((self._apply_waiting, [first]))
            return
        batch = [first]
        while self._pending and len(batch) < self._max_batch and not self._pending[0].slow:
            batch.append(self._pending.popleft())
        conn = self._conn
        assert conn is not None
        try:
            self._sql("BEGIN IMMEDIATE")
        except (sqlite3.OperationalError, OperationalError) as exc:
            if not is_busy(exc):
                self._finish(batch, [(False, exc)] * len(batch), then_flush=False)
                return
            # Another process holds the lock: the thread waits for it.
            self._on_committing(None)
            self._jobs.put((self._apply_waiting, batch))
            return
        results: list[Any] = []
        for n, queued in enumerate(batch):
            try:
                results.append(queued.unit(conn))
            except BaseException as exc:  # this unit fails; the others are replayed
                with contextlib.suppress(Exception):
                    self._sql("ROLLBACK")
                self._on_committing(None)
                self._jobs.put((self._replay, batch, (n, exc)))
                return
        # From the COMMIT on, the loop's reads may see these units' writes before _finish
        # hands their results on: whoever keeps copies of committed state must know.
        self._on_committing(results)
        self._jobs.put((self._commit, batch, results))

    def _finish(
        self, batch: list[_Queued], outcomes: list[Outcome], then_flush: bool = True
    ) -> None:
        """Tell the batch's units and callers how it went, and start the next batch.

        The next batch starts at once (``then_flush``): its units queued while this one was
        committing, and its COMMIT then overlaps with the loop answering this batch's callers.
        """
        if self._on_batch is not None:
            self._on_batch(len(batch))
        for queued, (ok, value) in zip(batch, outcomes, strict=True):
            if ok:
                if self._on_committed is not None:
                    self._on_committed(value)  # in commit order, before any caller hears
                continue
            mark = getattr(queued.unit, "mark_failed", None)
            if mark is not None:
                mark(value)  # here, before the next batch runs units that depend on it
        self._on_settled()
        for queued, (ok, value) in zip(batch, outcomes, strict=True):
            resolve(queued.future, ok, value)
        self._busy = False
        if self._pending:
            if then_flush:
                self._flush()
            else:
                self._schedule_flush()
        elif self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    # -- on the writer's thread ----------------------------------------------------------------

    def _run_jobs(self) -> None:
        while (job := self._jobs.get()) is not _STOP:
            self._do(*job)
            del job  # its units and results would live on here until the next job

    def _do(self, work: Callable[..., list[Outcome]], batch: list[_Queued], *args: Any) -> None:
        loop = self._loop
        assert loop is not None
        try:
            outcomes = work(batch, *args)
        except BaseException as exc:  # the transaction itself failed: every unit failed
            with contextlib.suppress(Exception):
                self._sql("ROLLBACK")
            outcomes = [(False, exc)] * len(batch)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._finish, batch, outcomes)

    def _commit(self, batch: list[_Queued], results: list[Any]) -> list[Outcome]:
        self._sql("COMMIT")
        return [(True, result) for result in results]

    def _apply_waiting(self, batch: list[_Queued]) -> list[Outcome]:
        """Apply a batch from BEGIN to COMMIT, waiting for the lock if another process holds
        it; optimistically in one plain transaction, replayed with savepoints if a unit fails."""
        conn = self._conn
        assert conn is not None
        self._begin_waiting(conn)
        results: list[Any] = []
        for n, queued in enumerate(batch):
            try:
                results.append(queued.unit(conn))
            except BaseException as exc:
                self._sql("ROLLBACK")
                return self._replay(batch, (n, exc))
        self._sql("COMMIT")
        return [(True, result) for result in results]

    def _replay(self, batch: list[_Queued], failed: tuple[int, BaseException]) -> list[Outcome]:
        """Apply every unit of ``batch`` but the failed one, each in a savepoint, so a unit
        that fails too is undone alone; the transaction before was rolled back.

        A unit only touches the database, so running it again after a rollback is safe.
        """
        index, error = failed
        rest = batch[:index] + batch[index + 1 :]
        outcomes: list[Outcome] = []
        if rest:
            conn = self._conn
            assert conn is not None
            self._begin_waiting(conn)
            for n, queued in enumerate(rest):
                conn.exec_driver_sql(f"SAVEPOINT u{n}")
                try:
                    outcomes.append((True, queued.unit(conn)))
                    conn.exec_driver_sql(f"RELEASE u{n}")
                except BaseException as exc:  # a unit's failure is reported to its caller
                    conn.exec_driver_sql(f"ROLLBACK TO u{n}")
                    conn.exec_driver_sql(f"RELEASE u{n}")
                    outcomes.append((False, exc))
            conn.exec_driver_sql("COMMIT")
        return [*outcomes[:index], (False, error), *outcomes[index:]]

    def _begin_waiting(self, conn: Connection) -> None:
        """BEGIN IMMEDIATE, retrying while another process holds the lock, up to the busy
        timeout (SQLite's own wait is off on this connection)."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                self._sql("BEGIN IMMEDIATE")
                return
            except (sqlite3.OperationalError, OperationalError) as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(_BUSY_RETRY_SECONDS)


def _ignore(_results: list[Any] | None) -> None:
    pass


def _nothing() -> None:
    pass


def _unopened(_sql: str) -> Any:
    raise RuntimeError("the writer is not open")


def is_busy(exc: BaseException) -> bool:
    """True when SQLite refused because another connection holds a lock (a driver error, or
    SQLAlchemy's wrapping of one)."""
    cause = getattr(exc, "orig", exc)
    code = getattr(cause, "sqlite_errorcode", None)
    return isinstance(cause, sqlite3.OperationalError) and code in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


def resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Give ``future`` its result (``ok``) or exception, unless it is already done; an error
    of a file that cannot be written now (a full disk, say) reaches it as UnavailableError."""
    if future.done():  # its caller was canceled; the unit committed or failed all the same
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(unavailable(value) or value)
