"""The extra hop of ``app.client.Client``: the same RPCs in process and through the Client.

The bundled CounterFlow's locked ``increment`` RPC on 64 distinct Flows, called by 16
concurrent tasks, on one in-process Engine over a fresh SQLite file, and through a
``Client`` (one connection pool, typed values validated and decoded on its side too)
against a server of the bundled examples in another process over its own fresh SQLite file.
Each side runs the same number of calls after a warm-up; the stored counters must add up to
every call made. Reported: RPCs per second and latency p50/p99 on each side, and the
ratios Client / in process (same run).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import engine
from app.client import Client
from bench._common import dexlite_env, heading, latency_summary, ratio, server, temp_dir
from patterns import bundled_flows
from patterns.primitives.rpc.flow import CounterFlow

FLOWS = 64
TASKS = 16


def _sizes(quick: bool) -> dict[str, int]:
    return {"warmup": 200, "calls": 1000 if quick else 5000}


async def _load(flows: engine.FlowClient, prefix: str, sizes: dict[str, int]) -> dict[str, Any]:
    """Start the Flows, warm up, then time ``calls`` increments from TASKS tasks."""
    counter = CounterFlow()
    ids = [f"{prefix}-{n}" for n in range(FLOWS)]
    for flow_id in ids:
        await flows.start_flow(CounterFlow, flow_id)
    latencies: list[float] = []

    async def run(total: int, record: bool) -> None:
        # Each task has Flows of its own: a locked RPC never queues, so two calls on one Flow
        # at once would measure RPC_LOCK_CONFLICT, not the hop.
        async def task(k: int) -> None:
            mine = ids[k::TASKS]
            for n in range(k, total, TASKS):
                began = time.perf_counter()
                await flows.invoke_rpc(counter.increment, mine[n // TASKS % len(mine)], 1)
                if record:
                    latencies.append(time.perf_counter() - began)

        await asyncio.gather(*(task(k) for k in range(TASKS)))

    await run(sizes["warmup"], record=False)
    began = time.perf_counter()
    await run(sizes["calls"], record=True)
    seconds = time.perf_counter() - began
    stored = 0
    for flow_id in ids:
        stored += (await flows.get_attributes(flow_id, ["counter"])).values.get("counter") or 0
    return {
        "rpcs_per_second": round(sizes["calls"] / seconds, 1),
        "latency": latency_summary(latencies),
        "stored": stored,
        "calls": sizes["warmup"] + sizes["calls"],
    }


async def _in_process(tmp: Path, sizes: dict[str, int]) -> dict[str, Any]:
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{tmp / 'in-process.db'}",
        blob_dir=str(tmp / "blobs-in-process"),
        retention=None,
    )
    async with engine.Engine(engine.Registry(bundled_flows()), config) as eng:
        return await _load(eng, "hop-engine", sizes)


async def _through_client(url: str, sizes: dict[str, int]) -> dict[str, Any]:
    async with Client(url, registry=engine.Registry(bundled_flows())) as client:
        return await _load(client, "hop-client", sizes)


def _run(label: str, call: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    figures = asyncio.run(call())
    # Every acknowledged increment is in the counters, and nothing else.
    assert figures["stored"] == figures["calls"], f"{label}: {figures}"
    return figures


def main(quick: bool) -> dict[str, Any]:
    """Run both sides and print their figures and ratios."""
    sizes = _sizes(quick)
    with temp_dir("client-hop") as tmp:
        local = _run("in process", lambda: _in_process(tmp, sizes))
        remote_dir = tmp / "server"
        remote_dir.mkdir()
        with server("app.main:create_app", dexlite_env(remote_dir), tmp) as srv:
            remote = _run("client", lambda: _through_client(srv.url, sizes))
    heading(f"client_hop: locked RPCs on {FLOWS} Flows from {TASKS} tasks, SQLite")
    for label, figures in (("in process", local), ("through Client", remote)):
        lat = figures["latency"]
        print(
            f"  {label:15} {figures['rpcs_per_second']:8.0f} RPCs/s   "
            f"p50 {lat['p50_ms']:.2f} ms   p99 {lat['p99_ms']:.2f} ms"
        )
    rate = ratio(remote["rpcs_per_second"], local["rpcs_per_second"])
    p50 = ratio(remote["latency"]["p50_ms"], local["latency"]["p50_ms"])
    print(f"  Client / in process: {rate:.2f}x the RPCs/s, {p50:.2f}x the p50")
    return {
        "in_process": local,
        "client": remote,
        "ratios": {"rpcs_per_second": rate, "p50": p50},
    }
