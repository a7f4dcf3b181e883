"""A fresh PostgreSQL database per test, for the tests that need real concurrent transactions.

The machine (and CI) run PostgreSQL on 127.0.0.1:5432 with trust authentication. Outside CI a
missing server skips these tests with the reason; with ``DEXLITE_REQUIRE_POSTGRES=1`` (set by
``.ci/run``) a missing server fails them instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.schema import upgrade
from tests.support.backends import backend_independent

SERVER = os.environ.get("DEXLITE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(SERVER, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL is not reachable at {SERVER}: {exc}"
        if os.environ.get("DEXLITE_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


# ICU en-US: a linguistic order ('a' < 'B' < 'é'), unlike the code-point order dexlite needs.
_LINGUISTIC = " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"


@asynccontextmanager
async def fresh_database(*, linguistic: bool = False) -> AsyncIterator[AsyncEngine]:
    """Yield an async engine on a new, empty database with dexlite's tables; drop it after.

    ``linguistic``: the database's default collation is ICU en-US, so that SQL relying on it
    instead of code-point order answers differently from SQLite (a server without ICU gives
    its default database).
    """
    admin = await _admin()
    name = f"dexlite_test_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"{_LINGUISTIC if linguistic else ""}')
    except asyncpg.PostgresError:
        if not linguistic:
            await admin.close()
            raise
        await admin.execute(f'CREATE DATABASE "{name}"')
    url = SERVER.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://") + f"/{name}"
    engine = create_async_engine(url, pool_size=4)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade)
        yield engine
    finally:
        await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture
async def pg_engine() -> AsyncIterator[AsyncEngine]:
    """Yield an async engine on a new, empty database with dexlite's tables; drop it after."""
    async with fresh_database() as engine:
        yield engine


@pytest.fixture
async def pg_linguistic_engine() -> AsyncIterator[AsyncEngine]:
    """Like ``pg_engine``, on a database whose default collation is linguistic."""
    async with fresh_database(linguistic=True) as engine:
        yield engine


@pytest.fixture
def new_pg_database() -> Callable[..., AbstractAsyncContextManager[AsyncEngine]]:
    """Return :func:`fresh_database`, for fixtures that need a database only sometimes."""
    return fresh_database


_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run these tests in the SQLite half only: each makes its own PostgreSQL database (and
    the property test checks both databases), so a second run would repeat it exactly."""
    mark = backend_independent("makes its own PostgreSQL database")
    for item in items:
        if _HERE in item.path.resolve().parents:
            item.add_marker(mark)
