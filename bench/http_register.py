"""Register over real HTTP against a real server: latency at 300 vs 20,000 records, and
registrations per second on one Flow from 32 parallel connections (wrk) against two baselines
loaded the same way in the same run, checked against the stored state.

The server is ``uvicorn --factory app.main:create_app`` (the bundled examples) on a free
127.0.0.1 port and a temp database. Both sizes are seeded before the server starts, by a
direct Engine on the same database file, in the layout registrations leave behind.

The baselines are ``bench._server:bare_app`` on a second uvicorn process, both with the
register route's own body model and response model:

- ``POST /sqla-register``: one SQLAlchemy-async INSERT + COMMIT per request (aiosqlite, WAL,
  synchronous=FULL): what a typical FastAPI + SQLAlchemy service does per write;
- ``POST /echo``: the body validated by pydantic and answered, no database: the HTTP limit.

The three loads alternate in rounds (register, SQLAlchemy, echo, then again), so a noisy
neighbour on the machine hits every figure alike; each register round runs on a fresh Flow and
is checked on its own: every response 201, the sequences distinct, and the stored
``nextSequence`` equal to the 201s plus the replies wrk cut off in flight.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

import engine
from bench._common import (
    LUA_DIR,
    combine_rounds,
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
from bench._server import BARE_DB_ENV, SQLA_DB_ENV
from patterns.sequentially_chunked_attribute_map.flow import CHUNK_SIZE, ChunkedSubscriberFlow
from patterns.sequentially_chunked_attribute_map.routes import DEFAULT_FLOW_ID

BASE = "/patterns/sequentially-chunked-attribute-map"
WARMUP = 10
#: Parallel connections of the load (goals 1a and 1b are stated at 32).
CONNECTIONS = 32
WRK_THREADS = 2
SMALL = 300
LARGE = 20_000
WRK_FLOW_ID = "bench-register-wrk"
#: The loads of each round, in order: label -> what it is.
TARGETS = {
    "register": "dexlite register, one Flow",
    "sqla": "FastAPI + SQLAlchemy-async INSERT + COMMIT",
    "echo": "FastAPI pydantic echo (the HTTP limit)",
}


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "small": SMALL,
            "large": LARGE,
            "registers": 100,
            "budget_s": 8.0,
            "rounds": 1,
            "round_seconds": 4,
        }
    return {
        "small": SMALL,
        "large": LARGE,
        "registers": 250,
        "budget_s": 10.0,
        "rounds": 2,
        "round_seconds": 4,
    }


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


def _load(url: str, seconds: int) -> dict[str, Any]:
    """POST register-shaped bodies (a unique email each) to ``url`` from CONNECTIONS."""
    if not wrk_path():
        return asyncio.run(_httpx_load(url, seconds))
    return run_wrk(
        url,
        LUA_DIR / "post.lua",
        threads=WRK_THREADS,
        connections=CONNECTIONS,
        seconds=seconds,
        env={"BENCH_MODE": "register", "BENCH_THREADS": str(WRK_THREADS)},
    )


def _check_register(
    load: dict[str, Any], state: dict[str, Any], current: list[dict[str, Any]]
) -> None:
    """Every reply 201 with a distinct sequence; nextSequence - 1 = 201s (+ cut off by wrk)."""
    # wrk stops at its deadline without reading the replies still in flight; the server
    # commits those anyway, so up to CONNECTIONS registrations have no 201. The httpx
    # fallback reads every reply.
    check_register_load(load, state, current, CONNECTIONS if wrk_path() else 0)


def check_register_load(
    load: dict[str, Any], state: dict[str, Any], current: list[Any], cut_off_allowed: int
) -> None:
    """Set ``load["state_ok"]`` (and the counts behind it): every reply 201 with a distinct
    sequence, and nextSequence - 1 = the 201s plus at most ``cut_off_allowed`` replies the load
    generator never read."""
    created = int(load["statuses"].get("201", 0))
    committed = state["nextSequence"] - 1
    seqs = load["sequences"]
    load["next_sequence_minus_1"] = committed
    load["created_201"] = created
    load["cut_off_in_flight"] = committed - created
    load["non_201"] = {k: v for k, v in load["statuses"].items() if k != "201"}
    load["state_ok"] = (
        not load["non_201"]
        and load.get("socket_errors", 0) == 0
        and seqs["duplicates"] == 0
        and seqs["distinct"] == created
        and seqs["max"] <= committed
        and 0 <= committed - created <= cut_off_allowed
        and _current_ok(state["nextSequence"], current)
    )


def _parallel(
    client: httpx.Client, dex_url: str, bare_url: str, sqla_db: Path, sizes: dict[str, Any]
) -> dict[str, Any]:
    """Run the rounds of the three loads; return each load combined, with its checks."""
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in TARGETS}
    for r in range(sizes["rounds"]):
        for label in TARGETS:
            if label == "register":
                flow_id = f"{WRK_FLOW_ID}-{r}"
                client.post(f"{BASE}/start", params={"flowId": flow_id}).raise_for_status()
                load = _load(f"{dex_url}{BASE}/register?flowId={flow_id}", sizes["round_seconds"])
                state, current = _settled_state(client, flow_id)
                _check_register(load, state, current)
            else:
                path = "/sqla-register" if label == "sqla" else "/echo"
                load = _load(bare_url + path, sizes["round_seconds"])
            rounds[label].append(load)
    out: dict[str, Any] = {}
    for label, done in rounds.items():
        out[label] = {
            **combine_rounds(done),
            "rounds": [{k: v for k, v in d.items() if k != "statuses"} for d in done],
        }
    register = out["register"]
    register["state_ok"] = all(d["state_ok"] for d in rounds["register"])
    register["non_201"] = {k: v for k, v in register["statuses"].items() if k != "201"}
    # The SQLAlchemy baseline is checked too: one stored row per 201 (+ wrk's cut-offs).
    time.sleep(0.5)
    with sqlite3.connect(sqla_db) as conn:
        stored = int(conn.execute("SELECT COUNT(*) FROM subscribers").fetchone()[0])
    sqla = out["sqla"]
    sqla["stored_rows"] = stored
    sqla["cut_off_in_flight"] = stored - sqla["ok"]
    allowed = CONNECTIONS * sizes["rounds"] if wrk_path() else 0
    sqla["state_ok"] = set(sqla["statuses"]) <= {"201"} and 0 <= stored - sqla["ok"] <= allowed
    return out


def main(quick: bool) -> dict[str, Any]:
    """Measure register latency at two sizes, and parallel throughput against baselines."""
    sizes = _sizes(quick)
    small, large = sizes["small"], sizes["large"]
    small_id = f"bench-register-{small}"
    note = None if wrk_path() else wrk_missing_note()
    with temp_dir("register") as tmp:
        env = dexlite_env(tmp)
        sqla_db = tmp / "sqla.db"
        bare_env = dexlite_env(
            tmp, **{BARE_DB_ENV: str(tmp / "bare.db"), SQLA_DB_ENV: str(sqla_db)}
        )
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
            server("bench._server:bare_app", bare_env, tmp) as bare,
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
            loads = _parallel(client, srv.url, bare.url, sqla_db, sizes)
        server_log = srv.log_tail(10)

    small_stat, large_stat = sequential[f"register@{small}"], sequential[f"register@{large}"]
    reg, sqla, echo = loads["register"], loads["sqla"], loads["echo"]
    ratios = {
        f"register_p50_{large}_over_{small}": ratio(large_stat["p50_ms"], small_stat["p50_ms"]),
        f"register_p99_{large}_over_{small}": ratio(large_stat["p99_ms"], small_stat["p99_ms"]),
        "register_per_s_over_sqla_commit_per_s": ratio(reg["ok_per_second"], sqla["ok_per_second"]),
        "register_per_s_over_pydantic_echo_per_s": ratio(
            reg["ok_per_second"], echo["ok_per_second"]
        ),
        "sqla_commit_per_s_over_pydantic_echo_per_s": ratio(
            sqla["ok_per_second"], echo["ok_per_second"]
        ),
        "parallel_201_per_s_over_sequential_per_s": ratio(
            reg["ok_per_second"], 1000 / small_stat["mean_ms"]
        ),
    }
    ok = all(s["state_ok"] for s in sequential.values()) and reg["state_ok"] and sqla["state_ok"]
    _print(sizes, seed_s, sequential, loads, ratios, note)
    if not ok and server_log:
        print(f"  server log tail:\n{server_log}")
    return {
        "sizes": sizes,
        "connections": CONNECTIONS,
        "seed_seconds": round(seed_s, 2),
        "sequential": sequential,
        "parallel": loads,
        "ratios": ratios,
        "checks_ok": ok,
        "load_note": note,
    }


def _print(
    sizes: dict[str, Any],
    seed_s: float,
    sequential: dict[str, Any],
    loads: dict[str, Any],
    ratios: dict[str, float],
    note: str | None,
) -> None:
    small, large = sizes["small"], sizes["large"]
    heading(f"HTTP register: {small:,} vs {large:,} records, and {CONNECTIONS} connections")
    print(
        "  servers: uvicorn app.main:create_app and bench._server:bare_app, 1 process each, "
        f"SQLite WAL synchronous=FULL; seeded in {seed_s:.1f} s"
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
    print(
        f"  {CONNECTIONS} connections, {sizes['rounds']} alternating round(s) of "
        f"{sizes['round_seconds']} s per load; p50 = median of rounds, p99 = worst round"
    )
    for label, title in TARGETS.items():
        rates = ", ".join(f"{r:,.0f}" for r in loads[label]["round_ok_per_second"])
        print_wrk(f"{title}: rounds {rates} 2xx/s", loads[label])
    print(f"    load: {loads['register']['command']}")
    reg, sqla = loads["register"], loads["sqla"]
    for i, r in enumerate(reg["rounds"]):
        seqs = r["sequences"]
        print(
            f"  register round {i + 1}: 201s {r['created_201']} ({seqs['distinct']} distinct, "
            f"{seqs['duplicates']} duplicates), non-201 {r['non_201'] or 'none'}; "
            f"nextSequence-1 {r['next_sequence_minus_1']} = 201s + {r['cut_off_in_flight']} "
            f"cut off in flight (<= {CONNECTIONS}): {'ok' if r['state_ok'] else 'MISMATCH'}"
        )
    print(
        f"  SQLAlchemy baseline: stored rows {sqla['stored_rows']} = 2xx + "
        f"{sqla['cut_off_in_flight']} cut off in flight: {'ok' if sqla['state_ok'] else 'MISMATCH'}"
    )
    print(
        "  note: registrations on one Flow serialize on the log's locks; the load generator "
        "and the servers share the machine's cores"
    )
    print("  ratios (same run):")
    for name, value in ratios.items():
        print(f"    {name:<44}{value:>8.2f}x")
