"""Database set-up and the single writer.

Every change to durable state is a *commit unit*: a plain function ``unit(conn) -> result`` that
runs inside one transaction on a synchronous SQLAlchemy Connection. A single writer applies units
in arrival order and batches the ones that queue up behind each other into one transaction (group
commit), each inside its own savepoint so one failing unit does not undo its neighbours.

On SQLite the writer owns one connection in a dedicated thread and receives a whole batch per
hand-off: going through aiosqlite statement by statement costs a thread hand-off per statement,
several per commit. Reads never wait for the writer, since WAL lets readers see the last commit
while a write is in progress. Hot-path reads (a run, an RPC or Step snapshot) are likewise plain
functions ``read(conn)`` run on a small pool of reader threads, one hand-off per read; the async
engine (aiosqlite) serves the rest (search pages, recovery), where a few hand-offs do not matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.schema import upgrade_sqlite
from engine.errors import FailedPreconditionError, InvalidArgumentError

T = TypeVar("T")
CommitUnit = Callable[[Connection], T]


@dataclass(frozen=True)
class DatabaseSettings:
    """How to reach and tune the database."""

    url: str
    sqlite_synchronous: str = "FULL"
    busy_timeout_ms: int = 10_000
    max_batch: int = 128
    read_pool_size: int = 8
    #: PostgreSQL: connections kept open per process (as many again may open under load).
    pool_size: int = 10
    #: SQLite: told how many units each group commit carried (called in the writer thread).
    on_batch: Callable[[int], None] | None = None


class SQLiteDatabase:
    """The SQLite database: the async read engine, reader threads and the single writer."""

    def __init__(self, settings: DatabaseSettings) -> None:
        self.settings = settings
        self.url = make_url(settings.url)
        self.is_sqlite = self.url.get_backend_name() == "sqlite"
        self.read_engine: AsyncEngine | None = None
        self._writer: _SQLiteWriter | None = None
        self._sync_reader: Any = None
        self._read_threads: _ReaderThreads | None = None
        self._owner_lock: int | None = None
        self._reader_local = threading.local()
        self._reader_conns: list[Connection] = []

    async def open(self) -> None:
        """Create the schema if needed, start the writer and the read engine."""
        if not self.is_sqlite:
            raise ValueError(f"not a SQLite URL: {self.settings.url}")
        database = self.url.database or ""
        self._writer = _SQLiteWriter(self.url.set(drivername="sqlite"), self.settings)

        def start_writer() -> None:
            if database and database != ":memory:":
                path = Path(database).expanduser()
                path.parent.mkdir(parents=True, exist_ok=True)
                self._owner_lock = _claim(path)
            assert self._writer is not None
            self._writer.start()

        await asyncio.to_thread(start_writer)
        self.read_engine = create_async_engine(
            self.url.set(drivername="sqlite+aiosqlite"),
            pool_size=self.settings.read_pool_size,
            max_overflow=self.settings.read_pool_size,
        )
        # AUTOCOMMIT: each read statement is its own snapshot; nothing holds a read transaction.
        self._sync_reader = create_engine(
            self.url.set(drivername="sqlite"),
            isolation_level="AUTOCOMMIT",
            pool_size=self.settings.read_pool_size,
            max_overflow=0,
            connect_args={"check_same_thread": False},
        )
        self._read_threads = _ReaderThreads(self.settings.read_pool_size)
        busy = self.settings.busy_timeout_ms

        def configure_reader(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            # Readers may meet a checkpoint in progress; wait instead of failing.
            cursor.execute(f"PRAGMA busy_timeout={busy}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        event.listen(self.read_engine.sync_engine, "connect", configure_reader)
        event.listen(self._sync_reader, "connect", configure_reader)

    async def close(self) -> None:
        """Stop the writer (after the queued units) and dispose of connections."""
        if self._writer is not None:
            await asyncio.to_thread(self._writer.stop)
            self._writer = None
        if self.read_engine is not None:
            await self.read_engine.dispose()
            self.read_engine = None
        if self._read_threads is not None:
            await asyncio.to_thread(self._read_threads.stop)
            self._read_threads = None
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
        """Run ``query(conn)`` on a reader thread and return its result (one hand-off)."""
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

    async def write(self, unit: CommitUnit[T]) -> T:
        """Apply ``unit`` in the writer's next transaction and return its result once committed."""
        return await self.submit(unit)

    def submit(self, unit: CommitUnit[T]) -> asyncio.Future[T]:
        """Queue ``unit`` for the writer now; the future resolves once it committed.

        Units are applied in the order they were submitted (early lock release relies on it).
        A unit with a ``mark_failed(error)`` method is told when it did not commit.
        """
        assert self._writer is not None, "database is not open"
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._writer.submit(unit, future)
        return future

    def reader(self) -> AsyncEngine:
        """Return the async engine for reads."""
        assert self.read_engine is not None, "database is not open"
        return self.read_engine


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

    Like the writer's hand-off, and lighter than an executor's: no concurrent.futures.Future
    (a lock and a condition each) to chain to the asyncio one per read.
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
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            read, future = item
            if future.done():  # its caller gave up (canceled) before the read began
                continue
            try:
                outcome = (True, read())
            except BaseException as exc:  # the caller gets the read's error
                outcome = (False, exc)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                future.get_loop().call_soon_threadsafe(_resolve, future, *outcome)


class _SQLiteWriter:
    """A thread that owns the only writing SQLite connection."""

    def __init__(self, url: Any, settings: DatabaseSettings) -> None:
        self._settings = settings
        # AUTOCOMMIT hands transaction control to us, so we can say BEGIN IMMEDIATE.
        self._engine = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=_single_pool())
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None

    def start(self) -> None:
        conn = self._engine.connect()
        # WAL: readers never block the writer and see the last commit.
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        # FULL fsyncs every commit so an acknowledged write survives power loss, not only a
        # killed process; group commit amortizes that cost over concurrent callers.
        conn.exec_driver_sql(f"PRAGMA synchronous={self._settings.sqlite_synchronous}")
        # Another process (a backup, the CLI) may hold the lock briefly; wait for it.
        conn.exec_driver_sql(f"PRAGMA busy_timeout={self._settings.busy_timeout_ms}")
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        upgrade_sqlite(conn)
        self._conn = conn
        self._thread = threading.Thread(target=self._run, name="dexlite-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join()
        if self._conn is not None:
            self._conn.close()
        self._engine.dispose()

    def submit(self, unit: CommitUnit[Any], future: asyncio.Future[Any]) -> None:
        self._queue.put((unit, future))

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stop_after = False
            while len(batch) < self._settings.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop_after = True
                    break
                batch.append(item)
            self._apply(batch)
            if stop_after:
                return

    def _apply(self, batch: list[tuple[CommitUnit[Any], asyncio.Future[Any]]]) -> None:
        """Commit a batch: optimistically in one plain transaction; after a unit fails, the
        others are replayed in a transaction where each unit has its own savepoint.

        Units fail rarely (a closed run, a stale attempt), so the common case spends no
        statements on savepoints. A unit only touches the database, so replaying it after a
        rollback is safe.
        """
        units = [unit for unit, _future in batch]
        try:
            outcomes = self._run_optimistic(units)
        except BaseException as exc:  # the transaction itself failed: every unit failed
            with contextlib.suppress(Exception):
                self._conn.exec_driver_sql("ROLLBACK")  # type: ignore[union-attr]
            outcomes = [(False, exc)] * len(batch)
        if self._settings.on_batch is not None:
            self._settings.on_batch(len(batch))
        for unit, (ok, value) in zip(units, outcomes, strict=True):
            mark = getattr(unit, "mark_failed", None)
            if not ok and mark is not None:
                mark(value)  # here, before the next batch runs units that depend on it
        for (_unit, future), (ok, value) in zip(batch, outcomes, strict=True):
            future.get_loop().call_soon_threadsafe(_resolve, future, ok, value)

    def _run_optimistic(self, units: list[CommitUnit[Any]]) -> list[tuple[bool, Any]]:
        conn = self._conn
        assert conn is not None
        # IMMEDIATE takes the write lock up front, so a busy database is reported (and waited
        # on) at BEGIN rather than half-way through a unit.
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        results: list[Any] = []
        for n, unit in enumerate(units):
            try:
                results.append(unit(conn))
            except BaseException as exc:  # this unit fails; the others are replayed
                conn.exec_driver_sql("ROLLBACK")
                rest = units[:n] + units[n + 1 :]
                replayed = self._run_with_savepoints(rest) if rest else []
                return [*replayed[:n], (False, exc), *replayed[n:]]
        conn.exec_driver_sql("COMMIT")
        return [(True, result) for result in results]

    def _run_with_savepoints(self, units: list[CommitUnit[Any]]) -> list[tuple[bool, Any]]:
        conn = self._conn
        assert conn is not None
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            for n, unit in enumerate(units):
                conn.exec_driver_sql(f"SAVEPOINT u{n}")
                try:
                    outcomes.append((True, unit(conn)))
                    conn.exec_driver_sql(f"RELEASE u{n}")
                except BaseException as exc:  # a unit's failure is reported to its caller
                    conn.exec_driver_sql(f"ROLLBACK TO u{n}")
                    conn.exec_driver_sql(f"RELEASE u{n}")
                    outcomes.append((False, exc))
            conn.exec_driver_sql("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                conn.exec_driver_sql("ROLLBACK")
            raise
        return outcomes


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _single_pool() -> Any:
    from sqlalchemy.pool import StaticPool

    return StaticPool


def open_database(settings: DatabaseSettings, claimant: str = "") -> Any:
    """Return the Database for ``settings.url``: SQLite, or PostgreSQL (``postgresql+asyncpg``).

    ``claimant`` names this process on a shared database (its commits claim their Steps).
    Raises InvalidArgumentError naming ``databaseUrl`` for any other URL.
    """
    try:
        backend = make_url(settings.url).get_backend_name()
    except Exception as exc:  # an unparsable URL is the caller's input error
        raise InvalidArgumentError(
            f"databaseUrl is not a database URL: {exc}", field="databaseUrl"
        ) from None
    if backend == "sqlite":
        return SQLiteDatabase(settings)
    if backend == "postgresql":
        from engine._storage.postgres import PostgresDatabase

        return PostgresDatabase(settings.url, claimant=claimant, pool_size=settings.pool_size)
    raise InvalidArgumentError(
        f"databaseUrl must be sqlite+aiosqlite:///... or postgresql+asyncpg://..., got {backend}",
        field="databaseUrl",
    )
