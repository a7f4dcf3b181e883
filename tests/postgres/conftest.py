"""A fresh PostgreSQL database per test, for the tests that need real concurrent transactions.

The machine (and CI) run PostgreSQL on 127.0.0.1:5432 with trust authentication. Outside CI a
missing server skips these tests with the reason; with ``DEXLITE_REQUIRE_POSTGRES=1`` (set by
``.ci/run``) a missing server fails them instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.tables import metadata

SERVER = os.environ.get("DEXLITE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(SERVER, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL is not reachable at {SERVER}: {exc}"
        if os.environ.get("DEXLITE_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture
async def pg_engine() -> AsyncIterator[AsyncEngine]:
    """Yield an async engine on a new, empty database with dexlite's tables; drop it after."""
    admin = await _admin()
    name = f"dexlite_test_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = SERVER.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://") + f"/{name}"
    engine = create_async_engine(url, pool_size=4)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        yield engine
    finally:
        await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
