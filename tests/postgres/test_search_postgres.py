"""SearchFlows scenarios on PostgreSQL and SQLite: each asserts one answer for both databases.

Rows are written by the storage commit units and read with ``search_runs``. PostgreSQL's test
database has a linguistic default collation (ICU en-US, where 'a' < 'B' < 'é'), so any query
that leaned on it instead of code-point order ('B' < 'a' < 'é') would fail here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engine._storage.schema import upgrade
from tests.support.search_model import TOP
from tests.support.search_storage import close, link_parent, search_all, set_values, start

T0 = 1_800_000_000_000_000
SECOND = 1_000_000


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    new_pg_database: Callable[..., AbstractAsyncContextManager[AsyncEngine]],
) -> AsyncIterator[AsyncEngine]:
    """Yield each database in turn, empty, with dexlite's tables."""
    if request.param == "postgresql":
        async with new_pg_database(linguistic=True) as engine:
            yield engine
        return
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/search.db")
    async with engine.begin() as conn:
        await conn.run_sync(upgrade)
    try:
        yield engine
    finally:
        await engine.dispose()


async def found(db: AsyncEngine, text: str, page_size: int = 2) -> list[str]:
    """Return the Flow IDs ``text`` finds, in order, checking that paging finds the same."""
    whole, paged = await search_all(db, text, page_size)
    assert [r.run_id for r in paged] == [r.run_id for r in whole], (text, page_size)
    return [r.flow_id for r in whole]


async def check(db: AsyncEngine, cases: Mapping[str, set[str]]) -> None:
    """Assert that each query finds exactly the given Flow IDs."""
    for text, expected in cases.items():
        assert set(await found(db, text)) == expected, text


async def add(db: AsyncEngine, runs: Mapping[str, Mapping[str, Any]]) -> None:
    """Start one run per Flow ID (run ID ``run-<Flow ID>``), a second apart, with ``values``."""
    for i, (flow_id, values) in enumerate(runs.items()):
        await start(db, flow_id, f"run-{flow_id}", values, T0 + i * SECOND)


# -- FULL_TEXT ----------------------------------------------------------------------------------

TEXTS = {
    "fox": "The quick brown fox: jumps over the lazy dog!",
    "cafe": "Café-Crème at naïve.example.com, 2024 (v2)",
    "decomposed": "cafe\u0301 CRE\u0300ME",
    "compatibility": "\ufb01le ＡＢＣ №5 STRASSE",
    "web": "mail bob@example.com or see https://ex.org/a-b_c?q=1",
    "no-token": "?! -- ...",
}


async def test_full_text_matches_tokens_and_phrases_whatever_the_case_accents_or_punctuation(
    db: AsyncEngine,
) -> None:
    await add(db, {name: {"text1": text} for name, text in TEXTS.items()} | {"unset": {}})
    every_text = set(TEXTS)
    await check(
        db,
        {
            "text1 = 'quick'": {"fox"},
            "text1 = 'QUICK'": {"fox"},
            "text1 = 'qui'": set(),  # a token, not a substring
            "text1 = 'brown fox'": {"fox"},
            "text1 = 'Brown-FOX!'": {"fox"},
            "text1 = 'fox brown'": set(),  # a phrase keeps its order
            "text1 = 'quick fox'": set(),  # and its tokens are consecutive
            "text1 = 'cafe'": {"cafe", "decomposed"},
            "text1 = 'CAFÉ crème'": {"cafe", "decomposed"},
            "text1 = 'naive'": {"cafe"},
            "text1 = 'naïve.example.com'": {"cafe"},
            "text1 = 'example com'": {"cafe", "web"},
            "text1 = 'bob@example.com'": {"web"},
            "text1 = '2024'": {"cafe"},
            "text1 = 'v2'": {"cafe"},
            "text1 = 'file abc'": {"compatibility"},
            "text1 = 'No5'": {"compatibility"},
            "text1 = 'straße'": {"compatibility"},
            "text1 = 'https ex org a b c q 1'": {"web"},
            "text1 = '!!'": set(),  # no token: matches no text
            "text1 != '!!'": every_text,
            "text1 != 'cafe'": every_text - {"cafe", "decomposed"},
            "NOT text1 = 'cafe'": every_text - {"cafe", "decomposed"} | {"unset"},
            "text1 IS NULL": {"unset"},
            "text1 IS NOT NULL": every_text,
            "text1 = 'quick' OR text1 = 'bob'": {"fox", "web"},
            "text1 = 'example' AND NOT text1 = 'mail'": {"cafe"},
        },
    )


async def test_long_texts_and_long_tokens_are_matched_exactly(db: AsyncEngine) -> None:
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"  # the same first 255 characters
    astral = "\U00020000" * 700  # 2,800 bytes of UTF-8: more than a PostgreSQL lexeme holds
    many = " ".join(f"t{i}" for i in range(9000))  # positions far past PostgreSQL's 16,383
    repeated = "a b " * 400 + "c"  # a token repeated past PostgreSQL's 256 positions
    await add(
        db,
        {
            "long-a": {"text1": f"start {long_a} end"},
            "long-b": {"text1": long_b},
            "astral": {"text1": f"{astral} tail"},
            "many": {"text1": many},
            "repeated": {"text1": repeated},
        },
    )
    await check(
        db,
        {
            f"text1 = '{long_a}'": {"long-a"},
            f"text1 = '{long_b.upper()}'": {"long-b"},
            f"text1 = '{'x' * 255}'": set(),
            f"text1 = 'start {long_a} end'": {"long-a"},
            f"text1 = '{astral}'": {"astral"},
            f"text1 = '{astral[:-1]}'": set(),
            f"text1 = '{astral} tail'": {"astral"},
            "text1 = 't8998 t8999'": {"many"},
            "text1 = 't8999 t8998'": set(),
            "text1 = 'b c'": {"repeated"},
            "text1 = 'a c'": set(),
            "text1 = 'b a b a b a b a b c'": {"repeated"},
        },
    )


async def test_a_new_text_replaces_the_tokens_of_the_old_and_a_removed_one_has_none(
    db: AsyncEngine,
) -> None:
    await add(db, {"f": {"text1": "old words"}, "g": {"text1": "old words"}})
    await set_values(db, "f", "run-f", {"text1": "New Words"}, T0 + 10 * SECOND)
    await set_values(db, "g", "run-g", {"text1": None}, T0 + 10 * SECOND)
    await check(
        db,
        {
            "text1 = 'old'": set(),
            "text1 = 'new words'": {"f"},
            "text1 != 'old'": {"f"},
            "text1 IS NULL": {"g"},
        },
    )


# -- strings: code-point order ------------------------------------------------------------------

KEYWORDS = [
    "B",
    "a",
    "é",
    "école",
    "É",
    "ecole",
    "Z",
    "b",
    "a" + TOP,
    "a" + TOP + "z",
    TOP,
    TOP * 2,
]


async def test_keyword_comparisons_and_starts_with_go_by_code_point(db: AsyncEngine) -> None:
    await add(
        db,
        {f"k{i}": {"keyword1": k, "keywordList1": ["tag", k]} for i, k in enumerate(KEYWORDS)},
    )

    def having(predicate: Any) -> set[str]:
        return {f"k{i}" for i, k in enumerate(KEYWORDS) if predicate(k)}

    cases: dict[str, set[str]] = {
        "keyword1 < 'a'": having(lambda k: k in ("B", "Z")),
        "keyword1 BETWEEN 'B' AND 'a'": having(lambda k: k in ("B", "Z", "a")),
        "keyword1 > 'b'": having(lambda k: k in ("é", "école", "É", "ecole", TOP, TOP * 2)),
        "keyword1 >= 'É' AND keyword1 < 'é'": having(lambda k: k == "É"),
        "keyword1 = 'e'": set(),
    }
    for prefix in ["", "a", "é", "É", "e", "B", "a" + TOP, TOP, TOP * 2, "z"]:
        cases[f"keyword1 STARTS_WITH '{prefix}'"] = having(lambda k, p=prefix: k.startswith(p))
        cases[f"keywordList1 STARTS_WITH '{prefix}'"] = having(
            lambda k, p=prefix: k.startswith(p) or "tag".startswith(p)
        )
    await check(db, cases)
    # As a system field too: a Flow ID range and prefix.
    await check(db, {"FlowId STARTS_WITH 'k1' AND FlowId < 'k10'": {"k1"}})


ORDERED = ["B", "Z", "a", "b", "É", "é"]  # code-point order


async def test_order_by_string_system_fields_is_code_point_order_on_every_page(
    db: AsyncEngine,
) -> None:
    # Run IDs, Flow types, statuses and parents all in mixed case and beyond ASCII.
    flow_ids = ["é", "a", "Z", "É", "b", "B"]
    for i, flow_id in enumerate(flow_ids):
        await start(db, flow_id, f"{flow_id}-run", {}, T0 + i * SECOND, flow_type=ORDERED[-1 - i])
        if i % 2 == 0:
            await link_parent(db, f"{flow_id}-run", f"parent-{ORDERED[i]}", f"{ORDERED[i]}-p")
    await close(db, "a", "a-run", T0 + 10 * SECOND, "CANCELED")
    await close(db, "É", "É-run", T0 + 9 * SECOND, "TERMINATED")
    for page_size in (1, 2, 4):
        assert await found(db, "ORDER BY FlowId", page_size) == ORDERED
        assert await found(db, "ORDER BY FlowId DESC", page_size) == ORDERED[::-1]
        assert await found(db, "ORDER BY RunId ASC", page_size) == ORDERED
        assert await found(db, "ORDER BY FlowType", page_size) == ["B", "b", "É", "Z", "a", "é"]
        assert await found(db, "ORDER BY Status, FlowId DESC", page_size) == [
            "a",
            "é",
            "b",
            "Z",
            "B",
            "É",
        ]
        # Without a parent sorts as '' (first); the parents are parent-B, parent-a, parent-É.
        assert await found(db, "ORDER BY ParentFlowId, FlowId", page_size) == [
            "B",
            "a",
            "É",
            "é",
            "Z",
            "b",
        ]
        assert await found(db, "ORDER BY ParentRunId DESC, StartTime", page_size) == [
            "b",
            "Z",
            "é",
            "a",
            "É",
            "B",
        ]
        # Open runs close at the end of time; ties go by RunId, descending.
        assert await found(db, "ORDER BY CloseTime", page_size) == ["É", "a", "é", "b", "Z", "B"]
        assert await found(db, "FlowId > 'Z' ORDER BY StartTime", page_size) == [
            "é",
            "a",
            "É",
            "b",
        ]


async def test_runs_started_at_the_same_instant_page_by_run_id(db: AsyncEngine) -> None:
    run_ids = ["r-B", "r-a", "r-é", "r-A", "r-b"]
    for run_id in run_ids:
        await start(db, run_id.upper() + run_id, run_id, {}, T0)
    for page_size in (1, 2, 3):
        whole, paged = await search_all(db, "", page_size)
        assert [r.run_id for r in paged] == sorted(run_ids, reverse=True)
        assert [r.run_id for r in whole] == sorted(run_ids, reverse=True)
