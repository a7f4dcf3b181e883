"""Fixtures of the tests that need real concurrent PostgreSQL transactions: a fresh database
each (see :func:`tests.support.backends.fresh_database`).

The machine (and CI) run PostgreSQL on 127.0.0.1:5432 with trust authentication. Outside CI a
missing server skips these tests with the reason; with ``DEXLITE_REQUIRE_POSTGRES=1`` (set by
``.ci/run``) a missing server fails them instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.backends import backend_independent_directory, fresh_database


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
    backend_independent_directory(items, _HERE, "makes its own PostgreSQL database")
