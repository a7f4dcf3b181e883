"""Queries that differ only in their values share one compiled statement (``search/shapes.py``),
and each still finds its own runs and has its own values checked."""

from __future__ import annotations

from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeIndex,
    EngineConfig,
    Flow,
    IndexType,
    InvalidQueryError,
    StartFlowOptions,
    StepList,
)
from engine._storage.search.queries import prepare_bound
from tests.conftest import running_engine

KEY_TYPES = {
    "keyword1": IndexType.KEYWORD,
    "int1": IndexType.INT,
    "text1": IndexType.FULL_TEXT,
    "double1": IndexType.DOUBLE,
    "time1": IndexType.DATETIME,
}


class ShapedFlow(Flow[None]):
    colour = Attribute("colour", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    size = Attribute("size", int, index=AttributeIndex(IndexType.INT, "int1"))
    about = Attribute("about", str, index=AttributeIndex(IndexType.FULL_TEXT, "text1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


def test_queries_differing_only_in_values_share_one_compiled_query() -> None:
    first, values_a = prepare_bound("keyword1 = 'red' AND int1 BETWEEN 1 AND 5", KEY_TYPES)
    second, values_b = prepare_bound("keyword1 = 'blue' AND int1 BETWEEN 7 AND 900", KEY_TYPES)
    assert first is second
    assert values_a == {"q0": "red", "q1": 1, "q2": 5}
    assert values_b == {"q0": "blue", "q1": 7, "q2": 900}
    # Values are converted to their stored form: a DOUBLE from an integer, a DATETIME to µs.
    _, values = prepare_bound("double1 > 2 AND time1 < '1970-01-01T00:00:01Z'", KEY_TYPES)
    assert values == {"q0": 2.0, "q1": 1_000_000}
    # Another shape (another operator, another list length) is another compiled query.
    assert prepare_bound("keyword1 != 'red' AND int1 BETWEEN 1 AND 5", KEY_TYPES)[0] is not first
    in_two = prepare_bound("int1 IN (1, 2)", KEY_TYPES)[0]
    assert prepare_bound("int1 IN (1, 2, 3)", KEY_TYPES)[0] is not in_two
    assert prepare_bound("int1 IN (8, 9)", KEY_TYPES)[0] is in_two


@pytest.mark.parametrize(
    ("query", "position"),
    [
        ("keyword1 = 'red' AND int1 BETWEEN 1 AND 'five'", 40),
        ("keyword1 = 7 AND int1 BETWEEN 1 AND 5", 11),
        ("Status = 'RUNNIN' AND int1 BETWEEN 1 AND 5", 9),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_at_its_position(query: str, position: int) -> None:
    """Whether its kind makes another shape (compiled, and refused, then) or the value is only
    checked against a known shape (a Status that does not exist)."""
    prepare_bound("keyword1 = 'red' AND int1 BETWEEN 1 AND 5", KEY_TYPES)  # the shape is known
    prepare_bound("Status = 'RUNNING' AND int1 BETWEEN 1 AND 5", KEY_TYPES)
    with pytest.raises(InvalidQueryError) as refused:
        prepare_bound(query, KEY_TYPES)
    assert refused.value.position == position


def test_values_that_decide_the_sql_compile_per_text() -> None:
    for a, b in (
        ("keyword1 STARTS_WITH 'ab'", "keyword1 STARTS_WITH ''"),
        ("text1 = 'one'", "text1 = 'one two'"),
    ):
        compiled_a, values_a = prepare_bound(a, KEY_TYPES)
        compiled_b, values_b = prepare_bound(b, KEY_TYPES)
        assert compiled_a is not compiled_b
        assert values_a == values_b == {}


async def test_each_query_of_a_shared_shape_finds_its_own_runs(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([ShapedFlow()], engine_config) as eng:
        for i in range(12):
            colour = ("red", "blue", "green")[i % 3]
            values: dict[str, Any] = {"colour": colour, "size": i, "about": f"item {colour}"}
            await eng.start_flow(
                ShapedFlow, f"f{i}", options=StartFlowOptions(initial_attributes=values)
            )

        async def found(query: str) -> list[str]:
            page = await eng.search_flows(query, 100)
            return sorted(f.flow_id for f in page.flows)

        assert await found("keyword1 = 'red' AND int1 BETWEEN 0 AND 5") == ["f0", "f3"]
        assert await found("keyword1 = 'blue' AND int1 BETWEEN 4 AND 11") == ["f10", "f4", "f7"]
        assert await found("keyword1 = 'green' AND int1 BETWEEN 0 AND 1") == []
        assert await found("int1 IN (2, 9)") == ["f2", "f9"]
        assert await found("int1 IN (3, 11)") == ["f11", "f3"]
        assert await found("text1 = 'green' AND keyword1 STARTS_WITH 'gr'") == [
            "f11",
            "f2",
            "f5",
            "f8",
        ]
        # Paging through a shared shape keeps each query's own values and tokens.
        first = await eng.search_flows("int1 >= 2 AND int1 < 8", 4)
        rest = await eng.search_flows("int1 >= 2 AND int1 < 8", 4, first.next_page_token)
        paged = [f.flow_id for f in first.flows + rest.flows]
        assert paged == [f"f{i}" for i in range(7, 1, -1)]
