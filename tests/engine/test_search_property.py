"""Property: random valid queries over random Flows return exactly what a Python reference
filter returns, in the documented order, and paging through them returns each match once."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

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

T0 = 1_800_000_000.0
KEYWORDS = ["a", "b", "ab", "B", "ba", "", "a'b", "é"]
WORDS = ["alpha", "beta", "gamma", "delta"]
DOUBLES = [-1.5, 0.0, 0.5, 1.0, 2.25]
INTS = [-(2**63), -3, -1, 0, 1, 2, 3, 2**63 - 1]
MOMENTS = [
    "2025-01-01T10:00:00+02:00",
    "2025-01-01T08:30:00Z",
    "2025-01-01T09:00:00",
    "2024-12-31T23:00:00-01:00",
]


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
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "keyword1": st.sampled_from(KEYWORDS),
    "int1": st.sampled_from(INTS),
    "double1": st.sampled_from(DOUBLES),
    "bool1": st.booleans(),
    "keywordList1": st.lists(st.sampled_from(KEYWORDS), max_size=3),
    "text1": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    "datetime1": st.sampled_from(MOMENTS),
}


@dataclass
class Run:
    flow_id: str
    flow_type: str
    values: dict[str, Any]
    started: float
    closed: float | None = None
    status: str = "RUNNING"
    run_id: str = ""
    system: dict[str, Any] = field(default_factory=dict)


@st.composite
def worlds(draw: st.DrawFn) -> list[Run]:
    runs = []
    for i in range(draw(st.integers(1, 10))):
        flow_type = draw(st.sampled_from(["PropA", "PropB"]))
        values = {}
        for key in ATTRIBUTES[flow_type]:
            if draw(st.booleans()):
                values[key] = draw(VALUES[key])
        runs.append(
            Run(
                f"flow-{i}-{draw(st.sampled_from('xyz'))}",
                flow_type,
                values,
                T0 + i + 1,
                status=draw(st.sampled_from(["RUNNING", "RUNNING", "CANCELED"])),
            )
        )
    return runs


# -- queries: (text, reference predicate over a Run) ----------------------------------------------


def lit(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def instant(value: str | float) -> datetime:
    if isinstance(value, float):
        return datetime.fromtimestamp(value, UTC)
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


Query = tuple[str, Any]

COMPARE = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def scalar(
    key: str,
    draw: st.DrawFn,
    pool: st.SearchStrategy[Any],
    ordered: bool,
    get: Any,
    convert: Any = lambda v: v,
) -> Query:
    ops = ["=", "!="] + (["<", "<=", ">", ">="] if ordered else [])
    kind = draw(
        st.sampled_from(["cmp", "in", "between", "null"] if ordered else ["cmp", "in", "null"])
    )
    if kind == "cmp":
        op, value = draw(st.sampled_from(ops)), draw(pool)
        return (
            f"{key} {op} {lit(value)}",
            lambda r: get(r) is not None and COMPARE[op](convert(get(r)), convert(value)),
        )
    if kind == "in":
        values = draw(st.lists(pool, min_size=1, max_size=3))
        negated = draw(st.booleans())
        text = f"{key} {'NOT IN' if negated else 'in'} ({', '.join(lit(v) for v in values)})"
        wanted = [convert(v) for v in values]
        return text, lambda r: get(r) is not None and ((convert(get(r)) in wanted) != negated)
    if kind == "between":
        low, high = draw(pool), draw(pool)
        negated = draw(st.booleans())
        text = f"{key} {'NOT BETWEEN' if negated else 'BETWEEN'} {lit(low)} AND {lit(high)}"
        return (
            text,
            lambda r: (
                get(r) is not None
                and ((convert(low) <= convert(get(r)) <= convert(high)) != negated)
            ),
        )
    negated = draw(st.booleans())
    return (f"{key} IS {'NOT ' if negated else ''}NULL", lambda r: (get(r) is None) != negated)


@st.composite
def predicates(draw: st.DrawFn) -> Query:
    key = draw(
        st.sampled_from(
            [
                "keyword1",
                "int1",
                "double1",
                "bool1",
                "keywordList1",
                "text1",
                "datetime1",
                "FlowType",
                "FlowId",
                "Status",
                "StartTime",
                "CloseTime",
            ]
        )
    )

    def value_of(r: Run) -> Any:
        return r.values.get(key)

    if key == "keyword1":
        if draw(st.booleans()):
            prefix = draw(st.sampled_from(["", "a", "b", "ab", "é"]))
            return (
                f"keyword1 STARTS_WITH {lit(prefix)}",
                lambda r: value_of(r) is not None and value_of(r).startswith(prefix),
            )
        return scalar(key, draw, st.sampled_from(KEYWORDS), True, value_of)
    if key == "int1":
        return scalar(key, draw, st.sampled_from(INTS), True, value_of)
    if key == "double1":
        pool = st.sampled_from(DOUBLES) | st.integers(-2, 2)
        return scalar(key, draw, pool, True, value_of, float)
    if key == "bool1":
        return scalar(key, draw, st.booleans(), False, value_of)
    if key == "datetime1":
        return scalar(key, draw, st.sampled_from(MOMENTS), True, value_of, instant)
    if key == "keywordList1":
        kind = draw(st.sampled_from(["=", "!=", "in", "not in", "starts", "null"]))
        if kind in ("=", "!="):
            value = draw(st.sampled_from(KEYWORDS))
            return (
                f"keywordList1 {kind} {lit(value)}",
                lambda r: value_of(r) is not None and ((value in value_of(r)) == (kind == "=")),
            )
        if kind in ("in", "not in"):
            values = draw(st.lists(st.sampled_from(KEYWORDS), min_size=1, max_size=3))
            text = f"keywordList1 {kind.upper()} ({', '.join(lit(v) for v in values)})"
            return (
                text,
                lambda r: (
                    value_of(r) is not None
                    and (any(v in values for v in value_of(r)) == (kind == "in"))
                ),
            )
        if kind == "starts":
            prefix = draw(st.sampled_from(["a", "b", ""]))
            return (
                f"keywordList1 STARTS_WITH {lit(prefix)}",
                lambda r: (
                    value_of(r) is not None and any(v.startswith(prefix) for v in value_of(r))
                ),
            )
        negated = draw(st.booleans())
        return (
            f"keywordList1 IS {'NOT ' if negated else ''}NULL",
            lambda r: (value_of(r) is None) != negated,
        )
    if key == "text1":
        kind = draw(st.sampled_from(["=", "!=", "null"]))
        if kind == "null":
            return "text1 IS NULL", lambda r: value_of(r) is None
        word = draw(st.sampled_from([*WORDS, "omega"]))
        shown = word.upper() if draw(st.booleans()) else word
        return (
            f"text1 {kind} {lit(shown)}",
            lambda r: value_of(r) is not None and ((word in value_of(r).split()) == (kind == "=")),
        )
    if key in ("FlowType", "Status", "FlowId"):
        attr = {"FlowType": "flow_type", "Status": "status", "FlowId": "flow_id"}[key]
        pools = {
            "FlowType": ["PropA", "PropB"],
            "Status": ["RUNNING", "CANCELED"],
            "FlowId": ["flow-1-x", "flow-2-y", "flow-0-z"],
        }
        if key == "FlowId" and draw(st.booleans()):
            prefix = draw(st.sampled_from(["flow-1", "flow-", "flow-3-x"]))
            return (f"FlowId STARTS_WITH {lit(prefix)}", lambda r: r.flow_id.startswith(prefix))
        return scalar(
            key, draw, st.sampled_from(pools[key]), key == "FlowId", lambda r: getattr(r, attr)
        )
    moments = st.integers(0, 12).map(
        lambda k: (datetime.fromtimestamp(T0, UTC) + timedelta(seconds=k)).isoformat()
    )
    attr = "started" if key == "StartTime" else "closed"
    return scalar(key, draw, moments, True, lambda r: getattr(r, attr), instant)


def queries(depth: int = 3) -> st.SearchStrategy[Query]:
    def extend(children: st.SearchStrategy[Query]) -> st.SearchStrategy[Query]:
        def combine(op: str, items: list[Query]) -> Query:
            text = f" {op} ".join(f"({t})" for t, _ in items)
            preds = [p for _, p in items]
            if op == "AND":
                return text, lambda r: all(p(r) for p in preds)
            return text, lambda r: any(p(r) for p in preds)

        def negate(item: Query) -> Query:
            text, pred = item
            return f"NOT ({text})", lambda r: not pred(r)

        return st.tuples(
            st.sampled_from(["AND", "OR", "and", "or"]), st.lists(children, min_size=2, max_size=3)
        ).map(lambda t: combine(t[0].upper(), t[1])) | children.map(negate)

    return st.recursive(predicates(), extend, max_leaves=6)


async def run_world(world: list[Run], checks: list[tuple[Query, int]]) -> None:
    clock = ManualClock(T0)
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
                clock.advance(run.started - clock.now())
                initial = {ATTRIBUTES[run.flow_type][k]: v for k, v in run.values.items()}
                result = await eng.start_flow(
                    run.flow_type, run.flow_id, options=StartFlowOptions(initial_attributes=initial)
                )
                run.run_id = result.run_id
            for run in world:
                if run.status == "CANCELED":
                    clock.advance(0.25)
                    await eng.stop_flow(run.flow_id, run_id=run.run_id)
                    run.closed = clock.now()
            expected_order = sorted(world, key=lambda r: (r.started, r.run_id), reverse=True)
            for (text, predicate), page_size in checks:
                expected = [r.run_id for r in expected_order if predicate(r)]
                page = await eng.search_flows(text, 1000)
                got = [f.run_id for f in page.flows]
                assert got == expected, text
                paged: list[str] = []
                token = ""
                while True:
                    page = await eng.search_flows(text, page_size, token)
                    paged.extend(f.run_id for f in page.flows)
                    token = page.next_page_token
                    if not token:
                        break
                assert paged == expected, (text, page_size)
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
@given(
    world=worlds(), checks=st.lists(st.tuples(queries(), st.integers(1, 4)), min_size=1, max_size=8)
)
def test_random_queries_return_exactly_what_a_reference_filter_returns(
    world: list[Run], checks: list[tuple[Query, int]]
) -> None:
    asyncio.run(run_world(world, checks))
