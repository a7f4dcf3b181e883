"""The SQLite database: its readers and its one writer.

Every change to durable state is a *commit unit*: a plain function ``unit(conn) -> result`` that
runs inside one transaction on a synchronous SQLAlchemy Connection. On SQLite a single writer
(``sqlite_writer``) applies units in arrival order and batches the ones that queue up behind
each other into one transaction (group commit), so that one fsync serves them all; a unit that
fails does not undo its neighbours.

Reads never wait for the writer, since WAL lets readers see the last commit while a write is in
progress. A read is a plain function ``query(conn)`` too. Short reads (a run, an RPC or Step
snapshot) run on the event loop's own connection, since a thread hand-off costs more than they
do; reads that may walk many rows (search and history pages, recovery) run on a small pool of
reader threads, one hand-off per read.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.database_settings import DatabaseSettings
from engine._storage.outage import unavailable
from engine._storage.prepared import Prepared, use_driver
from engine._storage.sqlite.prepared_driver import CURSOR
from engine._storage.sqlite.writer import CommitUnit, SQLiteWriter, is_busy, resolve
from engine.errors import FailedPreconditionError

T = TypeVar("T")


class SQLiteDatabase:
    """The SQLite database: reads on the loop and on reader threads, and the single writer."""

    def __init__(self, settings: DatabaseSettings) -> None:
        self.settings = settings
        self.url = make_url(settings.url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.read_engine: AsyncEngine | None = None
        self._writer: SQLiteWriter | None = None
        self._sync_reader: Any = None
        self._loop_reader: Connection | None = None
        self._read_threads: _ReaderThreads | None = None
        self._owner_lock: int | None = None
        self._reader_local = threading.local()
        self._reader_conns: list[Connection] = []

    async def open(self) -> None:
        """Create the schema if needed, start the writer and the readers."""
        if not self.is_sqlite:
            raise ValueError(f"not a SQLite URL: {self.settings.url}")
        database = self.url.database or ""
        settings = self.settings
        writer = SQLiteWriter(
            self.url.set(drivername="sqlite"),
            synchronous=settings.sqlite_synchronous,
            busy_timeout_ms=settings.busy_timeout_ms,
            max_batch=settings.max_batch,
            on_batch=settings.on_batch,
            on_committed=settings.on_committed,
            on_committing=settings.on_committing,
            on_settled=settings.on_settled,
            prepared_statements=settings.prepared_statements,
        )

        def open_writer() -> None:
            if database and database != ":memory:":
                path = Path(database).expanduser()
                path.parent.mkdir(parents=True, exist_ok=True)
                self._owner_lock = _claim(path)
            writer.open()

        await asyncio.to_thread(open_writer)
        writer.start(asyncio.get_running_loop())
        self._writer = writer
        self.read_engine = create_async_engine(
            self.url.set(drivername="sqlite+aiosqlite"),
            pool_size=settings.read_pool_size,
            max_overflow=settings.read_pool_size,
        )
        # AUTOCOMMIT: each read statement is its own snapshot; nothing holds a read transaction.
        # One connection per reader thread and one for the loop.
        self._sync_reader = create_engine(
            self.url.set(drivername="sqlite"),
            isolation_level="AUTOCOMMIT",
            pool_size=settings.read_pool_size + 1,
            max_overflow=0,
            connect_args={"check_same_thread": False},
        )
        busy = settings.busy_timeout_ms

        def configure_reader(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            # Readers may meet a checkpoint in progress; wait instead of failing.
            cursor.execute(f"PRAGMA busy_timeout={busy}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        event.listen(self.read_engine.sync_engine, "connect", configure_reader)
        event.listen(self._sync_reader, "connect", configure_reader)
        use_driver(self._sync_reader, CURSOR if settings.prepared_statements else None)
        loop_reader = self._sync_reader.connect()
        # The loop must never wait inside SQLite: a read that finds the database busy goes to a
        # reader thread, which may wait (see read).
        loop_reader.exec_driver_sql("PRAGMA busy_timeout=0")
        self._loop_reader = loop_reader
        self._read_threads = _ReaderThreads(settings.read_pool_size)

    async def close(self) -> None:
        """Stop the writer (after the queued units) and dispose of connections."""
        if self._writer is not None:
            await self._writer.drain()
            await asyncio.to_thread(self._writer.stop)
            self._writer = None
        if self.read_engine is not None:
            await self.read_engine.dispose()
            self.read_engine = None
        if self._read_threads is not None:
            await asyncio.to_thread(self._read_threads.stop)
            self._read_threads = None
        if self._loop_reader is not None:
            self._loop_reader.close()
            self._loop_reader = None
        for conn in self._reader_conns:
            conn.close()  # the threads are gone; check_same_thread=False allows this
        self._reader_conns.clear()
        if self._owner_lock is not None:
            os.close(self._owner_lock)  # closing the descriptor releases the claim
            self._owner_lock = None
        if self._sync_reader is not None:
            self._sync_reader.dispose()
            self._sync_reader = None

    async def read(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a short read (a run, a snapshot), and return its result.

        It runs right here on the event loop: a point read costs SQLite tens of microseconds,
        less than handing it to a thread and back. WAL gives it the last committed state
        without waiting for the writer. Should another process hold a lock SQLite makes
        readers wait on (a checkpoint restarting the WAL), the read goes to a reader thread,
        which waits.
        """
        conn = self._loop_reader
        assert conn is not None, "database is not open"
        if not self.settings.reads_on_loop:
            return await self.scan(query)
        try:
            return query(conn)
        except (sqlite3.OperationalError, OperationalError) as exc:
            if not is_busy(exc):
                error = unavailable(exc)
                if error is not None:
                    raise error from exc
                raise
        return await self.scan(query)

    async def rows(
        self, statement: Prepared, params: Mapping[str, Any], *, grouped: bool = False
    ) -> list[Any]:
        """Run ``statement``, a short read, as :meth:`read` runs a query; return its rows
        (``grouped`` changes nothing here: a read on SQLite takes no round trip)."""
        return await self.read(lambda conn: statement.rows(conn, params))

    async def scan(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a read that may walk many rows (a search or history page,
        recovery), on a reader thread, and return its result (one hand-off)."""
        assert self._read_threads is not None, "database is not open"
        local = self._reader_local

        def run() -> T:
            # Each reader thread keeps its own connection: no pool checkout per read.
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = self._sync_reader.connect()
                self._reader_conns.append(conn)
            return query(conn)

        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._read_threads.submit(run, future)
        return await future

    async def write(self, unit: CommitUnit[T], *, slow: bool = False) -> T:
        """Apply ``unit`` in the writer's next transaction and return its result once committed.

        ``slow``: the unit may work through many rows, so it runs alone on the writer's thread
        instead of on the event loop.
        """
        return await self.submit(unit, slow=slow)

    def submit(self, unit: CommitUnit[T], *, slow: bool = False) -> asyncio.Future[T]:
        """Queue ``unit`` for the writer now; the future resolves once it committed.

        Units are applied in the order they were submitted (lock handoffs relies on it).
        A unit with a ``mark_failed(error)`` method is told when it did not commit.
        """
        assert self._writer is not None, "database is not open"
        return self._writer.submit(unit, slow=slow)

    async def ping(self) -> None:
        """Raise UnavailableError unless the database file answers a read now."""
        await self.scan(_select_one)

    def reader(self) -> AsyncEngine:
        """Return the async engine for reads."""
        assert self.read_engine is not None, "database is not open"
        return self.read_engine


def _select_one(conn: Connection) -> None:
    conn.exec_driver_sql("SELECT 1")


def _claim(path: Path) -> int:
    """Claim the database file for this process, or raise FailedPreconditionError.

    On SQLite one process runs the Flows: locks, timers and handed-out Steps live in its
    memory, so a second engine on the same file would run Steps twice. The claim is a lock on
    a file beside the database; the kernel drops it when the process dies, even by SIGKILL.
    """
    fd = os.open(f"{path}.owner", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise FailedPreconditionError(
            f"the database {path} is already served by {holder}; SQLite takes one engine "
            "process (use PostgreSQL to run several)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()}".encode(), 0)
    return fd


_STOP = object()


class _ReaderThreads:
    """Threads that run reads and hand each result straight to its awaiting asyncio future.

    Lighter than an executor's hand-off: no concurrent.futures.Future (a lock and a condition
    each) to chain to the asyncio one per read.
    """

    def __init__(self, size: int) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"dexlite-read_{n}", daemon=True)
            for n in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, read: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        self._queue.put((read, future))

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(_STOP)
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            self._serve(*item)
            # Not ``item`` alone: the last read's rows would live on in this frame until the
            # next read (recovery's read of every open run, say).
            del item

    @staticmethod
    def _serve(read: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        if future.done():  # its caller gave up (canceled) before the read began
            return
        try:
            outcome = (True, read())
        except BaseException as exc:  # the caller gets the read's error
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            future.get_loop().call_soon_threadsafe(resolve, future, *outcome)
