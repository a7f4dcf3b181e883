"""dexlite on PostgreSQL with one and with two server processes on one database, against the
same measurements on SQLite, and pgbench's simple-update TPS as the physical reference.

Three deployments run side by side: SQLite (one process, a temp file, WAL synchronous=FULL),
PostgreSQL with one process, and PostgreSQL with two processes on one database (same
``DEXLITE_DATABASE_URL`` and ``DEXLITE_BLOB_DIR``, default lease). Every PostgreSQL deployment
gets a database of its own, ``dexlite_bench_<tag>_<random>``, dropped WITH (FORCE) afterwards.
The HTTP servers are ``bench._server:register_and_rpc_app`` (the chunked pattern's routes and
CounterFlow's RPC), started once per deployment for both HTTP loads. The load is CONNECTIONS
(16) connections in all three, dealt round-robin to the processes' ports; the loads alternate
between the deployments in rounds, so a noisy neighbour on the machine hits every figure alike.

- register: ``POST .../sequentially-chunked-attribute-map/register`` on one Flow (started with
  ``POST .../start``, a fresh Flow per round), as http_register; every response must be 201,
  the sequences distinct, and the stored ``nextSequence`` equal the acknowledged count + 1
  (wrk may cut off up to CONNECTIONS replies in flight, which commit anyway).
- RPC: the CounterFlow increment RPC on TARGETS (256) distinct Flows, as rpc_roundtrip, each
  process serving its own share of the Flows; the stored counters must sum to the 2xx count.
- Flows: 3-Step Flows (``async def`` Steps) to completion by in-process Engines, as
  flow_throughput; on two processes, two workers on one database measured at the same time.
- pgbench: ``pgbench -i -s 1`` then ``pgbench -N -c 16 -j 2 -T <s>`` on a fresh database.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench import _postgres as pg
from bench._common import (
    Server,
    combine_rounds,
    dexlite_env,
    heading,
    latency_summary,
    ratio,
    server,
    start_flows,
    temp_dir,
    wrk_missing_note,
    wrk_path,
)
from bench.http_register import BASE, _settled_state, check_register_load
from bench.rpc_roundtrip import CONNECTIONS, TARGETS, _check

#: The deployments, in the order their loads alternate: key -> (label, processes).
DEPLOYMENTS = {
    "sqlite": ("SQLite 1 proc", 1),
    "pg1": ("PG 1 proc", 1),
    "pg2": ("PG 2 procs", 2),
}
KINDS = {"register": "registrations/s", "rpc": "RPCs/s", "flows": "Flows/s"}


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "rounds": 1,
            "flow_rounds": 1,
            "load_seconds": 2,
            "flows": 100,
            "concurrency": 64,
            "warmup": 16,
            "pgbench_seconds": 2,
        }
    return {
        # Two alternating rounds of each HTTP load: one 3-second round moved by a tenth and
        # more between runs on a 2-core machine shared with the load generator.
        "rounds": 2,
        # A Flows run measures well under a second: the machine's pace drifts more than that
        # between two of them, so each deployment keeps the best of three alternating runs.
        "flow_rounds": 3,
        "load_seconds": 3,
        "flows": 150,
        "concurrency": 64,
        "warmup": 16,
        "pgbench_seconds": 3,
    }


@contextlib.contextmanager
def _deployments(tmp: Path, factory: str, tag: str) -> Iterator[dict[str, list[Server]]]:
    """Start every deployment's servers of ``factory``; stop them, then drop their databases."""
    with contextlib.ExitStack() as stack:
        out: dict[str, list[Server]] = {}
        for key, (_label, processes) in DEPLOYMENTS.items():
            where = tmp / f"{tag}-{key}"
            where.mkdir()
            extra = {}
            if key != "sqlite":
                db = stack.enter_context(pg.fresh_database(f"{tag}_{key}"))
                extra["DEXLITE_DATABASE_URL"] = pg.engine_url(db)
            # One environment for both processes: same database URL and blob directory.
            env = dexlite_env(where, **extra)
            # One after the other: the first applies the schema, the second finds it current.
            out[key] = [stack.enter_context(server(factory, env, where)) for _ in range(processes)]
        yield out


# -- register ---------------------------------------------------------------------------------


def _register_check(load: dict[str, Any], state: dict[str, Any], current: list[Any]) -> None:
    """Every reply 201 with a distinct sequence; nextSequence - 1 = 201s (+ cut off by wrk)."""
    # The httpx fallback reads every reply.
    check_register_load(load, state, current, CONNECTIONS if load["wrk"] else 0)


def _register(deps: dict[str, list[Server]], sizes: dict[str, Any]) -> dict[str, Any]:
    """Registrations/s on one Flow per round, every deployment in turn, checked each round."""
    rounds: dict[str, list[dict[str, Any]]] = {key: [] for key in DEPLOYMENTS}
    for r in range(sizes["rounds"]):
        for key, servers in deps.items():
            flow_id = f"bench-pg-register-{r}"
            with httpx.Client(base_url=servers[0].url, timeout=30.0) as client:
                client.post(f"{BASE}/start", params={"flowId": flow_id}).raise_for_status()
            load = pg.register_load([s.url for s in servers], flow_id, sizes["load_seconds"])
            # Read back through the last process: with two, not the one that started it.
            with httpx.Client(base_url=servers[-1].url, timeout=30.0) as client:
                state, current = _settled_state(client, flow_id)
            _register_check(load, state, current)
            rounds[key].append(load)
    logs = {key: servers[-1].log_tail(10) for key, servers in deps.items()}
    out = {}
    for key, done in rounds.items():
        out[key] = {
            **combine_rounds(done),
            "rounds": [{k: v for k, v in d.items() if k != "statuses"} for d in done],
            "state_ok": all(d["state_ok"] for d in done),
            "server_log_tail": None if all(d["state_ok"] for d in done) else logs[key],
        }
    return out


# -- RPC --------------------------------------------------------------------------------------


def _rpc(deps: dict[str, list[Server]], sizes: dict[str, Any]) -> dict[str, Any]:
    """RPCs/s on TARGETS distinct CounterFlows, every deployment in turn; counters checked."""
    rounds: dict[str, list[dict[str, Any]]] = {key: [] for key in DEPLOYMENTS}
    out = {}
    for servers in deps.values():
        for i, srv in enumerate(servers):
            ids = [f"{pg.counter_prefix(i)}{n}" for n in range(TARGETS // len(servers))]
            start_flows(srv.url, "CounterFlow", ids)
    for _ in range(sizes["rounds"]):
        for key, servers in deps.items():
            rounds[key].append(pg.rpc_load([s.url for s in servers], sizes["load_seconds"]))
    time.sleep(1.0)  # let replies wrk stopped reading finish committing
    for key, servers in deps.items():
        total = 0
        # Read every counter through the last process, so with two processes half of them
        # are read through the process that did not serve their RPCs.
        with httpx.Client(base_url=servers[-1].url, timeout=30.0) as client:
            for i in range(len(servers)):
                for n in range(TARGETS // len(servers)):
                    response = client.get(
                        f"/api/v1/flows/{pg.counter_prefix(i)}{n}/attributes",
                        params={"name": "Counter"},
                    )
                    response.raise_for_status()
                    total += response.json()["values"].get("Counter", 0)
        load = combine_rounds(rounds[key])
        _check(load, total, 0)
        if not rounds[key][0]["wrk"]:
            load["state_ok"] = load["state_ok"] and load["cut_off_in_flight"] == 0
        out[key] = load
    return out


# -- Flows ------------------------------------------------------------------------------------


def _flows_run(tmp: Path, key: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """One measured run of ``key``'s deployment on a fresh database (or SQLite file)."""
    where = tmp / f"flows-{key}-{os.urandom(3).hex()}"
    where.mkdir()
    processes = DEPLOYMENTS[key][1]
    with contextlib.ExitStack() as stack:
        if key == "sqlite":
            url = f"sqlite+aiosqlite:///{where}/dexlite.db"
        else:
            url = pg.engine_url(stack.enter_context(pg.fresh_database(f"flows_{key}")))
        load = os.getloadavg()[0]
        parts = pg.run_flows(url, processes, where, sizes)
    flows = sum(p["flows"] for p in parts)
    # Both workers measure from the same go signal: the span covers them both.
    wall = max(p["ended"] for p in parts) - min(p["started"] for p in parts)
    return {
        "flows": flows,
        "flows_per_second": round(flows / wall, 1),
        "wall_seconds": round(wall, 3),
        "per_process_flows_per_second": [round(p["flows"] / p["wall_seconds"], 1) for p in parts],
        "latency": latency_summary([s for p in parts for s in p["latencies_s"]]),
        "cpu_ms_per_flow": round(sum(p["cpu_seconds"] for p in parts) * 1000 / flows, 3),
        "completed_ok": sum(p["completed_ok"] for p in parts),
        "stored_completed": sum(p["stored_completed"] for p in parts),
        "wrong": [w for p in parts for w in p["wrong"]],
        "load_before": round(load, 2),
    }


def _flows(tmp: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    """Flows/s of every deployment, alternating in rounds; each keeps its best round."""
    rounds: dict[str, list[dict[str, Any]]] = {key: [] for key in DEPLOYMENTS}
    for _ in range(sizes["flow_rounds"]):
        for key in DEPLOYMENTS:
            rounds[key].append(_flows_run(tmp, key, sizes))
    out = {}
    for key, done in rounds.items():
        # The least disturbed round (the machine is shared); the spread shows the noise.
        best = max(done, key=lambda r: r["flows_per_second"])
        out[key] = {
            **best,
            "rounds_flows_per_second": [r["flows_per_second"] for r in done],
            "state_ok": all(r["completed_ok"] == r["flows"] == r["stored_completed"] for r in done),
        }
    return out


# -- scenario ---------------------------------------------------------------------------------


def _rate(kind: str, figures: dict[str, Any]) -> float:
    return float(figures["flows_per_second"] if kind == "flows" else figures["ok_per_second"])


def _ratios(results: dict[str, dict[str, Any]], tps: float) -> dict[str, float]:
    ratios: dict[str, float] = {}
    for kind, by_key in results.items():
        rate = {key: _rate(kind, figures) for key, figures in by_key.items()}
        ratios[f"{kind}: pg2_over_pg1"] = ratio(rate["pg2"], rate["pg1"])
        ratios[f"{kind}: pg1_over_sqlite"] = ratio(rate["pg1"], rate["sqlite"])
        for key in DEPLOYMENTS:
            # Engine operations are a few percent of pgbench's: keep four decimals.
            ratios[f"{kind}: {key}_over_pgbench_tps"] = round(rate[key] / tps, 4)
    return ratios


def _print(
    sizes: dict[str, Any],
    results: dict[str, dict[str, Any]],
    bench_runs: list[dict[str, Any]],
    tps: float,
    ratios: dict[str, float],
    note: str | None,
) -> None:
    heading("PostgreSQL: 1 vs 2 server processes on one database, vs SQLite, vs pgbench")
    print(
        f"  {CONNECTIONS} connections dealt round-robin to the processes' ports; "
        f"{sizes['rounds']} round(s) of {sizes['load_seconds']} s per deployment, alternating"
    )
    print(
        f"  Flows: {sizes['flows']} 3-Step Flows per process, {sizes['concurrency']} in flight "
        f"each, in-process Engines (best of {sizes['flow_rounds']} alternating rounds); each "
        "PostgreSQL run on a fresh database"
    )
    if note:
        print(f"  note: {note}")
    runs = ", ".join(f"{r['tps']:,.0f}" for r in bench_runs)
    print(
        f"  pgbench reference ({bench_runs[0]['command']}, fresh scale-1 database): "
        f"{tps:,.1f} TPS (mean of runs: {runs})"
    )
    names = [DEPLOYMENTS[key][0] for key in DEPLOYMENTS]
    print(f"  {'':<18}" + "".join(f"{n:>18}" for n in names) + f"{'PG2/PG1':>9}{'PG1/SQLite':>12}")
    for kind, by_key in results.items():
        cells = ""
        for key in DEPLOYMENTS:
            figures = by_key[key]
            verdict = "ok" if figures["state_ok"] else "BAD"
            cells += f"{_rate(kind, figures):>13,.1f} {verdict:>4}"
        print(
            f"  {KINDS[kind]:<18}{cells}{ratios[f'{kind}: pg2_over_pg1']:>8.2f}x"
            f"{ratios[f'{kind}: pg1_over_sqlite']:>11.2f}x"
        )
    print(
        "  ok: register every reply 201, sequences distinct, nextSequence-1 = 201s (+ wrk "
        "cut-offs);\n  RPC stored counters = 2xx (+ wrk cut-offs); Flows every result "
        "checked and counted as stored"
    )
    print("  latency p50 / p99 ms:")
    for kind, by_key in results.items():
        latencies = []
        for key in DEPLOYMENTS:
            f = by_key[key]
            if kind == "flows":
                p50, p99 = f["latency"]["p50_ms"], f["latency"]["p99_ms"]
            else:
                p50, p99 = f["p50_us"] / 1000, f["p99_us"] / 1000
            latencies.append(f"{key} {p50:.1f} / {p99:.1f}")
        print(f"    {KINDS[kind]:<18}" + ";  ".join(latencies))
    print("  each figure / pgbench TPS:")
    for kind in results:
        cells = "   ".join(
            f"{key} {ratios[f'{kind}: {key}_over_pgbench_tps']:.4f}x" for key in DEPLOYMENTS
        )
        print(f"    {KINDS[kind]:<18}{cells}")
    for kind, by_key in results.items():
        for key, figures in by_key.items():
            if not figures["state_ok"]:
                print(f"  {kind} {key} check FAILED: {_failure(kind, figures)}")
    print(
        "  note: the load generator, the servers and PostgreSQL share the machine's cores, "
        f"{os.cpu_count()} here"
    )


def _failure(kind: str, figures: dict[str, Any]) -> str:
    if kind == "flows":
        return f"{figures['completed_ok']}/{figures['stored_completed']} {figures['wrong']}"
    if kind == "rpc":
        return f"stored {figures['committed']}, 2xx {figures['ok']}, {figures['non_2xx']}"
    bad = [r for r in figures["rounds"] if not r["state_ok"]]
    keys = ("created_201", "next_sequence_minus_1", "non_201", "sequences")
    return f"{[{k: r[k] for k in keys} for r in bad]}\n{figures['server_log_tail']}"


def main(quick: bool) -> dict[str, Any]:
    """Measure register, RPC and Flow throughput on PostgreSQL (1 and 2 processes) and SQLite."""
    sizes = _sizes(quick)
    reason = pg.unavailable()
    if reason:
        heading("PostgreSQL: skipped")
        print(f"  {reason}")
        return {"skipped": reason}
    note = None if wrk_path() else wrk_missing_note()
    with temp_dir("postgres") as tmp:
        bench_runs = [pg.pgbench(sizes["pgbench_seconds"])]
        # One set of servers serves both HTTP loads (the register route and CounterFlow's
        # RPC), so each deployment starts once.
        with _deployments(tmp, "bench._server:register_and_rpc_app", "http") as deps:
            results = {"register": _register(deps, sizes), "rpc": _rpc(deps, sizes)}
        results["flows"] = _flows(tmp, sizes)
        if sizes["rounds"] > 1:  # a second reference at the end, to see the machine drift
            bench_runs.append(pg.pgbench(sizes["pgbench_seconds"]))
    tps = sum(r["tps"] for r in bench_runs) / len(bench_runs)
    ratios = _ratios(results, tps)
    _print(sizes, results, bench_runs, tps, ratios, note)
    ok = all(f["state_ok"] for by_key in results.values() for f in by_key.values())
    print(f"  every check passed: {'yes' if ok else 'NO'}")
    return {
        "sizes": sizes,
        "pgbench": {"runs": bench_runs, "tps": round(tps, 1)},
        **results,
        "ratios": ratios,
        "checks_ok": ok,
        "load_note": note,
    }
