"""Register over real HTTP against a real server: latency at 300 vs 20,000 records, and
registrations per second with 16 parallel connections (wrk), checked against the stored state.

The server is ``uvicorn --factory app.main:create_app`` (the bundled examples) on a free
127.0.0.1 port and a temp database. Both sizes are seeded before the server starts, by a
direct Engine on the same database file, in the layout registrations leave behind.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

import engine
from bench._common import (
    LUA_DIR,
    dexlite_env,
    fallback_summary,
    heading,
    latency_summary,
    print_wrk,
    ratio,
    run_wrk,
    server,
    temp_dir,
    wrk_missing_note,
    wrk_path,
)
from bench._seed import chunked_state
from patterns.sequentially_chunked_attribute_map.flow import CHUNK_SIZE, ChunkedSubscriberFlow
from patterns.sequentially_chunked_attribute_map.routes import DEFAULT_FLOW_ID

BASE = "/patterns/sequentially-chunked-attribute-map"
WARMUP = 10
CONNECTIONS = 16
WRK_THREADS = 2
SMALL = 300
LARGE = 20_000
WRK_FLOW_ID = "bench-register-wrk"


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "small": SMALL,
            "large": LARGE,
            "registers": 100,
            "load_seconds": 5,
            "budget_s": 20.0,
        }
    return {"small": SMALL, "large": LARGE, "registers": 400, "load_seconds": 10, "budget_s": 40.0}


async def _seed(db_url: str, blob_dir: str, flows: dict[str, int]) -> None:
    config = engine.EngineConfig(database_url=db_url, blob_dir=blob_dir)
    async with engine.Engine(engine.Registry([ChunkedSubscriberFlow()]), config) as eng:
        for flow_id, count in flows.items():
            await eng.start_flow(
                ChunkedSubscriberFlow,
                flow_id,
                None,
                engine.StartFlowOptions(initial_attributes=chunked_state(count)),
            )


def _sequential(
    client: httpx.Client, flows: dict[str, str], count: int, budget_s: float
) -> dict[str, tuple[list[float], dict[int, int]]]:
    """POST register one at a time, alternating between ``flows`` (label -> Flow ID).

    Each Flow gets WARMUP unmeasured registers, then up to ``count`` measured ones; a Flow
    whose measured time exceeds ``budget_s`` stops early.
    """
    samples: dict[str, list[float]] = {label: [] for label in flows}
    statuses: dict[str, dict[int, int]] = {label: {} for label in flows}
    spent = dict.fromkeys(flows, 0.0)
    for n in range(WARMUP + count):
        active = [label for label in flows if spent[label] < budget_s]
        if not active:
            break
        for label in active:
            body = {"email": f"{flows[label]}-{n}@bench.example", "name": f"Bench {n}"}
            started = time.perf_counter()
            response = client.post(f"{BASE}/register", params={"flowId": flows[label]}, json=body)
            elapsed = time.perf_counter() - started
            got = statuses[label]
            got[response.status_code] = got.get(response.status_code, 0) + 1
            if n >= WARMUP:
                samples[label].append(elapsed)
                spent[label] += elapsed
    return {label: (samples[label], statuses[label]) for label in flows}


def _state(client: httpx.Client, flow_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    response = client.get(
        f"/api/v1/flows/{flow_id}/attributes",
        params=[("name", "SubscriberArchiveState"), ("name", "SubscriberChunks/current")],
    )
    response.raise_for_status()
    values = response.json()["values"]
    return values["SubscriberArchiveState"], values.get("SubscriberChunks/current", [])


def _settled_state(
    client: httpx.Client, flow_id: str, timeout_s: float = 15.0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read the state once requests still retrying on the server have finished."""
    deadline = time.monotonic() + timeout_s
    state, current = _state(client, flow_id)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        again, current = _state(client, flow_id)
        if again == state:
            break
        state = again
    return state, current


def _current_ok(next_sequence: int, current: list[dict[str, Any]]) -> bool:
    """Return True when ``current`` holds the last records, contiguous and without gaps."""
    last = next_sequence - 1
    if last == 0:
        return current == []
    size = (last - 1) % CHUNK_SIZE + 1
    return [r["sequence"] for r in current] == list(range(last - size + 1, last + 1))


async def _httpx_load(url: str, seconds: int) -> dict[str, Any]:
    """The fallback load when wrk is missing: CONNECTIONS asyncio workers on one client."""
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    sequences: list[int] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)

    async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:

        async def worker(w: int) -> None:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                started = time.perf_counter()
                response = await client.post(
                    url, json={"email": f"h{w}-{n}@bench.example", "name": f"Bench {w}-{n}"}
                )
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 201:
                    sequences.append(response.json()["sequence"])

        started = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(CONNECTIONS)))
        duration = time.monotonic() - started
    command = f"httpx asyncio fallback, {CONNECTIONS} connections, {seconds} s"
    return {
        **fallback_summary(latencies, statuses, duration, command),
        "sequences": {
            "acknowledged": len(sequences),
            "distinct": len(set(sequences)),
            "duplicates": len(sequences) - len(set(sequences)),
            "max": max(sequences, default=0),
        },
    }


def main(quick: bool) -> dict[str, Any]:
    """Measure register latency at two sizes and parallel throughput over HTTP."""
    sizes = _sizes(quick)
    small, large = sizes["small"], sizes["large"]
    small_id = f"bench-register-{small}"
    with temp_dir("register") as tmp:
        env = dexlite_env(tmp)
        started = time.perf_counter()
        asyncio.run(
            _seed(
                env["DEXLITE_DATABASE_URL"],
                env["DEXLITE_BLOB_DIR"],
                {small_id: small, DEFAULT_FLOW_ID: large},
            )
        )
        seed_s = time.perf_counter() - started
        with (
            server("app.main:create_app", env, tmp) as srv,
            httpx.Client(base_url=srv.url, timeout=30.0) as client,
        ):
            sequential: dict[str, Any] = {}
            measured = _sequential(
                client,
                {f"register@{small}": small_id, f"register@{large}": DEFAULT_FLOW_ID},
                sizes["registers"],
                sizes["budget_s"],
            )
            for flow_id, count in ((small_id, small), (DEFAULT_FLOW_ID, large)):
                samples, statuses = measured[f"register@{count}"]
                stat = latency_summary(samples)
                state, current = _state(client, flow_id)
                done = sum(statuses.values())
                stat["statuses"] = {str(k): v for k, v in sorted(statuses.items())}
                stat["state_ok"] = (
                    state["nextSequence"] == count + done + 1
                    and statuses.get(201, 0) == done
                    and _current_ok(state["nextSequence"], current)
                )
                sequential[f"register@{count}"] = stat

            start = client.post(f"{BASE}/start", params={"flowId": WRK_FLOW_ID})
            start.raise_for_status()
            url = f"{srv.url}{BASE}/register?flowId={WRK_FLOW_ID}"
            note = None
            if wrk_path():
                load = run_wrk(
                    url,
                    LUA_DIR / "post.lua",
                    threads=WRK_THREADS,
                    connections=CONNECTIONS,
                    seconds=sizes["load_seconds"],
                    env={"BENCH_MODE": "register", "BENCH_THREADS": str(WRK_THREADS)},
                )
            else:
                note = wrk_missing_note()
                load = asyncio.run(_httpx_load(url, sizes["load_seconds"]))
            state, current = _settled_state(client, WRK_FLOW_ID)
            created = int(load["statuses"].get("201", 0))
            committed = state["nextSequence"] - 1
            seqs = load["sequences"]
            load["next_sequence_minus_1"] = committed
            load["created_201"] = created
            load["cut_off_in_flight"] = committed - created
            load["non_2xx"] = {k: v for k, v in load["statuses"].items() if not 200 <= int(k) < 300}
            # wrk stops at its deadline without reading the replies still in flight; the
            # server commits those anyway, so up to CONNECTIONS registrations have no 201.
            load["state_ok"] = (
                seqs["duplicates"] == 0
                and seqs["distinct"] == created
                and seqs["max"] <= committed
                and 0 <= committed - created <= CONNECTIONS
                and _current_ok(state["nextSequence"], current)
            )
        server_log = srv.log_tail(10)

    small_stat, large_stat = sequential[f"register@{small}"], sequential[f"register@{large}"]
    ratios = {
        f"register_p50_{large}_over_{small}": ratio(large_stat["p50_ms"], small_stat["p50_ms"]),
        f"register_p99_{large}_over_{small}": ratio(large_stat["p99_ms"], small_stat["p99_ms"]),
        "parallel_201_per_s_over_sequential_per_s": ratio(
            load["ok_per_second"], 1000 / small_stat["mean_ms"]
        ),
    }

    heading(f"HTTP register: {small:,} vs {large:,} records, and {CONNECTIONS} connections")
    print(
        f"  server: uvicorn app.main:create_app, 1 process, SQLite WAL synchronous=FULL; "
        f"seeded in {seed_s:.1f} s"
    )
    print(
        f"  sequential httpx client (keep-alive), sizes interleaved, {WARMUP} warm-up "
        "registers each:"
    )
    print(
        f"  {'records':<16}{'registers':>10}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"
        f"{'state':>8}  statuses"
    )
    for name, stat in sequential.items():
        verdict = "ok" if stat["state_ok"] else "BAD"
        print(
            f"  {name:<16}{stat['count']:>10}{stat['p50_ms']:>10.2f}{stat['p99_ms']:>10.2f}"
            f"{stat['max_ms']:>10.2f}{verdict:>8}  {stat['statuses']}"
        )
    if note:
        print(f"  note: {note}")
    print_wrk(f"{CONNECTIONS} parallel connections on one Flow ({load['command']}):", load)
    print(
        "    (registrations serialize on the log's locks; the route lines callers up in "
        "arrival order, so latency is the queue ahead of a caller)"
    )
    seqs = load["sequences"]
    print(
        f"    201 responses {created} ({seqs['distinct']} distinct sequences, "
        f"{seqs['duplicates']} duplicates); non-2xx {load['non_2xx'] or 'none'}"
    )
    print(
        f"    nextSequence-1 {load['next_sequence_minus_1']} = 201s + "
        f"{load['cut_off_in_flight']} committed for requests still in flight when the load "
        f"stopped (<= {CONNECTIONS}): {'ok' if load['state_ok'] else 'MISMATCH'}"
    )
    print("    note: the load generator and the server share the machine's cores")
    print("  ratios (same run):")
    for name, value in ratios.items():
        print(f"    {name:<44}{value:>8.2f}x")
    ok = all(s["state_ok"] for s in sequential.values()) and load["state_ok"]
    if not ok and server_log:
        print(f"  server log tail:\n{server_log}")
    return {
        "sizes": sizes,
        "seed_seconds": round(seed_s, 2),
        "sequential": sequential,
        "parallel": load,
        "ratios": ratios,
        "checks_ok": ok,
        "load_note": note,
    }
