"""A model of SearchFlows for property tests: random runs, random queries with ORDER BY, and the
Python reference filter and order that say what every database must return.

The engine's SQLite test and the storage-level PostgreSQL test draw from the same strategies and
check against the same reference. The reference knows nothing of the implementation: FULL_TEXT
values are built from a small vocabulary whose spellings (case, accents, ligatures, decomposed
accents) are listed by hand with the token they fold to, and strings compare by code point
because Python's do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from engine import IndexType

SECOND = 1_000_000
T0 = 1_800_000_000 * SECOND  # microseconds
INT64_MAX = 2**63 - 1
TOP = "\U0010ffff"  # the largest code point: STARTS_WITH has no successor string for it
KEYWORDS = ["a", "b", "ab", "B", "ba", "", "a'b", "é", "É", "z", "a" + TOP, TOP, TOP + "b"]
PREFIXES = ["", "a", "b", "ab", "é", "É", "a" + TOP, TOP]
DOUBLES = [-1.5, 0.0, 0.5, 1.0, 2.25]
INTS = [-(2**63), -3, -1, 0, 1, 2, 3, 2**63 - 1]
MOMENTS = [
    "2025-01-01T10:00:00+02:00",
    "2025-01-01T08:30:00Z",
    "2025-01-01T09:00:00",
    "2024-12-31T23:00:00-01:00",
]
FLOW_SUFFIXES = ["x", "Y", "é"]
PARENTS = ["parent-a", "parent-B", "parent-é"]
# Each FULL_TEXT token and the ways a text may spell it.
VOCABULARY: dict[str, tuple[str, ...]] = {
    "alpha": ("alpha", "ALPHA", "Alpha"),
    "cafe": ("café", "CAFÉ", "Cafe", "cafe\u0301"),
    "naive": ("naïve", "NAÏVE", "naive"),
    "uber": ("über", "Über", "UBER"),
    "strasse": ("straße", "STRASSE"),
    "file": ("\ufb01le", "FILE"),
    "x1": ("x1", "X1"),
    "2024": ("2024",),
}
#: Tokens only queries use, so that some phrases match nothing.
ABSENT: dict[str, tuple[str, ...]] = {"omega": ("omega", "OMEGA")}
SEPARATORS = [" ", ", ", " - ", "-", "! ", "/", "_", "@", "."]
SPELLING = {
    spelled: token for token, spellings in (VOCABULARY | ABSENT).items() for spelled in spellings
}

KEY_TYPES: dict[str, IndexType] = {
    "keyword1": IndexType.KEYWORD,
    "int1": IndexType.INT,
    "double1": IndexType.DOUBLE,
    "bool1": IndexType.BOOL,
    "keywordList1": IndexType.KEYWORD_ARRAY,
    "text1": IndexType.FULL_TEXT,
    "datetime1": IndexType.DATETIME,
}
KEYS_BY_FLOW_TYPE = {"PropA": tuple(KEY_TYPES), "PropB": ("keyword1", "int1")}


def reference_tokens(text: str) -> list[str]:
    """Return the tokens of a text made of VOCABULARY spellings and SEPARATORS."""
    return [SPELLING[word] for word in re.split(r"[\s,!?/_@.-]+", text) if word]


def respell(
    draw: st.DrawFn, words: list[str], vocabulary: dict[str, tuple[str, ...]] = VOCABULARY
) -> str:
    """Write tokens with any of their spellings, between any separators."""
    spelled = [draw(st.sampled_from(vocabulary[w])) for w in words]
    glue = [draw(st.sampled_from(SEPARATORS)) for _ in spelled[1:]]
    return spelled[0] + "".join(g + s for g, s in zip(glue, spelled[1:], strict=True))


@st.composite
def texts(
    draw: st.DrawFn,
    vocabulary: dict[str, tuple[str, ...]] = VOCABULARY,
    min_size: int = 0,
    max_size: int = 5,
) -> str:
    """A FULL_TEXT value: spellings of vocabulary tokens between separators (or no token)."""
    # Mostly the first three tokens, so that a query's tokens are often all in a text, in
    # order or not: "contains the phrase" must then be told from "contains the tokens".
    pool = [w for i, w in enumerate(vocabulary) for _ in range(4 if i < 3 else 1)]
    words = draw(st.lists(st.sampled_from(pool), min_size=min_size, max_size=max_size))
    if not words:
        return draw(st.sampled_from(["?!", "--", " "]))
    return respell(draw, words, vocabulary)


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "keyword1": st.sampled_from(KEYWORDS),
    "int1": st.sampled_from(INTS),
    "double1": st.sampled_from(DOUBLES),
    "bool1": st.booleans(),
    "keywordList1": st.lists(st.sampled_from(KEYWORDS), max_size=3),
    "text1": texts(),
    "datetime1": st.sampled_from(MOMENTS),
}


@dataclass
class Run:
    """One run of the model: what is stored, and what the reference compares."""

    flow_id: str
    flow_type: str
    values: dict[str, Any]
    started: int  # microseconds
    closed: int | None = None
    status: str = "RUNNING"
    run_id: str = ""
    parent_flow_id: str | None = None
    parent_run_id: str | None = None
    #: Storage worlds: the values at the start, then what a later write changed (None removes
    #: the key); ``values`` is the result of both.
    initial: dict[str, Any] = field(default_factory=dict)
    updates: dict[str, Any] = field(default_factory=dict)


@st.composite
def worlds(draw: st.DrawFn, *, storage: bool = False) -> list[Run]:
    """Up to 10 runs. ``storage``: runs the storage tests write directly, so they also get
    chosen run IDs, tied start times, SubFlow parents and later updates of their values."""
    runs = []
    for i in range(draw(st.integers(1, 10))):
        flow_type = draw(st.sampled_from(list(KEYS_BY_FLOW_TYPE)))
        values = {}
        for key in KEYS_BY_FLOW_TYPE[flow_type]:
            if draw(st.booleans()):
                values[key] = draw(VALUES[key])
        run = Run(
            f"flow-{i}-{draw(st.sampled_from(FLOW_SUFFIXES))}",
            flow_type,
            values,
            T0 + (draw(st.integers(0, 3)) if storage else i + 1) * SECOND,
            status=draw(st.sampled_from(["RUNNING", "RUNNING", "CANCELED"])),
        )
        if storage:
            run.run_id = f"{draw(st.sampled_from(['R', 'r', 'é', 'Z']))}-run-{i}"
            if draw(st.booleans()):
                run.parent_flow_id = draw(st.sampled_from(PARENTS))
                run.parent_run_id = draw(st.sampled_from(["P", "p", "é"])) + "-parent-run"
            run.initial = dict(values)
            for key in KEYS_BY_FLOW_TYPE[flow_type]:
                if draw(st.integers(0, 4)) == 0:
                    value = draw(st.none() | VALUES[key])
                    run.updates[key] = value
                    if value is None:
                        run.values.pop(key, None)
                    else:
                        run.values[key] = value
            if run.status != "RUNNING":
                run.closed = run.started + draw(st.integers(1, 4)) * SECOND // 4
        runs.append(run)
    return runs


# -- queries: (text, reference predicate over a Run) ---------------------------------------------

Query = tuple[str, Callable[[Run], bool]]


def lit(value: Any) -> str:
    """Return ``value`` written as a query literal."""
    if isinstance(value, bool):
        return "TRUE" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def instant(value: str | int) -> datetime:
    """Return the instant of an ISO-8601 string (no offset = UTC) or of microseconds."""
    if isinstance(value, int):
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value)
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


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
    get: Callable[[Run], Any],
    convert: Callable[[Any], Any] = lambda v: v,
) -> Query:
    """A comparison, IN, BETWEEN or IS NULL on a one-valued field."""
    ops = ["=", "!="] + (["<", "<=", ">", ">="] if ordered else [])
    kind = draw(
        st.sampled_from(["cmp", "in", "between", "null"] if ordered else ["cmp", "in", "null"])
    )
    if kind == "cmp":
        op, value = draw(st.sampled_from(ops)), draw(pool)
        shown = "<>" if op == "!=" and draw(st.booleans()) else op
        return (
            f"{key} {shown} {lit(value)}",
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


def keyword(key: str, draw: st.DrawFn, pool: list[str], get: Callable[[Run], Any]) -> Query:
    """A KEYWORD predicate: STARTS_WITH, or any scalar one."""
    if draw(st.booleans()):
        prefix = draw(st.sampled_from(PREFIXES if key == "keyword1" else ["", *pool]))
        return (
            f"{key} STARTS_WITH {lit(prefix)}",
            lambda r: get(r) is not None and get(r).startswith(prefix),
        )
    return scalar(key, draw, st.sampled_from(pool), True, get)


def keyword_array(draw: st.DrawFn) -> Query:
    """A KEYWORD_ARRAY predicate: any element matches (``!=``/NOT IN: set, and none does)."""

    def items(r: Run) -> list[str] | None:
        value: list[str] | None = r.values.get("keywordList1")
        return value

    kind = draw(st.sampled_from(["=", "!=", "in", "not in", "starts", "null"]))
    if kind in ("=", "!="):
        value = draw(st.sampled_from(KEYWORDS))
        return (
            f"keywordList1 {kind} {lit(value)}",
            lambda r: (v := items(r)) is not None and ((value in v) == (kind == "=")),
        )
    if kind in ("in", "not in"):
        values = draw(st.lists(st.sampled_from(KEYWORDS), min_size=1, max_size=3))
        text = f"keywordList1 {kind.upper()} ({', '.join(lit(v) for v in values)})"
        return (
            text,
            lambda r: (
                (v := items(r)) is not None and (any(x in values for x in v) == (kind == "in"))
            ),
        )
    if kind == "starts":
        prefix = draw(st.sampled_from(PREFIXES))
        return (
            f"keywordList1 STARTS_WITH {lit(prefix)}",
            lambda r: (v := items(r)) is not None and any(x.startswith(prefix) for x in v),
        )
    negated = draw(st.booleans())
    return (
        f"keywordList1 IS {'NOT ' if negated else ''}NULL",
        lambda r: (items(r) is None) != negated,
    )


def full_text(draw: st.DrawFn, world: list[Run]) -> Query:
    """A FULL_TEXT predicate: the query's tokens appear consecutively among the text's."""
    kind = draw(st.sampled_from(["=", "=", "!=", "null"]))
    if kind == "null":
        negated = draw(st.booleans())
        return (
            f"text1 IS {'NOT ' if negated else ''}NULL",
            lambda r: (r.values.get("text1") is None) != negated,
        )
    stored = [reference_tokens(r.values["text1"]) for r in world if "text1" in r.values]
    stored = [tokens for tokens in stored if tokens]
    if stored and draw(st.booleans()):
        # A phrase from a stored text, respelled, and sometimes reordered or cut short.
        have = draw(st.sampled_from(stored))
        start = draw(st.integers(0, len(have) - 1))
        words = have[start : start + draw(st.integers(1, 3))]
        words = draw(st.sampled_from([words, words[::-1], words[:1] + words[2:]]))
        shown = respell(draw, words)
    else:
        common = dict(list(VOCABULARY.items())[:3])
        shown = draw(texts(VOCABULARY | ABSENT, 0, 3) | texts(common, 2, 3))
    wanted = reference_tokens(shown)

    def contains(r: Run) -> bool:
        have = reference_tokens(r.values["text1"])
        n = len(wanted)
        return n > 0 and any(have[i : i + n] == wanted for i in range(len(have) - n + 1))

    return (
        f"text1 {kind} {lit(shown)}",
        lambda r: r.values.get("text1") is not None and (contains(r) == (kind == "=")),
    )


@st.composite
def predicates(draw: st.DrawFn, world: list[Run]) -> Query:
    """One predicate on an index key or a system field (phrases come from ``world``'s texts)."""
    key = draw(
        st.sampled_from(
            [
                *KEY_TYPES,
                "text1",  # three times: phrases have the most cases
                "text1",
                "FlowType",
                "FlowId",
                "Status",
                "StartTime",
                "CloseTime",
                "ParentFlowId",
            ]
        )
    )

    def value_of(r: Run) -> Any:
        return r.values.get(key)

    if key == "keyword1":
        return keyword(key, draw, KEYWORDS, value_of)
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
        return keyword_array(draw)
    if key == "text1":
        return full_text(draw, world)
    if key == "FlowType":
        return scalar(key, draw, st.sampled_from(["PropA", "PropB"]), False, lambda r: r.flow_type)
    if key == "Status":
        return scalar(
            key, draw, st.sampled_from(["RUNNING", "CANCELED"]), False, lambda r: r.status
        )
    if key == "FlowId":
        ids = [f"flow-{i}-{s}" for i in (0, 1, 2) for s in FLOW_SUFFIXES]
        return keyword(key, draw, [*ids, "flow-", "flow-1", "flow-Z"], lambda r: r.flow_id)
    if key == "ParentFlowId":
        return keyword(key, draw, [*PARENTS, "parent-", "Parent"], lambda r: r.parent_flow_id)
    moments = st.integers(-2, 56).map(lambda k: instant(T0 + k * SECOND // 4).isoformat())
    attr = "started" if key == "StartTime" else "closed"
    return scalar(key, draw, moments, True, lambda r: getattr(r, attr), instant)


def filters(world: list[Run]) -> st.SearchStrategy[Query]:
    """Predicates combined with AND, OR and NOT, up to six leaves."""

    def extend(children: st.SearchStrategy[Query]) -> st.SearchStrategy[Query]:
        def combine(op: str, items: list[Query]) -> Query:
            text = f" {op} ".join(f"({t})" for t, _ in items)
            preds = [p for _, p in items]
            if op.upper() == "AND":
                return text, lambda r: all(p(r) for p in preds)
            return text, lambda r: any(p(r) for p in preds)

        def negate(item: Query) -> Query:
            text, pred = item
            return f"NOT ({text})", lambda r: not pred(r)

        return st.tuples(
            st.sampled_from(["AND", "OR", "and", "or"]), st.lists(children, min_size=2, max_size=3)
        ).map(lambda t: combine(*t)) | children.map(negate)

    return st.recursive(predicates(world), extend, max_leaves=6)


ORDER_FIELDS = [
    "FlowType",
    "FlowId",
    "RunId",
    "Status",
    "StartTime",
    "CloseTime",
    "ParentFlowId",
    "ParentRunId",
]


@dataclass(frozen=True)
class SearchCase:
    """A query's text, its reference predicate and its ORDER BY ((field, descending), ...)."""

    text: str
    predicate: Callable[[Run], bool]
    order: tuple[tuple[str, bool], ...]


@st.composite
def queries(draw: st.DrawFn, world: list[Run]) -> SearchCase:
    """A filter (or, now and then, none) with an optional ORDER BY of up to two system fields."""
    everything: Query = ("", lambda r: True)
    with_filter = draw(st.sampled_from([True] * 9 + [False]))
    text, predicate = draw(filters(world)) if with_filter else everything
    fields = draw(st.lists(st.sampled_from(ORDER_FIELDS), max_size=2, unique=True))
    order = tuple((f, draw(st.booleans())) for f in fields)
    shown = [f + (" DESC" if d else draw(st.sampled_from(["", " ASC", " asc"]))) for f, d in order]
    if shown:
        text = f"{text} ORDER BY {', '.join(shown)}".strip()
    return SearchCase(text, predicate, order)


@st.composite
def scenarios(
    draw: st.DrawFn, *, storage: bool = False
) -> tuple[list[Run], list[tuple[SearchCase, int]]]:
    """A world (see :func:`worlds`) and up to eight queries on it, each with a page size."""
    world = draw(worlds(storage=storage))
    checks = draw(st.lists(st.tuples(queries(world), st.integers(1, 4)), min_size=1, max_size=8))
    return world, checks


def sort_key(run: Run, name: str) -> Any:
    """The value ``ORDER BY name`` sorts ``run`` by (open runs close at the end of time; a run
    without a parent sorts as the empty string)."""
    return {
        "FlowType": run.flow_type,
        "FlowId": run.flow_id,
        "RunId": run.run_id,
        "Status": run.status,
        "StartTime": run.started,
        "CloseTime": INT64_MAX if run.closed is None else run.closed,
        "ParentFlowId": run.parent_flow_id or "",
        "ParentRunId": run.parent_run_id or "",
    }[name]


def expected_runs(world: list[Run], case: SearchCase) -> list[str]:
    """Return the run IDs ``case`` must return, in order: its ORDER BY (StartTime descending by
    default), then RunId descending."""
    order = list(case.order) or [("StartTime", True)]
    if "RunId" not in {name for name, _ in order}:
        order.append(("RunId", True))
    runs = [r for r in world if case.predicate(r)]
    for name, descending in reversed(order):  # stable sorts, least significant key first
        runs.sort(key=lambda r: sort_key(r, name), reverse=descending)
    return [r.run_id for r in runs]
