"""Helpers of the postgres scenario: throwaway databases, pgbench, HTTP load spread over several
servers, and a 3-Step Flow worker on any database URL.

``python -m bench._postgres URL TAG N CONCURRENCY WARMUP DIR`` is that worker: an in-process
``engine.Engine`` on URL (SQLite or PostgreSQL) completes WARMUP unmeasured then N measured
3-Step Flows (``async def`` Steps, bench._flow_worker's), at most CONCURRENCY in flight, named
``TAG-...`` so several workers can share one database. Between the two it prints ``READY`` and
waits for a line on stdin, so that workers on one database measure at the same time; then it
prints one ``FLOWJSON {...}`` line with wall-clock start and end times.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench._common import LUA_DIR, REPO, fallback_summary, run_wrk, wrk_path
from bench._flow_worker import MARKER, RUN_DEADLINE_S, WAIT_SECONDS, _drive_async
from bench.http_register import BASE, WRK_THREADS
from bench.rpc_roundtrip import BODY, CONNECTIONS, FLOW_PREFIX, TARGETS

#: The server and an existing database to issue CREATE/DROP DATABASE from (overridable).
ADMIN_URL_ENV = "BENCH_POSTGRES_URL"
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: Every database this scenario creates starts with this, so nothing else is ever dropped.
DB_PREFIX = "dexlite_bench_"
PSQL_TIMEOUT_S = 60.0
WORKER_TIMEOUT_S = 300.0
READY = "READY"


# -- databases --------------------------------------------------------------------------------


def admin_url() -> str:
    """Return the libpq URL of the administrative database."""
    return os.environ.get(ADMIN_URL_ENV, DEFAULT_ADMIN_URL)


def engine_url(database: str) -> str:
    """Return the ``DEXLITE_DATABASE_URL`` of ``database`` on the admin URL's server."""
    parts = urlsplit(admin_url())
    return parts._replace(scheme="postgresql+asyncpg", path=f"/{database}").geturl()


def _client_args() -> list[str]:
    """Return psql/pgbench's -h/-p/-U for the admin URL's server."""
    parts = urlsplit(admin_url())
    args = ["-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432)]
    return args + ["-U", parts.username] if parts.username else args


def _psql(sql: str, database: str | None = None) -> str:
    database = database or urlsplit(admin_url()).path.lstrip("/") or "postgres"
    cmd = ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", *_client_args(), "-d", database]
    out = subprocess.run([*cmd, "-c", sql], capture_output=True, text=True, timeout=PSQL_TIMEOUT_S)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed ({sql}): {out.stderr.strip()}")
    return out.stdout.strip()


def unavailable() -> str | None:
    """Return why PostgreSQL cannot be measured here, or None when it can."""
    for tool in ("psql", "pgbench"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y postgresql-client)"
    try:
        _psql("SELECT 1")
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"PostgreSQL at {admin_url()} is not reachable: {exc}"
    return None


@contextlib.contextmanager
def fresh_database(tag: str) -> Iterator[str]:
    """Create an empty database named ``dexlite_bench_<tag>_<random>``; always drop it."""
    name = f"{DB_PREFIX}{tag}_{secrets.token_hex(4)}"
    _psql(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        # FORCE ends the connections of servers that did not close theirs in time.
        _psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pgbench(seconds: int, clients: int = 16, threads: int = 2) -> dict[str, Any]:
    """Run pgbench's simple-update script (-N) on a fresh scale-1 database; return its TPS."""
    with fresh_database("pgbench") as db:
        base = ["pgbench", *_client_args()]
        init = subprocess.run(
            [*base, "-i", "-s", "1", "-q", db], capture_output=True, text=True, timeout=120
        )
        if init.returncode != 0:
            raise RuntimeError(f"pgbench -i failed: {init.stderr.strip()}")
        run = [*base, "-N", "-c", str(clients), "-j", str(threads), "-T", str(seconds), db]
        out = subprocess.run(run, capture_output=True, text=True, timeout=seconds + 120)
    tps = re.search(r"^tps = ([\d.]+)", out.stdout, re.MULTILINE)
    if out.returncode != 0 or tps is None:
        raise RuntimeError(f"pgbench printed no tps (rc {out.returncode}):\n{out.stderr}")
    latency = re.search(r"^latency average = ([\d.]+) ms", out.stdout, re.MULTILINE)
    return {
        "tps": float(tps.group(1)),
        "latency_average_ms": float(latency.group(1)) if latency else None,
        "command": " ".join(["pgbench", "-N", "-c", str(clients), "-j", str(threads)])
        + f" -T {seconds}",
    }


# -- HTTP load over several servers -----------------------------------------------------------


def counter_prefix(server: int) -> str:
    """Return the Flow ID prefix of the ``server``-th server's share of the CounterFlows."""
    return f"{FLOW_PREFIX}{server}-"


def _merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge loads that ran at the same time, one per server, into one result."""
    if len(parts) == 1:
        return parts[0]
    statuses: dict[str, int] = {}
    for part in parts:
        for k, v in part["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    requests = sum(p["requests"] for p in parts)
    ok = sum(p["ok"] for p in parts)
    duration = max(p["duration_us"] for p in parts)

    def weighted(key: str) -> int:
        # Percentiles of the union are not kept; the request-weighted mean is close enough
        # for loads of the same shape, and p99/max take the worse part.
        return int(sum(p[key] * p["requests"] for p in parts) / max(requests, 1))

    merged: dict[str, Any] = {
        "requests": requests,
        "ok": ok,
        "duration_us": duration,
        "statuses": statuses,
        "socket_errors": sum(p.get("socket_errors", 0) for p in parts),
        "p50_us": weighted("p50_us"),
        "p90_us": weighted("p90_us"),
        "p99_us": max(p["p99_us"] for p in parts),
        "max_us": max(p["max_us"] for p in parts),
        "requests_per_second": round(requests / (duration / 1e6), 1),
        "ok_per_second": round(ok / (duration / 1e6), 1),
        "command": f"{len(parts)} x " + parts[0]["command"],
        "wrk": True,
    }
    if all("sequences" in p for p in parts):
        seqs = [p["sequences"] for p in parts]
        merged["sequences"] = {
            "acknowledged": sum(s["acknowledged"] for s in seqs),
            # Duplicates across the wrk processes are not seen here; the stored count catches
            # them (more 201s than committed registrations).
            "distinct": sum(s["distinct"] for s in seqs),
            "duplicates": sum(s["duplicates"] for s in seqs),
            "max": max(s["max"] for s in seqs),
        }
    return merged


def _wrk_spread(jobs: Sequence[tuple[str, Mapping[str, str]]], seconds: int) -> dict[str, Any]:
    """Run one wrk per (url, env) at once, the connections split evenly between them."""
    threads = max(1, WRK_THREADS // len(jobs))
    connections = CONNECTIONS // len(jobs)

    def one(job: tuple[str, Mapping[str, str]]) -> dict[str, Any]:
        url, env = job
        return run_wrk(
            url,
            LUA_DIR / "post.lua",
            threads=threads,
            connections=connections,
            seconds=seconds,
            env={**env, "BENCH_THREADS": str(threads)},
        )

    with ThreadPoolExecutor(len(jobs)) as pool:
        parts = list(pool.map(one, jobs))
    return {**_merge(parts), "wrk": True}


async def _httpx_spread(
    request_for: Callable[[int, int], tuple[str, bytes]], seconds: int, sequences: bool
) -> dict[str, Any]:
    """The fallback load when wrk is missing: CONNECTIONS asyncio workers on one client.

    Worker ``w``'s ``n``-th request is ``request_for(w, n)`` (URL, JSON body). Every reply is
    read, so no request is cut off in flight.
    """
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    acknowledged: list[int] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:

        async def worker(w: int) -> None:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                url, body = request_for(w, n)
                started = time.perf_counter()
                response = await client.post(url, content=body, headers=headers)
                latencies.append(time.perf_counter() - started)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if sequences and response.status_code == 201:
                    acknowledged.append(response.json()["sequence"])

        started = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(CONNECTIONS)))
        duration = time.monotonic() - started
    command = f"httpx asyncio fallback, {CONNECTIONS} connections, {seconds} s"
    out = {**fallback_summary(latencies, statuses, duration, command), "wrk": False}
    if sequences:
        out["sequences"] = {
            "acknowledged": len(acknowledged),
            "distinct": len(set(acknowledged)),
            "duplicates": len(acknowledged) - len(set(acknowledged)),
            "max": max(acknowledged, default=0),
        }
    return out


def register_load(urls: Sequence[str], flow_id: str, seconds: int) -> dict[str, Any]:
    """POST register to one Flow from CONNECTIONS connections, dealt round-robin to ``urls``."""
    paths = [f"{url}{BASE}/register?flowId={flow_id}" for url in urls]
    if wrk_path():
        return _wrk_spread([(path, {"BENCH_MODE": "register"}) for path in paths], seconds)

    def request_for(w: int, n: int) -> tuple[str, bytes]:
        body = json.dumps({"email": f"h{w}-{n}@bench.example", "name": f"Bench {w}-{n}"})
        return paths[w % len(paths)], body.encode()

    return asyncio.run(_httpx_spread(request_for, seconds, sequences=True))


def rpc_load(urls: Sequence[str], seconds: int) -> dict[str, Any]:
    """POST the increment RPC from CONNECTIONS connections dealt round-robin to ``urls``.

    Server ``i`` holds CounterFlows ``counter_prefix(i) + 0..TARGETS/len(urls)-1``; each connection
    rotates over a slice of its server's Flows of its own, so callers rarely collide.
    """
    share = TARGETS // len(urls)
    prefixes = [f"/api/v1/flows/{counter_prefix(i)}" for i in range(len(urls))]
    suffix = "/rpcs/increment"
    if wrk_path():
        jobs = [
            (
                f"{url}{prefix}0{suffix}",
                {
                    "BENCH_MODE": "rotate",
                    "BENCH_PREFIX": prefix,
                    "BENCH_SUFFIX": suffix,
                    "BENCH_BODY": BODY,
                    "BENCH_TARGETS": str(share),
                },
            )
            for url, prefix in zip(urls, prefixes, strict=True)
        ]
        return _wrk_spread(jobs, seconds)
    per = share // (CONNECTIONS // len(urls))
    body = BODY.encode()

    def request_for(w: int, n: int) -> tuple[str, bytes]:
        i = w % len(urls)
        target = (w // len(urls)) * per + n % per
        return f"{urls[i]}{prefixes[i]}{target}{suffix}", body

    return asyncio.run(_httpx_spread(request_for, seconds, sequences=False))


# -- 3-Step Flows -----------------------------------------------------------------------------


def run_flows(
    database_url: str, processes: int, tmp: Path, sizes: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run ``processes`` Flow workers on one database, measuring at the same time.

    Workers start one after another (the first applies the schema), each waits after its
    warm-up until all are ready. Returns each worker's FLOWJSON figures.
    """
    run = secrets.token_hex(4)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    procs: list[tuple[subprocess.Popen[str], Path]] = []

    def kill_all() -> None:
        for proc, _ in procs:
            proc.kill()

    # A stuck worker must not hang the whole bench: kill them all after the timeout.
    watchdog = threading.Timer(WORKER_TIMEOUT_S, kill_all)
    watchdog.start()
    try:
        for i in range(processes):
            log = tmp / f"flows-worker-{run}-{i}.log"
            cmd = [sys.executable, "-m", "bench._postgres", database_url, f"p{i}"]
            cmd += [str(sizes[k]) for k in ("flows", "concurrency", "warmup")]
            with log.open("w") as err:
                proc = subprocess.Popen(
                    [*cmd, str(tmp)],
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            procs.append((proc, log))
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != READY:
                raise RuntimeError(f"flow worker {i} did not get ready:\n{_tail(log)}")
        for proc, _ in procs:  # go: every worker is past its warm-up
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc, log in procs:
            stdout, _ = proc.communicate(timeout=WORKER_TIMEOUT_S)
            for line in stdout.splitlines():
                if line.startswith(MARKER):
                    results.append(json.loads(line[len(MARKER) :]))
                    break
            else:
                raise RuntimeError(
                    f"flow worker printed no result (rc {proc.returncode}):\n" + _tail(log)
                )
        return results
    finally:
        watchdog.cancel()
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


async def _worker(args: argparse.Namespace) -> dict[str, Any]:
    import engine
    from bench._flow_worker import ThreeStepAsyncFlow, expected

    flow = ThreeStepAsyncFlow()
    config = engine.EngineConfig(database_url=args.url, blob_dir=str(Path(args.dir) / "flow-blobs"))
    async with engine.Engine(engine.Registry([flow]), config) as eng:

        async def one(x: int) -> tuple[str, Any]:
            # Warm-up Flows (x < 0) get another prefix, so the stored count sees only ours.
            flow_id = f"{args.tag}-m{x}" if x >= 0 else f"{args.tag}-w{-x}"
            await eng.start_flow(flow, flow_id, x)
            deadline = time.monotonic() + RUN_DEADLINE_S
            while True:
                result = await eng.wait_for_flow(flow_id, wait_seconds=WAIT_SECONDS)
                if result.status != "RUNNING" or time.monotonic() > deadline:
                    break
            if result.status != "COMPLETED":
                return result.status, result.error_message
            return "ok", result.completions[0].output

        await _drive_async(one, -args.warmup, args.warmup, args.concurrency, expected)
        print(READY, flush=True)
        # The go signal: the parent writes a line once every worker is ready.
        await asyncio.to_thread(sys.stdin.readline)
        started = time.time()
        tally, wall, cpu = await _drive_async(one, 0, args.n, args.concurrency, expected)
        ended = time.time()
        stored, token = 0, ""
        query = f"Status = 'COMPLETED' AND FlowId STARTS_WITH '{args.tag}-m'"
        while True:
            page = await eng.search_flows(query, 1000, token, flow_type=flow.flow_type())
            stored += len(page.flows)
            token = page.next_page_token or ""
            if not token:
                break
    return {
        "tag": args.tag,
        "flows": args.n,
        "completed_ok": tally.ok,
        "stored_completed": stored,
        "wrong": tally.wrong,
        "latencies_s": tally.latencies,
        "started": started,
        "ended": ended,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
    }


def main(argv: list[str] | None = None) -> int:
    """Run one Flow worker and print its figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench._postgres")
    parser.add_argument("url")
    parser.add_argument("tag")
    parser.add_argument("n", type=int)
    parser.add_argument("concurrency", type=int)
    parser.add_argument("warmup", type=int)
    parser.add_argument("dir")
    args = parser.parse_args(argv)
    figures = asyncio.run(_worker(args))
    print(MARKER + json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
