"""SearchFlows and GetAttributes latency at 100,000 and at 1,000,000 Flows (10,000 and
100,000 with --quick), with the query plan of every statement behind them.

How the database is filled: a base of Flows (5,000; 2,000 with --quick) is started through
the engine API (``start_flow`` with initial indexed Attributes, many at once so the single
writer batches them into group commits); that seed rate is printed. ``start_flow`` is far too
slow to reach a million in the time ``make bench`` has (a few hundred Flows per second here),
so the rest are bulk copies of the base's rows through the engine's own storage tables
(``bench._search_grow``: the rows ``start_flow`` wrote, with a new Flow ID, run ID, times and
values for each copy), made while the Engine is closed. After each growth the Engine is
reopened (its start, which resumes every open run, is timed) and checked: its open-run count
is every Flow, a search pages through every match of one keyword, and reads of copied Flows
return their values. ``python -m bench.search --engine-seed 100000`` starts more (or all) of
them through the engine instead.

Then, in process and one call at a time, p50/p99 of:

- a KEYWORD equality scoped to the Flow type, page of 100,
- an INT range (BETWEEN), page of 100, and its second page by token,
- GetAttributes of two Attributes of a random Flow.

Every query matches the same number of Flows at both sizes (1,000; 100 with --quick): a
keyword value belongs to one generation of the small size's Flows, and the INT range is that
wide. So the large/small ratio shows how the lookups scale with the table, not how a growing
answer grows. Figures are engine-API latencies (no HTTP). ``EXPLAIN QUERY PLAN`` of the SQL
each call ran (captured from SQLAlchemy as executed, parameters included) is printed and saved
at both sizes; a SCAN of a table, rather than a SEARCH of an index, is called out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine as SAEngine

import engine
from bench._common import heading, latency_summary, ratio, temp_dir
from bench._search_grow import FLOW_TYPE, KEYWORDS, attributes, flow_id, grow, keyword
from engine import Attribute, AttributeIndex, Flow, IndexType, StartFlowOptions, StepList

CONCURRENT_STARTS = 1024
PAGE = 100
#: The kinds of call measured, in order: key -> label.
KINDS = {
    "keyword_equality": "KEYWORD equality (FlowType-scoped)",
    "int_range": "INT range (BETWEEN)",
    "int_range_second_page": "INT range, second page by token",
    "get_attributes": "GetAttributes (2 Attributes)",
}
#: Tables whose SCAN in a plan means the statement reads them whole (or in index order).
BIG_TABLES = ("runs", "flows", "attributes", "search_values", "history")


class SearchBenchFlow(Flow[None]):
    """An RPC-only Flow with a KEYWORD and an INT index."""

    status: Attribute[str] = Attribute(
        "status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1")
    )
    amount: Attribute[int] = Attribute("amount", int, index=AttributeIndex(IndexType.INT, "int1"))
    note: Attribute[str] = Attribute("note", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


def _sizes(quick: bool, engine_seed: int | None = None) -> dict[str, Any]:
    if quick:
        sizes = {"base": 2_000, "small": 10_000, "large": 100_000, "calls": 100}
    else:
        sizes = {"base": 5_000, "small": 100_000, "large": 1_000_000, "calls": 120}
    if engine_seed is not None:
        sizes["base"] = max(1, min(engine_seed, sizes["small"]))
    return sizes


def label(count: int) -> str:
    """Return ``count`` as the ratio names spell it: 10k, 100k, 1m."""
    if count % 1_000_000 == 0:
        return f"{count // 1_000_000}m"
    if count % 1_000 == 0:
        return f"{count // 1_000}k"
    return str(count)


def _config(path: Path) -> engine.EngineConfig:
    return engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{path}",
        blob_dir=str(path.parent / "blobs"),
        sqlite_synchronous="NORMAL",
    )


def _registry() -> engine.Registry:
    return engine.Registry([SearchBenchFlow()])


async def _seed(path: Path, count: int, generation: int) -> float:
    """Start Flows 0 .. count - 1 through the engine; return the seconds it took."""
    async with engine.Engine(_registry(), _config(path)) as eng:
        began = time.perf_counter()
        for first in range(0, count, CONCURRENT_STARTS):
            batch = range(first, min(first + CONCURRENT_STARTS, count))
            await asyncio.gather(
                *[
                    eng.start_flow(
                        SearchBenchFlow,
                        flow_id(i),
                        options=StartFlowOptions(initial_attributes=attributes(i, generation)),
                    )
                    for i in batch
                ]
            )
        return time.perf_counter() - began


# -- statements and plans ---------------------------------------------------------------------


@contextlib.contextmanager
def _captured() -> Iterator[list[tuple[str, Any]]]:
    """Collect every statement SQLAlchemy sends to the database while the block runs."""
    seen: list[tuple[str, Any]] = []

    def record(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        seen.append((statement, params))

    # Prepared statements (engine/_storage/prepared.py) announce themselves to it too.
    event.listen(SAEngine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(SAEngine, "before_cursor_execute", record)


def _plan(db: sqlite3.Connection, statement: str, params: Any) -> list[str]:
    """Return SQLite's EXPLAIN QUERY PLAN of ``statement`` as indented lines."""
    rows = db.execute(f"EXPLAIN QUERY PLAN {statement}", params or ()).fetchall()
    depth: dict[int, int] = {0: -1}
    lines = []
    for node, parent, _unused, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return lines


def _scans(lines: list[str]) -> list[str]:
    """Return the plan lines that SCAN one of the big tables (not a SEARCH by index)."""
    found = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "SCAN" and words[1] in BIG_TABLES:
            found.append(line.strip())
    return found


def _explain(path: Path, statements: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """EXPLAIN every SELECT of one call, on a read-only connection to the same file."""
    out = []
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        for statement, params in statements:
            if not statement.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            lines = _plan(db, statement, params)
            out.append({"sql": " ".join(statement.split()), "plan": lines, "scans": _scans(lines)})
    return out


# -- one size ---------------------------------------------------------------------------------


async def _timed(calls: int, call: Callable[[], Awaitable[float | None]]) -> list[float]:
    """Run ``call`` ``calls`` times; a call returning a duration is timed by itself."""
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        own = await call()
        samples.append(own if own is not None else time.perf_counter() - began)
    return samples


async def _check(eng: engine.Engine, count: int, generation: int) -> dict[str, Any]:
    """Check that the engine sees every Flow: open runs, one keyword's matches, reads."""
    stats = await eng.stats()
    open_runs = stats.open_runs.get(FLOW_TYPE, 0)
    last = count - 1
    value = keyword(last, generation)
    seen: set[str] = set()
    token = ""
    while True:
        page = await eng.search_flows(f"keyword1 = '{value}'", PAGE, token)
        seen.update(f.flow_id for f in page.flows)
        token = page.next_page_token
        if not token:
            break
    wanted = {
        flow_id(n)
        for n in range(last - last % generation, min(count, last - last % generation + generation))
        if keyword(n, generation) == value
    }
    reads_ok = True
    for n in (0, count // 2, last):
        got = await eng.get_attributes(flow_id(n), ["status", "amount", "note"])
        reads_ok = reads_ok and got.values == attributes(n, generation)
    return {
        "open_runs": open_runs,
        "keyword": value,
        "keyword_matches": len(seen),
        "keyword_matches_expected": len(wanted),
        "reads_ok": reads_ok,
        "ok": open_runs == count and seen == wanted and reads_ok,
    }


async def _measure(path: Path, count: int, sizes: dict[str, Any]) -> dict[str, Any]:
    """Open the Engine on ``count`` Flows, check it, time every kind of call, EXPLAIN them."""
    rng = random.Random(count)
    generation = sizes["small"]
    matches = generation // KEYWORDS
    began = time.perf_counter()
    async with engine.Engine(_registry(), _config(path)) as eng:
        opened = time.perf_counter() - began
        checks = await _check(eng, count, generation)

        async def keyword_equality() -> None:
            n = rng.randrange(count)
            page = await eng.search_flows(
                f"FlowType = '{FLOW_TYPE}' AND keyword1 = '{keyword(n, generation)}'", PAGE
            )
            assert len(page.flows) == min(PAGE, matches)

        async def int_range() -> None:
            low = rng.randrange(count - matches + 1)
            page = await eng.search_flows(f"int1 BETWEEN {low} AND {low + matches - 1}", PAGE)
            assert len(page.flows) == min(PAGE, matches)

        async def int_range_second_page() -> float:
            low = rng.randrange(count - matches + 1)
            query = f"int1 >= {low} AND int1 < {low + matches}"
            first = await eng.search_flows(query, PAGE)
            began = time.perf_counter()
            await eng.search_flows(query, PAGE, first.next_page_token)
            return time.perf_counter() - began

        async def get_attributes() -> None:
            n = rng.randrange(count)
            values = await eng.get_attributes(flow_id(n), ["status", "amount"])
            assert values.values["amount"] == n

        calls: dict[str, Callable[[], Awaitable[float | None]]] = {
            "keyword_equality": keyword_equality,
            "int_range": int_range,
            "int_range_second_page": int_range_second_page,
            "get_attributes": get_attributes,
        }
        figures: dict[str, Any] = {}
        plans: dict[str, Any] = {}
        for kind, call in calls.items():
            await _timed(5, call)  # warm-up
            figures[kind] = latency_summary(await _timed(sizes["calls"], call))
            for _attempt in range(5):
                # A read the engine answers from its copy of committed state runs no SQL: take
                # another (random) Flow until one reads the database.
                with _captured() as statements:
                    await call()
                if kind == "int_range_second_page":
                    statements = statements[len(statements) // 2 :]  # the second page's only
                plans[kind] = _explain(path, statements)
                if plans[kind]:
                    break
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return {
        "flows": count,
        "engine_start_seconds": round(opened, 1),
        "database_mb": round(size / 1e6, 1),
        "matches_per_query": matches,
        "checks": checks,
        **figures,
        "plans": plans,
    }


async def _run(sizes: dict[str, Any]) -> dict[str, Any]:
    base, small, large = sizes["base"], sizes["small"], sizes["large"]
    out: dict[str, Any] = {"sizes": sizes}
    with temp_dir("search") as tmp:
        path = tmp / "search.db"
        seed_s = await _seed(path, base, small)
        out["seed_seconds"] = round(seed_s, 1)
        out["seed_flows_per_second"] = round(base / seed_s)
        print(
            f"  seeded {base:,} Flows through start_flow in {seed_s:.1f} s "
            f"({base / seed_s:,.0f}/s, {CONCURRENT_STARTS} at a time)",
            flush=True,
        )
        out["grow"] = {}
        out["by_size"] = {}
        have = base
        for count in (small, large):
            if count > have:
                grown = grow(path, base, have, count, small)
                out["grow"][label(count)] = grown
                print(
                    f"  grew to {count:,} Flows by copying the base's rows in "
                    f"{grown['seconds']:.1f} s ({grown['flows'] / grown['seconds']:,.0f}/s)",
                    flush=True,
                )
                have = count
            out["by_size"][label(count)] = await _measure(path, count, sizes)
    return out


def _print_plans(result: dict[str, Any]) -> None:
    """Print each call's plans; once for both sizes when they are the same."""
    sizes = list(result["by_size"].items())
    plans = [{k: [e["plan"] for e in v] for k, v in at["plans"].items()} for _, at in sizes]
    shown = sizes[:1] if all(p == plans[0] for p in plans) else sizes
    for size, at in shown:
        where = " and ".join(s for s, _ in sizes) if len(shown) == 1 else size
        print(f"  EXPLAIN QUERY PLAN of the SQL each call ran, at {where} Flows:")
        for kind, statements in at["plans"].items():
            for i, explained in enumerate(statements):
                suffix = f" (statement {i + 1} of {len(statements)})" if len(statements) > 1 else ""
                print(f"    {KINDS[kind]}{suffix}:")
                for line in explained["plan"]:
                    print(f"      {line}")


def main(quick: bool, engine_seed: int | None = None) -> dict[str, Any]:
    """Run the scenario, print its block and return its figures."""
    sizes = _sizes(quick, engine_seed)
    small, large = sizes["small"], sizes["large"]
    heading(f"search: SearchFlows and GetAttributes at {small:,} and {large:,} Flows")
    result = asyncio.run(_run(sizes))
    at_small, at_large = result["by_size"][label(small)], result["by_size"][label(large)]
    name = f"search_p50_{label(large)}_over_{label(small)}"
    result["ratio_name"] = name
    result["ratios"] = {
        name: {kind: ratio(at_large[kind]["p50_ms"], at_small[kind]["p50_ms"]) for kind in KINDS}
    }
    scans = {
        size: sorted({s for st in at["plans"].values() for e in st for s in e["scans"]})
        for size, at in result["by_size"].items()
    }
    result["scans"] = scans
    result["checks_ok"] = all(at["checks"]["ok"] for at in result["by_size"].values())

    print(
        f"  each query matches {at_small['matches_per_query']:,} Flows at both sizes; pages of "
        f"{PAGE}; {sizes['calls']} sequential calls each, in process"
    )
    print(f"  {'':36}{small:>12,} Flows{large:>18,} Flows{'p50 ratio':>12}")
    print(f"  {'':36}{'p50 ms':>9}{'p99 ms':>9}{'p50 ms':>11}{'p99 ms':>9}")
    for kind, title in KINDS.items():
        a, b = at_small[kind], at_large[kind]
        print(
            f"  {title:36}{a['p50_ms']:>9.2f}{a['p99_ms']:>9.2f}{b['p50_ms']:>11.2f}"
            f"{b['p99_ms']:>9.2f}{result['ratios'][name][kind]:>11.2f}x"
        )
    for at in (at_small, at_large):
        c = at["checks"]
        print(
            f"  at {at['flows']:,}: engine start {at['engine_start_seconds']} s, database "
            f"{at['database_mb']:,} MB; engine sees {c['open_runs']:,} open Flows, "
            f"{c['keyword_matches']:,}/{c['keyword_matches_expected']:,} matches of "
            f"{c['keyword']!r}, reads {'ok' if c['reads_ok'] else 'WRONG'}: "
            f"{'ok' if c['ok'] else 'FAILED'}"
        )
    _print_plans(result)
    for size, found in scans.items():
        print(f"  table scans at {size}: {'; '.join(found) if found else 'none (indexes only)'}")
    print(
        f"  ratios ({name}, same run): "
        + ", ".join(f"{k} {v:.2f}x" for k, v in result["ratios"][name].items())
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 and 100,000 Flows")
    parser.add_argument(
        "--engine-seed",
        type=int,
        metavar="N",
        help="start this many Flows through start_flow (at most the small size)",
    )
    args = parser.parse_args()
    main(args.quick, args.engine_seed)
