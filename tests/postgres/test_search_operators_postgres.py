"""Every operator on every index type and system field, on PostgreSQL and SQLite, and what
PostgreSQL's schema must hold for it: "C" collation on string columns and indexes that serve
the compiled queries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage import tables as t
from engine._storage.schema import upgrade
from engine._storage.search.queries import load_flow_info, prepare
from tests.support.search_model import KEY_TYPES
from tests.support.search_storage import Reads, close, link_parent, search_all, start

T0 = 1_800_000_000_000_000
SECOND = 1_000_000
LOW, HIGH = -(2**63), 2**63 - 1
RUNS: dict[str, dict[str, Any]] = {
    "min": {
        "keyword1": "k",
        "int1": LOW,
        "double1": -1.5,
        "bool1": False,
        "datetime1": "2025-01-01T10:00:00+02:00",
        "keywordList1": ["x", "y", "x"],
        "text1": "min",
    },
    "max": {
        "int1": HIGH,
        "double1": 2.25,
        "bool1": True,
        "datetime1": "2025-01-01T08:00:00.000001Z",
        "keywordList1": ["Y"],
    },
    "zero": {
        "int1": 0,
        "double1": 0.0,
        "bool1": True,
        "datetime1": "2024-12-31T23:00:00-01:00",
        "keywordList1": [],
    },
    "half": {"int1": -1, "double1": 0.5},
    "none": {},
}
SET = {name for name in RUNS if name != "none"}


def moment(seconds: int) -> str:
    """The ISO-8601 text of T0 plus ``seconds``, at an offset of one hour."""
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=T0 + seconds * SECOND)
    return at.astimezone(timezone(timedelta(hours=1))).isoformat()


CASES: dict[str, set[str]] = {
    # INT, at the ends of the 64-bit range
    f"int1 = {LOW}": {"min"},
    f"int1 = {HIGH}": {"max"},
    "int1 != 0": {"min", "max", "half"},
    "int1 <> 0": {"min", "max", "half"},
    "int1 < 0": {"min", "half"},
    f"int1 <= {LOW}": {"min"},
    "int1 > -1": {"max", "zero"},
    f"int1 >= {HIGH}": {"max"},
    f"int1 BETWEEN {LOW} AND {HIGH}": SET,
    "int1 NOT BETWEEN -1 AND 0": {"min", "max"},
    f"int1 IN ({HIGH}, -1)": {"max", "half"},
    "int1 NOT IN (0)": {"min", "max", "half"},
    "int1 >= 0 AND int1 <= 0": {"zero"},
    "int1 IS NULL": {"none"},
    # DOUBLE, with integer literals too
    "double1 = 0.5": {"half"},
    "double1 = 0": {"zero"},
    "double1 < 0": {"min"},
    "double1 >= 0.5": {"max", "half"},
    "double1 BETWEEN -1.5 AND 0": {"min", "zero"},
    "double1 IN (2.25, 0)": {"max", "zero"},
    "double1 != -1.5": {"max", "zero", "half"},
    "double1 > 1e300": set(),
    "double1 < 1.5e308": SET,
    # BOOL, stored as 0/1
    "bool1 = TRUE": {"max", "zero"},
    "bool1 = false": {"min"},
    "bool1 != TRUE": {"min"},
    "bool1 IN (TRUE, FALSE)": {"min", "max", "zero"},
    "bool1 IS NULL": {"half", "none"},
    # DATETIME: instants in microseconds, whatever the offset
    "datetime1 = '2025-01-01T08:00:00Z'": {"min"},
    "datetime1 = '2025-01-01T10:00:00+02:00'": {"min"},
    "datetime1 > '2025-01-01T08:00:00Z'": {"max"},
    "datetime1 < '2025-01-01T08:00:00.000001Z'": {"min", "zero"},
    "datetime1 BETWEEN '2025-01-01' AND '2025-01-01T08:00:00Z'": {"min", "zero"},
    "datetime1 IN ('2025-01-01T00:00:00')": {"zero"},
    # KEYWORD_ARRAY: any element (an empty array is set, with no element)
    "keywordList1 = 'x'": {"min"},
    "keywordList1 = 'Y'": {"max"},
    "keywordList1 != 'x'": {"max", "zero"},
    "keywordList1 IN ('Y', 'z')": {"max"},
    "keywordList1 NOT IN ('x')": {"max", "zero"},
    "keywordList1 STARTS_WITH 'Y'": {"max"},
    "keywordList1 = 'x' AND keywordList1 = 'y'": {"min"},
    "keywordList1 IS NULL": {"half", "none"},
    "keywordList1 IS NOT NULL": {"min", "max", "zero"},
    # KEYWORD and FULL_TEXT: false where unset, and NOT is the exact complement
    "keyword1 = 'k'": {"min"},
    "keyword1 IN ('k', 'K')": {"min"},
    "keyword1 != 'k'": set(),
    "NOT keyword1 = 'k'": set(RUNS) - {"min"},
    "text1 = 'MIN' AND keyword1 STARTS_WITH ''": {"min"},
    # System fields
    "FlowType = 'A'": {"min", "zero", "none"},
    "FlowType != 'A'": {"max", "half"},
    "FlowId IN ('min', 'max')": {"min", "max"},
    "RunId = 'run-zero'": {"zero"},
    "RunId NOT IN ('run-zero')": set(RUNS) - {"zero"},
    "Status IN ('CANCELED', 'TERMINATED')": {"max", "half"},
    "Status NOT IN ('RUNNING')": {"max", "half"},
    f"StartTime = '{moment(0)}'": {"min"},
    f"StartTime = '{moment(1)}'": {"max"},
    f"StartTime > '{moment(1)}'": {"zero", "half", "none"},
    f"StartTime BETWEEN '{moment(1)}' AND '{moment(2)}'": {"max", "zero"},
    "CloseTime IS NULL": {"min", "zero", "none"},
    "CloseTime IS NOT NULL": {"max", "half"},
    f"CloseTime >= '{moment(0)}'": {"max", "half"},
    f"NOT CloseTime > '{moment(0)}'": {"min", "zero", "none"},
    "ParentFlowId = 'p'": {"zero"},
    "ParentFlowId != 'p'": {"half"},
    "NOT ParentFlowId = 'p'": set(RUNS) - {"zero"},
    "ParentFlowId IS NULL": {"min", "max", "none"},
    "ParentRunId STARTS_WITH 'pr'": {"zero", "half"},
    "ParentRunId IN ('pr-2')": {"half"},
    # Combinations
    "(int1 < 0 OR bool1 = TRUE) AND NOT datetime1 IS NULL": {"min", "max", "zero"},
    "int1 = 0 OR double1 = 0.5 OR FlowId = 'none'": {"zero", "half", "none"},
}


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    new_pg_database: Callable[..., AbstractAsyncContextManager[AsyncEngine]],
) -> AsyncIterator[AsyncEngine]:
    """Yield each database in turn with the runs of RUNS: "max" and "half" closed, "zero"
    and "half" SubFlows."""
    if request.param == "postgresql":
        async with new_pg_database(linguistic=True) as engine:
            await _fill(engine)
            yield engine
        return
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/search.db")
    async with engine.begin() as conn:
        await conn.run_sync(upgrade)
    try:
        await _fill(engine)
        yield engine
    finally:
        await engine.dispose()


async def _fill(db: AsyncEngine) -> None:
    for i, (name, values) in enumerate(RUNS.items()):
        flow_type = "A" if name in ("min", "zero", "none") else "B"
        await start(db, name, f"run-{name}", values, T0 + i * SECOND, flow_type=flow_type)
    await close(db, "max", "run-max", T0 + 3 * SECOND, "CANCELED")
    await close(db, "half", "run-half", T0 + 4 * SECOND, "TERMINATED")
    await link_parent(db, "run-zero", "p", "pr-1")
    await link_parent(db, "run-half", "q", "pr-2")


async def test_every_operator_means_the_same_on_both_databases(db: AsyncEngine) -> None:
    for query, expected in CASES.items():
        whole, paged = await search_all(db, query, 2)
        assert {r.flow_id for r in whole} == expected, query
        assert [r.run_id for r in paged] == [r.run_id for r in whole], query


async def test_flow_info_holds_the_same_values_on_both_databases(db: AsyncEngine) -> None:
    whole, _ = await search_all(db, "ORDER BY FlowId", 10)
    by_id = {r.flow_id: r for r in whole}
    assert [r.flow_id for r in whole] == ["half", "max", "min", "none", "zero"]
    low = by_id["min"]
    assert low.indexed == RUNS["min"]
    assert list(low.indexed) == sorted(RUNS["min"])  # in key order
    assert (low.status, low.started_at, low.closed_at) == ("RUNNING", T0, None)
    assert by_id["max"].indexed["int1"] == HIGH
    assert (by_id["max"].status, by_id["max"].closed_at) == ("CANCELED", T0 + 3 * SECOND)
    assert (by_id["half"].parent_flow_id, by_id["half"].parent_run_id) == ("q", "pr-2")
    assert by_id["none"].indexed == {}
    # FlowInfo reads the same one-statement page.
    assert await load_flow_info(Reads(db), "half", None) == by_id["half"]
    assert await load_flow_info(Reads(db), "min", "run-min") == low


async def test_every_string_column_compares_by_code_point_on_postgresql(
    pg_engine: AsyncEngine,
) -> None:
    async with pg_engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT table_name, column_name, collation_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND data_type IN ('character varying', 'text')"
            )
        )
        columns = rows.all()
    assert len(columns) > 40
    # Alembic's own version table is the one exception: nothing compares its text.
    assert [c for c in columns if c.collation_name != "C"] == [
        ("alembic_version", "version_num", None)
    ]


async def test_the_indexes_serve_full_text_prefixes_and_the_default_order(
    pg_linguistic_engine: AsyncEngine,
) -> None:
    db = pg_linguistic_engine
    await start(
        db, "f", "run-f", {"text1": "Alpha beta", "keyword1": "é", "keywordList1": ["é"]}, T0
    )
    # Many other rows of the same keys, so that the planner's choice shows which index serves.
    others = range(500)
    values = {"key": "keyword1", "type": "KEYWORD", "value": '"a"', "started_at": T0}
    run = {"flow_type": "F", "status": "RUNNING", "input": "null", "started_at": T0}
    async with db.begin() as conn:
        await conn.execute(
            insert(t.runs), [{"run_id": f"o{i}", "flow_id": f"o{i}", **run} for i in others]
        )
        await conn.execute(
            insert(t.search_texts),
            [{"run_id": f"o{i}", "key": "text1", "body": f"w{i} beta"} for i in others],
        )
        await conn.execute(
            insert(t.search_values),
            [{"run_id": f"o{i}", "text_value": f"a{i}", **values} for i in others],
        )
        await conn.execute(
            insert(t.search_keywords),
            [{"run_id": f"o{i}", "key": "keywordList1", "value": f"a{i}"} for i in others],
        )
        await conn.execute(text("ANALYZE"))

    async def plan(query: str) -> str:
        compiled = prepare(query, KEY_TYPES)
        order = [k.expression.desc() if k.descending else k.expression for k in compiled.order]
        statement = select(t.runs.c.run_id).where(compiled.where).order_by(*order).limit(1)
        sql = statement.compile(
            dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}
        )
        async with db.connect() as conn:
            # Still small tables: a sequential scan would win, whatever the indexes.
            await conn.execute(text("SET enable_seqscan = off"))
            lines = (await conn.exec_driver_sql(f"EXPLAIN {sql}")).scalars().all()
            found = (await conn.exec_driver_sql(str(sql))).scalars().all()
        assert found == ["run-f"], query
        return "\n".join(lines)

    assert "ix_search_texts_lexemes" in await plan("text1 = 'ALPHA beta'")
    assert "ix_search_values_text" in await plan("keyword1 STARTS_WITH 'é'")
    assert "ix_search_keywords_value" in await plan("keywordList1 STARTS_WITH 'é'")
    assert "ix_runs_started" in await plan("")  # run-f has the greatest run ID
