"""Property: random valid queries over random Flows return exactly what a Python reference
filter returns, in the query's order, and paging through them returns each match once.

The strategies and the reference live in ``tests.support.search_model``; the PostgreSQL variant
(``tests/postgres/test_search_property_postgres.py``) checks the same model at the storage level
on both databases.
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import datetime

from hypothesis import HealthCheck, Phase, given, settings

from engine import (
    Attribute,
    AttributeIndex,
    Engine,
    EngineConfig,
    Flow,
    IndexType,
    ManualClock,
    Registry,
    StartFlowOptions,
    StepList,
)
from tests.support.search_model import SECOND, T0, Run, SearchCase, expected_runs, scenarios


class PropA(Flow[None]):
    kw = Attribute("kw", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    n = Attribute("n", int, index=AttributeIndex(IndexType.INT, "int1"))
    d = Attribute("d", float, index=AttributeIndex(IndexType.DOUBLE, "double1"))
    b = Attribute("b", bool, index=AttributeIndex(IndexType.BOOL, "bool1"))
    tags = Attribute(
        "tags", list[str], index=AttributeIndex(IndexType.KEYWORD_ARRAY, "keywordList1")
    )
    text = Attribute("text", str, index=AttributeIndex(IndexType.FULL_TEXT, "text1"))
    when = Attribute("when", datetime, index=AttributeIndex(IndexType.DATETIME, "datetime1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


class PropB(Flow[None]):
    """Shares keyword1 and int1 with PropA."""

    label = Attribute("label", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    size = Attribute("size", int, index=AttributeIndex(IndexType.INT, "int1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


ATTRIBUTES = {
    "PropA": {
        "keyword1": "kw",
        "int1": "n",
        "double1": "d",
        "bool1": "b",
        "keywordList1": "tags",
        "text1": "text",
        "datetime1": "when",
    },
    "PropB": {"keyword1": "label", "int1": "size"},
}


async def run_world(world: list[Run], checks: list[tuple[SearchCase, int]]) -> None:
    clock = ManualClock(T0 / SECOND)
    with tempfile.TemporaryDirectory() as tmp:
        config = EngineConfig(
            database_url=f"sqlite+aiosqlite:///{tmp}/p.db",
            blob_dir=f"{tmp}/blobs",
            clock=clock,
            sqlite_synchronous="OFF",
        )
        eng = Engine(Registry([PropA(), PropB()]), config)
        await eng.start()
        try:
            for run in world:
                clock.advance(run.started / SECOND - clock.now())
                initial = {ATTRIBUTES[run.flow_type][k]: v for k, v in run.values.items()}
                result = await eng.start_flow(
                    run.flow_type, run.flow_id, options=StartFlowOptions(initial_attributes=initial)
                )
                run.run_id = result.run_id
            for run in world:
                if run.status == "CANCELED":
                    clock.advance(0.25)
                    await eng.stop_flow(run.flow_id, run_id=run.run_id)
                    run.closed = round(clock.now() * SECOND)
            for case, page_size in checks:
                expected = expected_runs(world, case)
                page = await eng.search_flows(case.text, 1000)
                assert [f.run_id for f in page.flows] == expected, case.text
                paged: list[str] = []
                token = ""
                while True:
                    page = await eng.search_flows(case.text, page_size, token)
                    paged.extend(f.run_id for f in page.flows)
                    token = page.next_page_token
                    if not token:
                        break
                assert paged == expected, (case.text, page_size)
        finally:
            await eng.close()


# Each example runs an Engine, so shrinking a failure would take minutes: report it unshrunk
# (the failing query text is in the assertion message).
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(scenario=scenarios())
def test_random_queries_return_exactly_what_a_reference_filter_returns(
    scenario: tuple[list[Run], list[tuple[SearchCase, int]]],
) -> None:
    asyncio.run(run_world(*scenario))
