"""Property: on PostgreSQL and on SQLite, random queries over the same random runs return exactly
what the Python reference returns, in the same order, page by page.

The PostgreSQL variant of ``tests/engine/test_search_property.py``, from the same model
(``tests.support.search_model``), at the storage level: both databases get the runs through
the commit units, and are read with ``search_runs``. The storage worlds add what the engine
test cannot choose: run IDs in mixed case and beyond ASCII, tied start times, SubFlow parents,
and later writes replacing or removing indexed values. PostgreSQL's database has a linguistic
default collation, so only code-point order on the columns can keep it in step with SQLite.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.schema import upgrade
from tests.support.search_model import Run, SearchCase, expected_runs, scenarios
from tests.support.search_storage import load, reset, search_all


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """Yield an async engine on a new SQLite file with dexlite's tables."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/search.db")
    async with engine.begin() as conn:
        await conn.run_sync(upgrade)
    try:
        yield engine
    finally:
        await engine.dispose()


# One database of each kind for the whole test, emptied before each example (creating a
# PostgreSQL database per example would cost more than the example).
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(scenario=scenarios(storage=True))
async def test_both_databases_return_exactly_what_the_reference_returns(
    pg_linguistic_engine: AsyncEngine,
    sqlite_engine: AsyncEngine,
    scenario: tuple[list[Run], list[tuple[SearchCase, int]]],
) -> None:
    world, checks = scenario
    databases = {"postgresql": pg_linguistic_engine, "sqlite": sqlite_engine}
    for db in databases.values():
        await reset(db)
        await load(db, world)
    for case, page_size in checks:
        expected = expected_runs(world, case)
        found = {name: await search_all(db, case.text, page_size) for name, db in databases.items()}
        # The whole run, not only its ID: status, times, parents and indexed values too.
        assert found["postgresql"] == found["sqlite"], case.text
        whole, paged = found["sqlite"]
        assert [r.run_id for r in whole] == expected, case.text
        assert [r.run_id for r in paged] == expected, (case.text, page_size)
