"""SearchFlows and GetAttributes latency at 100,000 Flows (10,000 with --quick).

Seeds Flows through the engine API (``start_flow`` with initial indexed Attributes, many at
once so the single writer batches them into group commits) and reports how long that took.
Then, in process and one call at a time, measures p50/p99 of:

- a KEYWORD equality scoped to the Flow type (1% of the Flows match; a page of 100),
- an INT range (1% of the Flows match; a page of 100), and its second page by token,
- GetAttributes of two Attributes of a random Flow.

Figures are engine-API latencies (no HTTP); the HTTP overhead is the RPC scenario's subject.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import engine
from bench._common import heading, latency_summary, temp_dir
from engine import Attribute, AttributeIndex, Flow, IndexType, StartFlowOptions, StepList

KEYWORDS = 100  # distinct keyword1 values: each matches 1% of the Flows
CONCURRENT_STARTS = 1024


class SearchBenchFlow(Flow[None]):
    """An RPC-only Flow with a KEYWORD and an INT index."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    amount = Attribute("amount", int, index=AttributeIndex(IndexType.INT, "int1"))
    note = Attribute("note", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


async def _seed(eng: engine.Engine, count: int) -> float:
    began = time.perf_counter()
    for first in range(0, count, CONCURRENT_STARTS):
        batch = range(first, min(first + CONCURRENT_STARTS, count))
        await asyncio.gather(
            *[
                eng.start_flow(
                    SearchBenchFlow,
                    f"flow-{i:07}",
                    options=StartFlowOptions(
                        initial_attributes={
                            "status": f"s{i % KEYWORDS}",
                            "amount": i,
                            "note": f"not indexed {i}",
                        }
                    ),
                )
                for i in batch
            ]
        )
    return time.perf_counter() - began


async def _time(calls: int, call: Any) -> list[float]:
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - began)
    return samples


async def _run(count: int, calls: int) -> dict[str, Any]:
    rng = random.Random(7)
    with temp_dir("search") as tmp:
        config = engine.EngineConfig(
            database_url=f"sqlite+aiosqlite:///{tmp}/search.db",
            blob_dir=str(tmp / "blobs"),
            sqlite_synchronous="NORMAL",
        )
        async with engine.Engine(engine.Registry([SearchBenchFlow()]), config) as eng:
            seed_seconds = await _seed(eng, count)
            span = count // KEYWORDS

            async def keyword() -> None:
                k = rng.randrange(KEYWORDS)
                page = await eng.search_flows(
                    f"FlowType = 'SearchBenchFlow' AND keyword1 = 's{k}'", 100
                )
                assert len(page.flows) == min(100, span)

            async def int_range() -> None:
                low = rng.randrange(count - span + 1)
                page = await eng.search_flows(f"int1 BETWEEN {low} AND {low + span - 1}", 100)
                assert len(page.flows) == min(100, span)

            async def int_range_second_page() -> None:
                low = rng.randrange(count - span + 1)
                query = f"int1 >= {low} AND int1 < {low + span}"
                first = await eng.search_flows(query, 100)
                began = time.perf_counter()
                await eng.search_flows(query, 100, first.next_page_token)
                second_page.append(time.perf_counter() - began)

            async def get_attributes() -> None:
                i = rng.randrange(count)
                values = await eng.get_attributes(f"flow-{i:07}", ["status", "amount"])
                assert values.values["amount"] == i

            second_page: list[float] = []
            for warm in (keyword, int_range, get_attributes):
                await _time(5, warm)
            figures = {
                "keyword_equality": latency_summary(await _time(calls, keyword)),
                "int_range": latency_summary(await _time(calls, int_range)),
                "get_attributes": latency_summary(await _time(calls, get_attributes)),
            }
            await _time(calls, int_range_second_page)
            figures["int_range_second_page"] = latency_summary(second_page)
        size = (tmp / "search.db").stat().st_size + sum(
            p.stat().st_size for p in tmp.glob("search.db-*")
        )
    return {
        "flows": count,
        "seed_seconds": round(seed_seconds, 1),
        "seed_flows_per_second": round(count / seed_seconds),
        "database_mb": round(size / 1e6, 1),
        "matches_per_query": span,
        "page_size": 100,
        **figures,
    }


def main(quick: bool) -> dict[str, Any]:
    """Run the scenario, print its block and return its figures."""
    count, calls = (10_000, 100) if quick else (100_000, 300)
    heading(f"search: SearchFlows and GetAttributes at {count:,} Flows")
    figures = asyncio.run(_run(count, calls))
    print(
        f"  seeded {figures['flows']:,} Flows in {figures['seed_seconds']} s "
        f"({figures['seed_flows_per_second']:,}/s, start_flow with 3 initial Attributes, "
        f"{CONCURRENT_STARTS} at a time); database {figures['database_mb']} MB"
    )
    print(
        f"  each query matches {figures['matches_per_query']:,} Flows; pages of 100; "
        f"{calls} sequential calls each, in process"
    )
    for label, key in (
        ("KEYWORD equality (FlowType-scoped)", "keyword_equality"),
        ("INT range (BETWEEN)", "int_range"),
        ("INT range, second page by token", "int_range_second_page"),
        ("GetAttributes (2 Attributes)", "get_attributes"),
    ):
        f = figures[key]
        print(f"  {label:36} p50 {f['p50_ms']:8.2f} ms   p99 {f['p99_ms']:8.2f} ms")
    return figures


if __name__ == "__main__":
    main(quick=True)
