"""RPC round trips per second over HTTP against bare FastAPI endpoints that write to SQLite.

Engine side: ``POST /api/v1/flows/{flowId}/rpcs/increment`` on a server built by
``bench._server:rpc_app`` (app.main.create_app with a Registry of the bench's CounterFlow), one
small locked read-modify-write RPC. Baselines, all on ``bench._server:bare_app`` (FastAPI on
uvicorn, SQLite in WAL with synchronous=FULL):

- ``/sqla/{id}``: one SQLAlchemy-async INSERT + COMMIT (aiosqlite, the default pool), what a
  typical FastAPI + SQLAlchemy service does per write;
- ``/counters/{id}``: one BEGIN IMMEDIATE / UPDATE ... RETURNING / COMMIT on a stdlib sqlite3
  connection, inline on the event loop: the disk floor;
- ``/noop/{id}``: no database, the HTTP ceiling.

All take the same JSON body and are loaded by wrk with 16 connections spread over 256 targets
(Flows or counter rows), so the RPC locks rarely collide. Both servers run side by side and the
loads alternate in rounds, so a noisy neighbour on the machine hits every figure alike. Every
2xx must be one stored increment (or row), give or take the replies wrk cut off in flight.
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
    start_flows,
    temp_dir,
    wrk_missing_note,
    wrk_path,
)
from bench._flows import CounterFlow
from bench._server import BARE_DB_ENV, BARE_ROWS_ENV, SQLA_DB_ENV

TARGETS = 256
CONNECTIONS = 16
WRK_THREADS = 2
SEQUENTIAL_WARMUP = 10
FLOW_PREFIX = "bench-counter-"
BODY = '{"input":1}'
RPC_PATH = ("/api/v1/flows/" + FLOW_PREFIX, "/rpcs/increment")
COMMIT_PATH = ("/counters/", "")
SQLA_PATH = ("/sqla/", "")
NOOP_PATH = ("/noop/", "")


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "rounds": 1,
            "round_seconds": 4,
            "sequential": 100,
            "budget_s": 6.0,
            "inprocess_seconds": 2,
        }
    return {
        "rounds": 2,
        "round_seconds": 4,
        "sequential": 300,
        "budget_s": 8.0,
        "inprocess_seconds": 2,
    }


def _slice(caller: int, n: int) -> int:
    """Return the ``n``-th target of ``caller``'s own slice, so callers never collide."""
    per = TARGETS // CONNECTIONS
    return caller * per + n % per


# -- sequential latency -----------------------------------------------------------------------


def _sequential(
    clients: dict[str, tuple[httpx.Client, tuple[str, str]]], count: int, budget_s: float
) -> dict[str, dict[str, Any]]:
    """POST one request at a time, alternating between the servers, rotating targets."""
    samples: dict[str, list[float]] = {label: [] for label in clients}
    bad = dict.fromkeys(clients, 0)
    deadline = time.monotonic() + budget_s
    for n in range(SEQUENTIAL_WARMUP + count):
        for label, (client, (prefix, suffix)) in clients.items():
            started = time.perf_counter()
            response = client.post(
                f"{prefix}{n % TARGETS}{suffix}",
                content=BODY,
                headers={"Content-Type": "application/json"},
            )
            elapsed = time.perf_counter() - started
            bad[label] += not response.is_success
            if n >= SEQUENTIAL_WARMUP:
                samples[label].append(elapsed)
        if time.monotonic() > deadline:
            break
    out = {}
    for label in clients:
        stat = latency_summary(samples[label])
        stat["non_2xx"] = bad[label]
        stat["ok"] = SEQUENTIAL_WARMUP + len(samples[label]) - bad[label]
        out[label] = stat
    return out


# -- parallel load ----------------------------------------------------------------------------


async def _httpxload(url_prefix: str, suffix: str, seconds: int) -> dict[str, Any]:
    """The fallback load when wrk is missing: CONNECTIONS asyncio workers on one client."""
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:

        async def worker(w: int) -> None:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                started = time.perf_counter()
                response = await client.post(
                    f"{url_prefix}{_slice(w, n)}{suffix}",
                    content=BODY,
                    headers={"Content-Type": "application/json"},
                )
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        started = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(CONNECTIONS)))
        duration = time.monotonic() - started
    command = f"httpx asyncio fallback, {CONNECTIONS} connections, {seconds} s"
    return fallback_summary(latencies, statuses, duration, command)


def load(base: str, path: tuple[str, str], seconds: int) -> dict[str, Any]:
    """POST increments to ``base`` + ``path`` rotating over TARGETS from CONNECTIONS."""
    prefix, suffix = path
    if not wrk_path():
        return asyncio.run(_httpxload(base + prefix, suffix, seconds))
    return run_wrk(
        base + prefix + "0" + suffix,
        LUA_DIR / "post.lua",
        threads=WRK_THREADS,
        connections=CONNECTIONS,
        seconds=seconds,
        env={
            "BENCH_MODE": "rotate",
            "BENCH_PREFIX": prefix,
            "BENCH_SUFFIX": suffix,
            "BENCH_BODY": BODY,
            "BENCH_TARGETS": str(TARGETS),
            "BENCH_THREADS": str(WRK_THREADS),
        },
    )


def _check(load: dict[str, Any], total: int, sequential_ok: int) -> None:
    """Every 2xx is one committed increment; wrk may cut off up to CONNECTIONS per round."""
    extra = total - sequential_ok - load["ok"]
    load["committed"] = total
    load["cut_off_in_flight"] = extra
    load["non_2xx"] = {k: v for k, v in load["statuses"].items() if not 200 <= int(k) < 300}
    load["state_ok"] = 0 <= extra <= CONNECTIONS * len(load["round_ok_per_second"])


# -- in-process -------------------------------------------------------------------------------


async def _inprocess(tmp: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    """The same RPC through engine.invoke_rpc with no HTTP: sequential latency and 16 callers.

    By name (as the HTTP route calls it: one extra read finds the run's Flow type) and by
    bound method (the Flow type is known).
    """
    flow = CounterFlow()
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{tmp}/inproc.db", blob_dir=str(tmp / "inproc-blobs")
    )
    out: dict[str, Any] = {}
    async with engine.Engine(engine.Registry([flow]), config) as eng:
        for n in range(TARGETS):
            await eng.start_flow(flow, f"{FLOW_PREFIX}{n}", None)
        samples: list[float] = []
        deadline = time.monotonic() + sizes["budget_s"]
        for n in range(SEQUENTIAL_WARMUP + sizes["sequential"]):
            started = time.perf_counter()
            await eng.invoke_rpc("increment", f"{FLOW_PREFIX}{n % TARGETS}", 1)
            if n >= SEQUENTIAL_WARMUP:
                samples.append(time.perf_counter() - started)
                if time.monotonic() > deadline:
                    break
        out["sequential_by_name"] = latency_summary(samples)
        for label, target in (("by_name", "increment"), ("by_method", flow.increment)):
            done = 0
            stop = time.monotonic() + sizes["inprocess_seconds"]

            async def caller(c: int, target: Any = target, stop: float = stop) -> None:
                nonlocal done
                n = 0
                while time.monotonic() < stop:
                    await eng.invoke_rpc(target, f"{FLOW_PREFIX}{_slice(c, n)}", 1)
                    n += 1
                    done += 1

            started = time.perf_counter()
            cpu = time.process_time()
            await asyncio.gather(*(caller(c) for c in range(CONNECTIONS)))
            elapsed = time.perf_counter() - started
            out[f"parallel_{label}"] = {
                "rpcs": done,
                "rpcs_per_second": round(done / elapsed, 1),
                "cpu_ms_per_rpc": round((time.process_time() - cpu) / max(done, 1) * 1000, 3),
            }
    return out


# -- scenario ---------------------------------------------------------------------------------


def _over_http(tmp: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    bare_db, sqla_db = tmp / "bare.db", tmp / "sqla.db"
    bare_env = dexlite_env(
        tmp,
        **{BARE_DB_ENV: str(bare_db), BARE_ROWS_ENV: str(TARGETS), SQLA_DB_ENV: str(sqla_db)},
    )
    with (
        server("bench._server:rpc_app", dexlite_env(tmp), tmp) as rpc_srv,
        server("bench._server:bare_app", bare_env, tmp) as bare_srv,
        httpx.Client(base_url=rpc_srv.url, timeout=30.0) as rpc_client,
        httpx.Client(base_url=bare_srv.url, timeout=30.0) as bare_client,
    ):
        start_flows(rpc_srv.url, "CounterFlow", [f"{FLOW_PREFIX}{n}" for n in range(TARGETS)])
        sequential = _sequential(
            {
                "rpc": (rpc_client, RPC_PATH),
                "sqla": (bare_client, SQLA_PATH),
                "commit": (bare_client, COMMIT_PATH),
            },
            sizes["sequential"],
            sizes["budget_s"],
        )
        targets = {
            "rpc": (rpc_srv.url, RPC_PATH),
            "sqla": (bare_srv.url, SQLA_PATH),
            "commit": (bare_srv.url, COMMIT_PATH),
            "noop": (bare_srv.url, NOOP_PATH),
        }
        rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in targets}
        for _ in range(sizes["rounds"]):
            for label, (base, path) in targets.items():
                rounds[label].append(load(base, path, sizes["round_seconds"]))
        loads = {label: combine_rounds(r) for label, r in rounds.items()}
        time.sleep(1.0)  # let replies wrk stopped reading finish committing
        total = 0
        for n in range(TARGETS):
            response = rpc_client.get(
                f"/api/v1/flows/{FLOW_PREFIX}{n}/attributes", params={"name": "Counter"}
            )
            response.raise_for_status()
            total += response.json()["values"].get("Counter", 0)
        _check(loads["rpc"], total, sequential["rpc"]["ok"])
        with sqlite3.connect(bare_db) as conn:
            bare_total = conn.execute("SELECT COALESCE(SUM(value), 0) FROM counters").fetchone()[0]
        _check(loads["commit"], bare_total, sequential["commit"]["ok"])
        with sqlite3.connect(sqla_db) as conn:
            rows = conn.execute("SELECT COALESCE(SUM(amount), 0) FROM increments").fetchone()[0]
        _check(loads["sqla"], rows, sequential["sqla"]["ok"])
    return {"sequential": sequential, "parallel": loads}


def main(quick: bool) -> dict[str, Any]:
    """Measure RPC round trips per second against the SQLAlchemy, commit and no-op baselines."""
    sizes = _sizes(quick)
    note = None if wrk_path() else wrk_missing_note()
    with temp_dir("rpc") as tmp:
        http = _over_http(tmp, sizes)
        inproc = asyncio.run(_inprocess(tmp, sizes))
    seq, par = http["sequential"], http["parallel"]
    ratios = {
        "rpc_per_s_over_sqla_commit_per_s": ratio(
            par["rpc"]["ok_per_second"], par["sqla"]["ok_per_second"]
        ),
        "rpc_per_s_over_bare_commit_per_s": ratio(
            par["rpc"]["ok_per_second"], par["commit"]["ok_per_second"]
        ),
        "rpc_per_s_over_noop_per_s": ratio(
            par["rpc"]["ok_per_second"], par["noop"]["ok_per_second"]
        ),
        "sqla_commit_per_s_over_bare_commit_per_s": ratio(
            par["sqla"]["ok_per_second"], par["commit"]["ok_per_second"]
        ),
        "bare_commit_per_s_over_noop_per_s": ratio(
            par["commit"]["ok_per_second"], par["noop"]["ok_per_second"]
        ),
        "sequential_rpc_p50_over_sqla_commit_p50": ratio(
            seq["rpc"]["p50_ms"], seq["sqla"]["p50_ms"]
        ),
        "sequential_rpc_p50_over_bare_commit_p50": ratio(
            seq["rpc"]["p50_ms"], seq["commit"]["p50_ms"]
        ),
        "http_rpc_per_s_over_in_process_rpc_per_s": ratio(
            par["rpc"]["ok_per_second"], inproc["parallel_by_name"]["rpcs_per_second"]
        ),
        "in_process_by_method_over_by_name": ratio(
            inproc["parallel_by_method"]["rpcs_per_second"],
            inproc["parallel_by_name"]["rpcs_per_second"],
        ),
    }

    heading("RPC round trips over HTTP vs bare FastAPI endpoints writing to SQLite")
    print("  both servers: uvicorn, 1 process each, SQLite WAL synchronous=FULL, 127.0.0.1")
    if note:
        print(f"  note: {note}")
    print(
        f"  sequential httpx client, servers alternating, {SEQUENTIAL_WARMUP} warm-up "
        "requests each:"
    )
    for label, stat in (
        ("dexlite RPC", seq["rpc"]),
        ("SQLAlchemy", seq["sqla"]),
        ("bare commit", seq["commit"]),
    ):
        print(
            f"    {label:<14} p50 {stat['p50_ms']:.2f} ms  p99 {stat['p99_ms']:.2f} ms  "
            f"({stat['count']} requests, non-2xx {stat['non_2xx']})"
        )
    print(
        f"  {CONNECTIONS} connections, {sizes['rounds']} alternating round(s) of "
        f"{sizes['round_seconds']} s per target; p50 = median of rounds, p99 = worst round"
    )
    for label, title in (
        ("rpc", f"dexlite RPC increment, {TARGETS} Flows"),
        ("sqla", "FastAPI + SQLAlchemy-async INSERT + COMMIT"),
        ("commit", f"bare FastAPI + sqlite3 commit, {TARGETS} rows"),
        ("noop", "bare FastAPI no-op (the HTTP ceiling)"),
    ):
        rates = ", ".join(f"{r:,.0f}" for r in par[label]["round_ok_per_second"])
        print_wrk(f"{title}: rounds {rates} 2xx/s", par[label])
    print(f"    load: {par['rpc']['command']}")
    for label, title in (("rpc", "dexlite RPC"), ("sqla", "SQLAlchemy"), ("commit", "bare commit")):
        load = par[label]
        print(
            f"  {title}: stored increments {load['committed']} = 2xx + "
            f"{load['cut_off_in_flight']} cut off in flight: "
            f"{'ok' if load['state_ok'] else 'MISMATCH'}"
        )
    iseq = inproc["sequential_by_name"]
    print(
        f"  in-process engine.invoke_rpc, no HTTP ({CONNECTIONS} concurrent callers, "
        f"{sizes['inprocess_seconds']} s each; CPU counts every thread of the process):"
    )
    print(f"    sequential by name   p50 {iseq['p50_ms']:.2f} ms  p99 {iseq['p99_ms']:.2f} ms")
    for label in ("by_name", "by_method"):
        got = inproc[f"parallel_{label}"]
        print(
            f"    {label.replace('_', ' '):<20} {got['rpcs_per_second']:>8,.1f} RPC/s   "
            f"{got['cpu_ms_per_rpc']:.2f} ms CPU per RPC"
        )
    print("  ratios (same run):")
    for name, value in ratios.items():
        print(f"    {name:<44}{value:>8.2f}x")
    ok = all(par[label]["state_ok"] for label in ("rpc", "sqla", "commit"))
    return {
        "sizes": sizes,
        "sequential": seq,
        "parallel": par,
        "in_process": inproc,
        "ratios": ratios,
        "checks_ok": ok,
        "load_note": note,
    }
