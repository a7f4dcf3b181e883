"""Streams: writes per second from a Step and from clients, and ReadStream wake-up latency.

- Step writes: an ``async def`` Step calling ``stream.write`` and a sync generator Step
  yielding writes (each crosses from its worker thread to the event loop), in process; the rate
  is messages over the time from the handler's start to the last message's creation.
- Client writes: ``Engine.write_stream`` in process, then ``POST .../messages`` over HTTP
  against a real ``uvicorn --factory app.main:create_app`` on a free 127.0.0.1 port and a temp
  database (wrk with 16 connections over 64 Flow IDs; an httpx load when wrk is missing).
- Wake-up latency: a reader long-polls ``GET .../next?waitSeconds=30``; once it waits, a writer
  writes; the latency is from the write being issued to the reader's answer, p50/p99, over
  HTTP and in process.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

import engine
from bench._common import (
    LUA_DIR,
    dexlite_env,
    heading,
    latency_summary,
    print_wrk,
    run_wrk,
    server,
    temp_dir,
    wrk_missing_note,
    wrk_path,
)
from engine import Context, Flow, Step, StepDecision, StepList, StepOutput, Stream

CAPACITY = 64 * 1024 * 1024
CONNECTIONS = 16
WRK_THREADS = 2
TARGETS = 64
BODY = json.dumps({"source": "bench", "value": "tick 0123456789"})
_STARTED: dict[str, float] = {}


class AsyncWriter(Step[int]):
    """Write ``input`` messages from an ``async def`` Step."""

    async def execute(self, context: Context, input: int) -> StepDecision:
        _STARTED[context.flow_id] = time.time()
        for i in range(input):
            self.flow.progress.write(context, f"tick {i}")
        return engine.graceful_complete()


class SyncWriter(Step[int]):
    """Yield ``input`` writes from a sync generator Step."""

    def execute(self, context: Context, input: int) -> Iterator[StepOutput]:
        _STARTED[context.flow_id] = time.time()
        for i in range(input):
            yield self.flow.progress.write(context, f"tick {i}")
        return engine.graceful_complete()  # type: ignore[return-value]


class StreamBenchFlow(Flow[int]):
    """Progress written by an async Step."""

    progress = Stream("progress", str, stream_capacity_bytes=CAPACITY)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(AsyncWriter())


class SyncStreamBenchFlow(Flow[int]):
    """Progress written by a sync generator Step."""

    progress = Stream("progress", str, stream_capacity_bytes=CAPACITY)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(SyncWriter())


def registry() -> engine.Registry:
    """The server's Registry (``DEXLITE_REGISTRY=bench.streams:registry``)."""
    return engine.Registry([StreamBenchFlow(), SyncStreamBenchFlow()])


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"step_writes": 20_000, "client_writes": 5_000, "load_seconds": 5, "wakeups": 100}
    return {"step_writes": 50_000, "client_writes": 10_000, "load_seconds": 5, "wakeups": 200}


# -- in process -------------------------------------------------------------------------------


async def _until_closed(eng: engine.Engine, flow_id: str) -> None:
    for _ in range(600):
        if (await eng.wait_for_flow(flow_id, wait_seconds=0.1)).status != "RUNNING":
            return
    raise RuntimeError(f"{flow_id} did not finish")


async def _step_rate(eng: engine.Engine, flow: type[Flow[Any]], flow_id: str, n: int) -> float:
    await eng.start_flow(flow, flow_id, n)
    await _until_closed(eng, flow_id)
    newest = (await eng.list_stream_messages(flow_id, "progress", 1, flow_type=flow)).messages
    if not newest or newest[0].value != f"tick {n - 1}":
        raise RuntimeError(f"{flow_id}: the last Step write is missing")
    return n / (newest[0].created_at.timestamp() - _STARTED[flow_id])


async def _inprocess(tmp: Path, sizes: dict[str, int]) -> dict[str, Any]:
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{tmp}/inproc.db", blob_dir=str(tmp / "inproc-blobs")
    )
    out: dict[str, Any] = {}
    async with engine.Engine(registry(), config) as eng:
        n = sizes["step_writes"]
        await _step_rate(eng, StreamBenchFlow, "warmup", 1000)
        out["step_async_writes_per_s"] = round(await _step_rate(eng, StreamBenchFlow, "a", n))
        out["step_sync_generator_writes_per_s"] = round(
            await _step_rate(eng, SyncStreamBenchFlow, "s", n)
        )

        count = sizes["client_writes"]
        started = time.perf_counter()
        for i in range(count):
            await eng.write_stream(
                f"c{i % TARGETS}",
                "progress",
                "tick 0123456789",
                source="bench",
                flow_type=StreamBenchFlow,
            )
        out["client_engine_writes_per_s"] = round(count / (time.perf_counter() - started))

        samples: list[float] = []
        token = await eng.write_stream(
            "w", "progress", "start", source="bench", flow_type=StreamBenchFlow
        )
        for i in range(sizes["wakeups"]):
            reader = asyncio.create_task(
                eng.read_stream("w", "progress", token, wait_seconds=30, flow_type=StreamBenchFlow)
            )
            await asyncio.sleep(0.002)
            issued = time.perf_counter()
            await eng.write_stream(
                "w", "progress", f"wake {i}", source="bench", flow_type=StreamBenchFlow
            )
            message = await reader
            samples.append(time.perf_counter() - issued)
            assert message is not None and message.value == f"wake {i}"
            token = message.resume_token
        out["wakeup_inprocess"] = latency_summary(samples)
    return out


# -- over HTTP --------------------------------------------------------------------------------


async def _httpx_load(base: str, seconds: int) -> dict[str, Any]:
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CONNECTIONS)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:

        async def worker(w: int) -> None:
            n = w
            while time.monotonic() < deadline:
                n += CONNECTIONS
                started = time.perf_counter()
                response = await client.post(
                    f"/api/v1/streams/StreamBenchFlow/h{n % TARGETS}/progress/messages",
                    content=BODY,
                    headers={"Content-Type": "application/json"},
                )
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        started = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(CONNECTIONS)))
        duration = time.monotonic() - started
    lat = latency_summary(latencies)
    ok = sum(c for s, c in statuses.items() if 200 <= s < 300)
    return {
        "requests": len(latencies),
        "ok": ok,
        "duration_us": int(duration * 1e6),
        "statuses": {str(k): v for k, v in statuses.items()},
        "requests_per_second": round(len(latencies) / duration, 1),
        "ok_per_second": round(ok / duration, 1),
        "p50_us": int(lat["p50_ms"] * 1000),
        "p99_us": int(lat["p99_ms"] * 1000),
        "max_us": int(lat["max_ms"] * 1000),
        "command": f"httpx asyncio fallback, {CONNECTIONS} connections, {seconds} s",
    }


def _client_load(base: str, seconds: int) -> dict[str, Any]:
    if not wrk_path():
        print("  " + wrk_missing_note())
        return asyncio.run(_httpx_load(base, seconds))
    prefix = "/api/v1/streams/StreamBenchFlow/h"
    return run_wrk(
        base + prefix + "0/progress/messages",
        LUA_DIR / "post.lua",
        threads=WRK_THREADS,
        connections=CONNECTIONS,
        seconds=seconds,
        env={
            "BENCH_MODE": "rotate",
            "BENCH_PREFIX": prefix,
            "BENCH_SUFFIX": "/progress/messages",
            "BENCH_BODY": BODY,
            "BENCH_TARGETS": str(TARGETS),
            "BENCH_THREADS": str(WRK_THREADS),
        },
    )


async def _http_wakeups(base: str, count: int) -> dict[str, Any]:
    path = "/api/v1/streams/StreamBenchFlow/wake/progress"
    rng = random.Random(7)
    samples: list[float] = []
    async with (
        httpx.AsyncClient(base_url=base, timeout=60) as reader,
        httpx.AsyncClient(base_url=base, timeout=60) as writer,
    ):
        token = (
            await writer.post(path + "/messages", json={"source": "bench", "value": "start"})
        ).json()
        token = token["resumeToken"]
        for i in range(count):
            waiting = asyncio.create_task(
                reader.get(path + "/next", params={"resumeToken": token, "waitSeconds": 30})
            )
            await asyncio.sleep(0.01 + rng.random() * 0.01)  # the reader is parked by now
            issued = time.perf_counter()
            written = await writer.post(
                path + "/messages", json={"source": "bench", "value": f"wake {i}"}
            )
            response = await waiting
            samples.append(time.perf_counter() - issued)
            message = response.json()["message"]
            if written.status_code != 201 or message is None or message["value"] != f"wake {i}":
                raise RuntimeError(f"wake-up {i} went wrong: {response.text}")
            token = message["resumeToken"]
    return latency_summary(samples)


def _http(tmp: Path, sizes: dict[str, int]) -> dict[str, Any]:
    env = dexlite_env(
        tmp,
        DEXLITE_REGISTRY="bench.streams:registry",
        DEXLITE_STREAM__MAX_TOTAL_BYTES=str(1024 * 1024 * 1024),
    )
    out: dict[str, Any] = {}
    with server("app.main:create_app", env, tmp) as srv:
        with httpx.Client(base_url=srv.url, timeout=30) as client:
            for i in range(200):  # warm up
                client.post(
                    f"/api/v1/streams/StreamBenchFlow/h{i % TARGETS}/progress/messages",
                    content=BODY,
                    headers={"Content-Type": "application/json"},
                )
        out["client_http"] = _client_load(srv.url, sizes["load_seconds"])
        out["wakeup_http"] = asyncio.run(_http_wakeups(srv.url, sizes["wakeups"]))
    return out


def main(quick: bool) -> dict[str, Any]:
    """Run the Streams scenario, print it and return its figures."""
    sizes = _sizes(quick)
    heading("Streams: writes per second and ReadStream wake-up latency")
    with temp_dir("streams") as tmp:
        figures: dict[str, Any] = {"sizes": sizes}
        figures.update(asyncio.run(_inprocess(tmp, sizes)))
        figures.update(_http(tmp, sizes))
    n = sizes["step_writes"]
    print(f"  Step writes ({n:,} in one invocation, in process)")
    print(f"    async def Step, stream.write       {figures['step_async_writes_per_s']:>10,} /s")
    print(
        f"    sync generator Step, yield write   "
        f"{figures['step_sync_generator_writes_per_s']:>10,} /s"
    )
    print("  client writes")
    print(f"    Engine.write_stream, sequential    {figures['client_engine_writes_per_s']:>10,} /s")
    print_wrk(
        f"POST .../messages over HTTP, {CONNECTIONS} connections, {TARGETS} Flow IDs",
        figures["client_http"],
    )
    for label, key in (
        ("over HTTP (write issued -> reader answered)", "wakeup_http"),
        ("in process (write_stream -> read_stream returned)", "wakeup_inprocess"),
    ):
        lat = figures[key]
        print(f"  ReadStream wake-up {label}, {lat['count']} samples")
        print(
            f"    p50 {lat['p50_ms']:.2f} ms  p99 {lat['p99_ms']:.2f} ms  "
            f"max {lat['max_ms']:.2f} ms"
        )
    return figures


if __name__ == "__main__":
    main(quick=True)
