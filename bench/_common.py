"""Helpers shared by the scenarios: machine facts, percentiles, servers and wrk."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.server import ServerProcess as Server

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
LUA_DIR = BENCH_DIR / "lua"


# -- machine ----------------------------------------------------------------------------------


def cpu_model() -> str:
    """Return the CPU model name from /proc/cpuinfo ("unknown" when unreadable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def wrk_path() -> str | None:
    """Return the wrk executable, or None when it is not installed."""
    return shutil.which("wrk")


#: The distributions whose versions head every run (None when one is not installed).
VERSIONED = ("fastapi", "uvicorn", "sqlalchemy", "pydantic", "aiosqlite", "asyncpg", "dbos")


def versions() -> dict[str, str | None]:
    """Return the installed version of each VERSIONED distribution (None when missing)."""
    found: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def machine() -> dict[str, Any]:
    """Describe the machine the figures were measured on, and the versions that ran."""
    wrk = wrk_path()
    wrk_version = None
    if wrk:
        out = subprocess.run([wrk, "--version"], capture_output=True, text=True, timeout=10)
        text = (out.stdout or out.stderr).strip()
        wrk_version = text.splitlines()[0] if text else None
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "wrk": wrk_version,
        "versions": versions(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def print_machine(info: Mapping[str, Any]) -> None:
    """Print the machine block that heads every run."""
    print("machine")
    print(f"  nproc        {info['nproc']} (usable by this process: {info['usable_cpus']})")
    print(f"  cpu          {info['cpu_model']}")
    print(f"  python       {info['python']}")
    print(f"  sqlite       {info['sqlite']}")
    print(f"  platform     {info['platform']}")
    print(f"  wrk          {info['wrk'] or 'not installed'}")
    shown = ", ".join(f"{k} {v or 'not installed'}" for k, v in info["versions"].items())
    print(f"  packages     {shown}")
    load = " ".join(f"{x:.2f}" for x in info["load_average"])
    print(f"  load average {load} (1, 5, 15 min; other work on the machine adds noise)")


# -- numbers ----------------------------------------------------------------------------------


def percentile(samples: Sequence[float], pct: float) -> float:
    """Return the ``pct`` percentile of ``samples`` (nearest rank; NaN when empty)."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, Any]:
    """Return count, p50, p99, mean and max of latencies given in seconds, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "count": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "mean_ms": round(sum(ms) / len(ms), 3) if ms else float("nan"),
        "max_ms": round(max(ms), 3) if ms else float("nan"),
    }


def ratio(a: float, b: float) -> float:
    """Return a / b rounded for printing (NaN when b is zero)."""
    return round(a / b, 2) if b else float("nan")


def heading(title: str) -> None:
    """Print a scenario heading."""
    print()
    print(f"== {title} " + "=" * max(0, 76 - len(title)))


# -- servers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """Yield a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"dexlite-bench-{prefix}-") as tmp:
        yield Path(tmp)


def dexlite_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Return the environment of a server on a temp database and blob directory in ``tmp``."""
    env = dict(os.environ)
    env.update(
        {
            "DEXLITE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/x.db",
            "DEXLITE_BLOB_DIR": str(tmp / "blobs"),
            "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def server(
    factory: str, env: Mapping[str, str], log_dir: Path, ready_path: str = "/healthz"
) -> Iterator[Server]:
    """Start ``uvicorn --factory <factory>`` on a free 127.0.0.1 port with the environment
    ``env`` and warning-level logs, output in ``log_dir``; always stop it.

    The tests' own harness (``tests.server.ServerProcess``) runs it, in a session of its own
    so that a Ctrl-C of the bench reaches the bench, which then stops its servers.
    """
    srv = Server(log_dir, factory, base_env=env, ready_path=ready_path, own_session=True)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def start_flows(url: str, flow_type: str, flow_ids: Sequence[str], parallel: int = 16) -> None:
    """Start ``flow_ids`` (input null) over HTTP, ``parallel`` at a time; raise on a non-2xx.

    Setup, not a measurement: parallel because one commit each, in a row, adds seconds.
    """

    async def run() -> None:
        limits = httpx.Limits(max_connections=parallel, max_keepalive_connections=parallel)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0) as client:

            async def starter(first: int) -> None:
                for flow_id in flow_ids[first::parallel]:
                    body = {"flowType": flow_type, "flowId": flow_id, "input": None}
                    (await client.post("/api/v1/flows", json=body)).raise_for_status()

            await asyncio.gather(*(starter(w) for w in range(parallel)))

    asyncio.run(run())


# -- wrk --------------------------------------------------------------------------------------

WRK_MARKER = "WRKJSON "


def run_wrk(
    url: str,
    script: Path,
    *,
    threads: int,
    connections: int,
    seconds: int,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run wrk with a Lua script whose ``done`` prints one ``WRKJSON {...}`` line.

    Returns that JSON (requests, statuses, latency percentiles in microseconds, ...) plus
    ``requests_per_second`` computed from it.
    """
    wrk = wrk_path()
    assert wrk is not None
    cmd = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    run_env = dict(os.environ)
    run_env.update(env or {})
    out = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith(WRK_MARKER):
            data: dict[str, Any] = json.loads(line[len(WRK_MARKER) :])
            break
    else:
        raise RuntimeError(
            f"wrk printed no result (rc {out.returncode}):\n{out.stdout}\n{out.stderr}"
        )
    duration = data["duration_us"] / 1e6
    data["requests_per_second"] = round(data["requests"] / duration, 1) if duration else 0.0
    data["ok_per_second"] = round(data["ok"] / duration, 1) if duration else 0.0
    data["command"] = " ".join(cmd[:-3] + [script.name])
    data["url"] = url
    return data


def combine_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum a load's rounds; p50 is the median of the rounds', p99 the worst round's."""
    statuses: dict[str, int] = {}
    for r in rounds:
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    duration = sum(r["duration_us"] for r in rounds)
    requests = sum(r["requests"] for r in rounds)
    ok = sum(r["ok"] for r in rounds)
    return {
        "requests": requests,
        "ok": ok,
        "duration_us": duration,
        "statuses": statuses,
        "socket_errors": sum(r.get("socket_errors", 0) for r in rounds),
        "p50_us": int(statistics.median(r["p50_us"] for r in rounds)),
        "p99_us": max(r["p99_us"] for r in rounds),
        "max_us": max(r["max_us"] for r in rounds),
        "requests_per_second": round(requests / (duration / 1e6), 1),
        "ok_per_second": round(ok / (duration / 1e6), 1),
        "round_ok_per_second": [round(r["ok"] / (r["duration_us"] / 1e6), 1) for r in rounds],
        "command": rounds[0]["command"],
    }


def wrk_missing_note() -> str:
    """Return how to install wrk."""
    return (
        "wrk is not installed; install it with `apt-get install -y wrk` (Debian). Falling "
        "back to an asyncio httpx load: the Python client saturates before the server, so "
        "these figures understate the server."
    )


def print_wrk(label: str, data: Mapping[str, Any]) -> None:
    """Print one wrk run."""
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(data.get("statuses", {}).items()))
    print(f"  {label}")
    print(
        f"    {data['requests_per_second']:>10,.1f} req/s   ({data['requests']} requests in "
        f"{data['duration_us'] / 1e6:.1f} s; 2xx/s {data['ok_per_second']:,.1f})"
    )
    p90 = f"p90 {data['p90_us'] / 1000:.2f} ms  " if "p90_us" in data else ""
    print(
        f"    latency p50 {data['p50_us'] / 1000:.2f} ms  {p90}p99 {data['p99_us'] / 1000:.2f} ms"
        f"  max {data['max_us'] / 1000:.2f} ms"
    )
    print(f"    statuses    {statuses or '-'}   socket errors {data.get('socket_errors', 0)}")


def fallback_summary(
    latencies: Sequence[float], statuses: Mapping[int, int], duration: float, command: str
) -> dict[str, Any]:
    """Summarize an httpx fallback load in the same shape as ``run_wrk``'s result."""
    ok = sum(c for s, c in statuses.items() if 200 <= s < 300)
    lat = latency_summary(latencies)
    return {
        "requests": len(latencies),
        "duration_us": int(duration * 1e6),
        "ok": ok,
        "statuses": {str(k): v for k, v in statuses.items()},
        "socket_errors": 0,
        "p50_us": int(lat["p50_ms"] * 1000),
        "p99_us": int(lat["p99_ms"] * 1000),
        "p90_us": int(percentile(latencies, 90) * 1e6),
        "max_us": int(lat["max_ms"] * 1000),
        "requests_per_second": round(len(latencies) / duration, 1),
        "ok_per_second": round(ok / duration, 1),
        "command": command,
    }
