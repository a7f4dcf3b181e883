"""Which database the suite runs on, and a fresh database per test on it.

``DEXLITE_TEST_BACKEND`` selects the backend: ``sqlite`` (the default: a file in the test's
temporary directory) or ``postgres`` (a new database on the server ``DEXLITE_TEST_POSTGRES``
names, default 127.0.0.1:5432 with trust authentication). A PostgreSQL database is named after
the test's directory, so a server process restarted on that directory finds the same database;
it is a copy of a template that already holds the schema, and it is dropped when the test that
made it ends (a module's server keeps its database until the end of the run), by a thread of
its own while the next test runs (a DROP DATABASE waits on the server's files for a third of a
second; the run's end waits for every drop). A SQLite file
is a copy of one too, made once per process. Creating the schema per test would cost more than
many a test; the migrations themselves are tested on databases of their own.

Outside CI an unreachable server skips the PostgreSQL tests with the reason; with
``DEXLITE_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) it fails them.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.schema import upgrade_sqlite

T = TypeVar("T")

BACKEND = os.environ.get("DEXLITE_TEST_BACKEND", "sqlite")
if BACKEND not in ("sqlite", "postgres"):
    raise RuntimeError(f"DEXLITE_TEST_BACKEND must be sqlite or postgres, not {BACKEND!r}")
ON_POSTGRES = BACKEND == "postgres"
SERVER = os.environ.get("DEXLITE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRED = os.environ.get("DEXLITE_REQUIRE_POSTGRES") == "1"
#: Every test database's name starts so: a crashed run's leftovers are easy to find and drop.
PREFIX = "dexlite_test_"

_created: set[str] = set()
_template: list[str] = []
_sqlite_template: list[Path] = []
_lock = threading.Lock()
_template_lock = threading.Lock()


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on a loop of its own, whatever loop is running here
    (a fixture or hook that has none, or a test inside a running one)."""
    result: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=target, name="test-database-admin")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(SERVER, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        raise ConnectionError(f"PostgreSQL is not reachable at {SERVER}: {exc}") from exc


def server_reachable() -> str | None:
    """Return None when the PostgreSQL server answers, else why not."""

    async def probe() -> None:
        conn = await _admin()
        await conn.close()

    try:
        run_blocking(probe())
    except ConnectionError as exc:
        return str(exc)
    return None


def require_server() -> None:
    """Skip (or, under DEXLITE_REQUIRE_POSTGRES=1, fail) the test when PostgreSQL is away."""
    reason = server_reachable()
    if reason is not None:
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)


async def admin_connection() -> asyncpg.Connection:
    """Return a connection to the server's admin database, for a test that makes its own
    databases; skip (or, under DEXLITE_REQUIRE_POSTGRES=1, fail) when the server is away."""
    try:
        return await _admin()
    except ConnectionError as exc:
        if REQUIRED:
            pytest.fail(str(exc))
        pytest.skip(str(exc))


# ICU en-US: a linguistic order ('a' < 'B' < 'é'), unlike the code-point order dexlite needs.
_LINGUISTIC = " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"


@asynccontextmanager
async def fresh_database(*, linguistic: bool = False) -> AsyncIterator[AsyncEngine]:
    """Yield an async engine on a new database with dexlite's tables; drop it after.

    The database is a copy of this run's template (made by the migrations once per worker: a
    copy takes a tenth of a second where the migrations take seconds), except a
    ``linguistic`` one, whose default collation is ICU en-US, so that SQL relying on it instead
    of code-point order answers differently from SQLite (a server without ICU gives its default
    database): a copy keeps its template's collation, so that one runs the migrations itself.
    """
    from engine._storage.schema import upgrade

    template = None if linguistic else _run_template()
    admin = await admin_connection()
    name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
    if template is not None:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    else:
        try:
            await admin.execute(f'CREATE DATABASE "{name}"{_LINGUISTIC}')
        except asyncpg.PostgresError:
            await admin.execute(f'CREATE DATABASE "{name}"')
    engine = create_async_engine(postgres_url(name), pool_size=4)
    try:
        if template is None:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade)
        yield engine
    finally:
        await engine.dispose()
        await admin.close()
        _dropper.drop([name])


def postgres_url(name: str) -> str:
    """Return the asyncpg URL of database ``name`` on the test server."""
    base = SERVER.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{name}"


def create_postgres_database(name: str) -> str:
    """Create database ``name`` unless it exists (it is dropped when the run ends); return
    its URL."""
    with _lock:
        if name not in _created:
            template = _run_template()

            async def create() -> None:
                admin = await _admin()
                try:
                    found = await admin.fetchval(
                        "SELECT 1 FROM pg_database WHERE datname = $1", name
                    )
                    if not found:
                        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                finally:
                    await admin.close()

            run_blocking(create())
            _created.add(name)
    return postgres_url(name)


def _run_template() -> str:
    """Return the name of this run's template database, creating it on first use."""
    with _template_lock:
        if not _template:
            _template.append(run_blocking(_create_template()))
        return _template[0]


async def _create_template() -> str:
    """Create this run's template database with dexlite's schema; return its name."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from engine._storage.schema import upgrade_postgres

    name = f"{PREFIX}template_{os.getpid()}"
    admin = await _admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    engine = create_async_engine(postgres_url(name))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_postgres)
    finally:
        await engine.dispose()  # a template must have no connections when it is copied
    return name


def database_url_for(data_dir: Path) -> str:
    """Return the database URL of a test's directory on the selected backend."""
    if not ON_POSTGRES:
        path = data_dir / "dexlite.db"
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(_sqlite_schema(), path)
        return f"sqlite+aiosqlite:///{path}"
    require_server()
    digest = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return create_postgres_database(f"{PREFIX}{digest}")


def created_databases() -> set[str]:
    """Return the names of the databases created so far and not dropped yet."""
    with _lock:
        return set(_created)


class _Dropper:
    """Drops databases on a thread of its own, in the order they were handed to it."""

    def __init__(self) -> None:
        self._queue: list[str] = []
        self._ready = threading.Condition()
        self._busy = False
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def drop(self, names: list[str]) -> None:
        """Drop ``names`` soon (their connections are closed, or ended by the drop)."""
        if not names:
            return
        with self._ready:
            self._queue.extend(names)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="drop-test-databases", daemon=True
                )
                self._thread.start()
            self._ready.notify_all()

    def wait(self) -> None:
        """Return once every database handed over is dropped; raise what a drop raised."""
        with self._ready:
            while self._queue or self._busy:
                self._ready.wait()
            failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue:
                    self._ready.wait()
                chosen, self._queue = self._queue, []
                self._busy = True
            try:
                run_blocking(_drop(chosen))
            except BaseException as exc:  # told at the run's end (wait)
                self._failure = exc
            finally:
                with self._ready:
                    self._busy = False
                    self._ready.notify_all()


async def _drop(names: list[str]) -> None:
    admin = await _admin()
    try:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


_dropper = _Dropper()


def drop_databases(names: set[str], *, template: bool = False) -> None:
    """Drop the test databases ``names`` (when the test or module that made them ends), on the
    dropping thread; with ``template`` (when the run ends), wait for every drop, then drop the
    template too."""
    with _lock:
        chosen = sorted(names & _created)
        _created.difference_update(chosen)
    _dropper.drop(chosen)
    if not template:
        return
    _dropper.wait()
    with _lock:
        chosen = list(_template)
        _template.clear()
    if chosen:
        run_blocking(_drop(chosen))


def sqlite_only(reason: str) -> Any:
    """Mark a test that checks behaviour only SQLite has."""
    return pytest.mark.skipif(ON_POSTGRES, reason=f"SQLite only: {reason}")


def postgres_only(reason: str) -> Any:
    """Mark a test that checks behaviour only the PostgreSQL backend has."""
    return pytest.mark.skipif(not ON_POSTGRES, reason=f"PostgreSQL only: {reason}")


def backend_independent(reason: str) -> Any:
    """Mark a test whose outcome cannot depend on the backend: it runs in the SQLite half."""
    return pytest.mark.skipif(ON_POSTGRES, reason=f"backend-independent ({reason}): ran on SQLite")


def backend_independent_directory(items: list[pytest.Item], directory: Path, reason: str) -> None:
    """Mark every collected test under ``directory`` backend-independent (for a directory's
    ``pytest_collection_modifyitems``, which sees the whole session's items)."""
    mark = backend_independent(reason)
    for item in items:
        if directory in item.path.resolve().parents:
            item.add_marker(mark)


def main() -> int:
    """``python -m tests.support.backends``: exit 0 when the PostgreSQL server answers, else
    print why not and exit 1 (``make test`` decides from it whether to run the PostgreSQL half)."""
    reason = server_reachable()
    if reason is not None:
        print(reason)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _sqlite_schema() -> Path:
    """Return this process's SQLite file holding dexlite's schema at the head revision (made on
    first use, removed at exit): each test's database starts as a copy of it."""
    with _lock:
        if not _sqlite_template:
            folder = Path(tempfile.mkdtemp(prefix="dexlite-schema-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            path = folder / "schema.db"
            engine = create_engine(f"sqlite:///{path}", isolation_level="AUTOCOMMIT")
            try:
                with engine.connect() as conn:
                    upgrade_sqlite(conn)
            finally:
                engine.dispose()
            _sqlite_template.append(path)
        return _sqlite_template[0]
