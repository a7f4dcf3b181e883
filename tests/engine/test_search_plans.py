"""Searches read their page in order off an index, and a driven search finds what the plain
condition finds (issue 12: search at 100,000 and 1,000,000 Flows).

A conjunction with a scalar index key is led from that key's rows (``search/driver.py``); a
disjunction is not, so ``k = v OR k = v`` is the plain-condition twin of ``k = v`` and both
must page through exactly the same runs, in the same order.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeIndex,
    EngineConfig,
    Flow,
    IndexType,
    StartFlowOptions,
    StepList,
)
from engine._storage.search.queries import search_statement
from tests.conftest import running_engine
from tests.support.backends import sqlite_only

KEY_TYPES = {"keyword1": IndexType.KEYWORD, "int1": IndexType.INT}


class PlannedFlow(Flow[None]):
    """An RPC-less Flow with a KEYWORD and an INT index."""

    colour = Attribute("colour", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    size = Attribute("size", int, index=AttributeIndex(IndexType.INT, "int1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


async def _every_page(eng: Any, query: str, page_size: int) -> list[str]:
    seen: list[str] = []
    token = ""
    while True:
        page = await eng.search_flows(query, page_size, token)
        seen.extend(f.flow_id for f in page.flows)
        token = page.next_page_token
        if not token:
            return seen


async def test_a_driven_search_pages_through_exactly_what_the_plain_condition_matches(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([PlannedFlow()], engine_config) as eng:
        for i in range(60):
            await eng.start_flow(
                PlannedFlow,
                f"f{i:02}",
                options=StartFlowOptions(
                    initial_attributes={"colour": ("red", "blue", "green")[i % 3], "size": i}
                ),
            )
        twins = [
            ("keyword1 = 'red'", "keyword1 = 'red' OR keyword1 = 'red'"),
            (
                "keyword1 = 'red' AND int1 >= 20",
                "(keyword1 = 'red' OR keyword1 = 'red') AND int1 >= 20",
            ),
            ("int1 BETWEEN 10 AND 40", "int1 BETWEEN 10 AND 40 OR int1 BETWEEN 10 AND 40"),
            (
                "FlowType = 'PlannedFlow' AND keyword1 IN ('red', 'blue')",
                "FlowType = 'PlannedFlow' AND (keyword1 = 'red' OR keyword1 = 'blue')",
            ),
            ("keyword1 != 'red' AND int1 < 30", "NOT keyword1 = 'red' AND int1 < 30"),
        ]
        for driven, plain in twins:
            for page_size in (1, 7, 100):
                got = await _every_page(eng, driven, page_size)
                want = await _every_page(eng, plain, page_size)
                assert got == want, (driven, page_size)
                assert got, driven
        # Newest first: the default order is StartTime, then RunId, both descending.
        reds = await _every_page(eng, "keyword1 = 'red'", 5)
        assert reds == [f"f{i:02}" for i in range(57, -1, -3)]


def _plan(db: Path, query: str, paged: bool = False) -> str:
    from sqlalchemy.dialects import sqlite

    statement = search_statement(query, KEY_TYPES, paged=paged)
    compiled = statement.compile(dialect=sqlite.dialect(paramstyle="qmark"))
    values = {"limit": 101, "p0": 0, "p1": ""}
    expanded = compiled.construct_expanded_state(values)
    args = [
        values[name] if name in values else expanded.parameters[name]
        for name in expanded.positiontup
    ]
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {expanded.statement}", args).fetchall()
    return "\n".join(str(row[-1]) for row in rows)


@sqlite_only("reads SQLite's query plans")
async def test_equalities_read_their_page_in_order_off_an_index(
    engine_config: EngineConfig, tmp_path: Path
) -> None:
    async with running_engine([PlannedFlow()], engine_config) as eng:
        await eng.start_flow(
            PlannedFlow, "f", options=StartFlowOptions(initial_attributes={"colour": "red"})
        )
    db = Path(engine_config.database_url.split("///", 1)[1])
    for query, index in (
        ("keyword1 = 'red'", "ix_search_values_text"),
        ("keyword1 = 'red' AND FlowType = 'PlannedFlow'", "ix_search_values_text"),
        ("Status = 'RUNNING'", "ix_runs_status"),
        ("FlowType = 'PlannedFlow'", "ix_runs_type_started"),
        ("", "ix_runs_started"),
    ):
        for paged in (False, True):
            plan = _plan(db, query, paged)
            assert index in plan, (query, plan)
            # No sort of every match: the page comes off the index in order, and stops.
            assert "TEMP B-TREE" not in plan, (query, plan)
    # A range sorts only the key's covering index, then looks up one page of runs.
    plan = _plan(db, "int1 BETWEEN 1 AND 5")
    assert "COVERING INDEX ix_search_values_int" in plan, plan
    assert "SCAN runs" not in plan, plan


@pytest.mark.parametrize("query", ["keyword1 = 'x' OR int1 = 1", "NOT keyword1 = 'x'"])
def test_queries_that_are_not_conjunctions_keep_the_plain_condition(query: str) -> None:
    from engine._storage.search.queries import prepare

    assert prepare(query, KEY_TYPES).driver is None
