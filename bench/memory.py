"""Server memory under sustained RPC load (goal 5a and 5b): ``make bench-memory``.

``python -m bench.memory [--flows N] [--rpcs M] [--minutes T]`` starts one server
(``uvicorn --factory bench._server:rpc_app``, SQLite with its default synchronous=FULL, a
fresh database, 127.0.0.1 only), then:

1. starts N CounterFlows over HTTP with wrk (``POST /api/v1/flows``, in chunks; each start
   carries a request ID of its own, so one sent again is never a second run), then checks
   the server's open-run gauge says N;
2. drives at least M increment RPCs over HTTP with wrk (16 connections, 2 threads), each
   thread cycling through its own half of the N Flows, so consecutive RPCs hit distinct
   Flows; wrk runs in chunks of at most 30 s, each going on where the last stopped;
3. keeps the same load for T more minutes (the final phase).

The server's resident memory (VmRSS of its process, in MiB) is sampled every few seconds
throughout. Reported: RSS after the Flows, after the M RPCs, the maximum, and over the final
phase the least-squares slope (MB/min) and last-minus-first. The rule: PASS when the maximum
stays under 300 MB and the final phase grows by less than 5 MB both ways of measuring it
(slope x T, and last sample minus first): page-granular RSS and the allocator move by a few
MB without a leak, while a leak of even 1 KB per RPC at these rates passes 5 MB in minutes.

The summary is printed and saved to ``bench/results/memory.json``, which ``python -m bench``'s
goals table reads (with its date). Defaults are the goal's sizes; on this 2-core machine
(some hundreds of RPCs/s over HTTP, the load generator sharing the cores) that is most of an
hour, which is why it is not part of ``make bench``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench._common import (
    LUA_DIR,
    dexlite_env,
    machine,
    print_machine,
    run_wrk,
    server,
    temp_dir,
    wrk_path,
)
from bench._soak_load import rss_mb

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"
FLOW_PREFIX = "bench-memory-"
CONNECTIONS = 16
WRK_THREADS = 2
CHUNK_SECONDS = 30
MAX_RSS_MB = 300.0
MAX_GROWTH_MB = 5.0
#: The goal's own sizes: a run at least this big can PASS goal 5, a smaller one only shows.
GOAL_SIZES = {"flows": 100_000, "rpcs": 1_000_000, "minutes": 10.0}


class Sampler:
    """Sample a process's RSS every ``every`` seconds on a thread, with the phase it is in."""

    def __init__(self, pid: int, every: float) -> None:
        self.pid = pid
        self.every = every
        self.phase = "start"
        self.samples: list[tuple[float, str, float]] = []  # (seconds since start, phase, MB)
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> float | None:
        """Take one sample now and return it (None when the process is gone)."""
        value = rss_mb(self.pid)
        if value is not None:
            self.samples.append((round(time.monotonic() - self._began, 1), self.phase, value))
        return value

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def of(self, phase: str) -> list[tuple[float, float]]:
        """Return (seconds, MB) of the samples taken in ``phase``."""
        return [(t, mb) for t, p, mb in self.samples if p == phase]


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Return the least-squares slope of (seconds, MB) points in MB per minute (0 if < 2)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (y - mean_y) for t, y in points)
    return cov / var * 60


def _wrk(url: str, mode: str, flows: int, seconds: int, offset: int) -> dict[str, Any]:
    return run_wrk(
        url,
        LUA_DIR / "post.lua",
        threads=WRK_THREADS,
        connections=CONNECTIONS,
        seconds=seconds,
        env={
            "BENCH_MODE": mode,
            "BENCH_PREFIX": FLOW_PREFIX if mode == "start" else f"/api/v1/flows/{FLOW_PREFIX}",
            "BENCH_SUFFIX": "/rpcs/increment",
            "BENCH_BODY": '{"input":1}',
            "BENCH_TARGETS": str(flows),
            "BENCH_THREADS": str(WRK_THREADS),
            "BENCH_OFFSET": str(offset),
            "BENCH_FLOW_TYPE": "CounterFlow",
        },
    )


def open_runs(url: str) -> int:
    """Return the server's open CounterFlow runs, from its /metrics gauge."""
    text = httpx.get(f"{url}/metrics", timeout=30.0).text
    for line in text.splitlines():
        if line.startswith("dexlite_open_runs{") and 'flow_type="CounterFlow"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def start_flows(url: str, count: int, sampler: Sampler) -> dict[str, Any]:
    """Start CounterFlows 0 .. count - 1 over HTTP with wrk, in chunks; check the count.

    A chunk's thread ``t`` starts Flows ``(offset + k) * threads + t``; the next chunk goes on
    from the fewest starts a thread surely had answered (a start sent twice answers 200
    without a new run: same request ID).
    """
    offset, chunks, rate = 0, 0, 0.0
    statuses: dict[str, int] = {}
    began = time.perf_counter()
    in_flight = CONNECTIONS // WRK_THREADS
    while offset * WRK_THREADS < count:
        left = count - offset * WRK_THREADS
        chunk_s = 5 if rate <= 0 else int(min(CHUNK_SECONDS, left / rate + 2))
        got = _wrk(f"{url}/api/v1/flows", "start", count, max(2, chunk_s), offset)
        chunks += 1
        for status, n in got["statuses"].items():
            statuses[status] = statuses.get(status, 0) + n
        bad = {k: v for k, v in got["statuses"].items() if not k.startswith("2")}
        if bad or got.get("socket_errors", 0):
            raise RuntimeError(f"starting the Flows answered {bad}, {got.get('errors')}")
        # A thread with replies missing may have any of its last in_flight starts unanswered.
        sure = [
            sent - (in_flight if answered < sent else 0)
            for sent, answered in zip(got["issued"], got["started"], strict=True)
        ]
        done = min(sure)
        if done <= 0:
            raise RuntimeError(f"a start chunk of {chunk_s} s sent only {got['issued']} starts")
        rate = done * WRK_THREADS / (got["duration_us"] / 1e6)
        offset += done
        print(
            f"  [flows] about {min(count, offset * WRK_THREADS):,} of {count:,} started, "
            f"{rate:,.0f}/s; RSS {sampler.sample() or 0:.1f} MB",
            flush=True,
        )
    seconds = time.perf_counter() - began
    found = open_runs(url)
    if found != count:
        raise RuntimeError(f"the server has {found} open CounterFlows, wanted {count}")
    return {
        "flows": count,
        "open_runs": found,
        "chunks": chunks,
        "statuses": statuses,
        "seconds": round(seconds, 1),
        "per_second": round(count / seconds, 1),
    }


class Load:
    """The RPC load, in wrk chunks; keeps the totals and where the next chunk starts."""

    def __init__(self, url: str, flows: int, sampler: Sampler) -> None:
        self.url, self.flows, self.sampler = url, flows, sampler
        self.offset = 0
        self.totals: dict[str, Any] = {"requests": 0, "ok": 0, "socket_errors": 0, "statuses": {}}

    def chunk(self, seconds: int) -> dict[str, Any]:
        """Run one chunk of ``seconds``; add it to the totals and print a progress line."""
        path = f"{self.url}/api/v1/flows/{FLOW_PREFIX}0/rpcs/increment"
        got = _wrk(path, "rotate", self.flows, seconds, self.offset)
        # Go on past the furthest any thread got, and past the RPCs it may still have had in
        # flight (the server finishes those after wrk stops): a Flow is never hit by two at
        # once, which would be a lock conflict (409).
        self.offset += max(got["issued"]) + CONNECTIONS // WRK_THREADS
        for key in ("requests", "ok", "socket_errors"):
            self.totals[key] += got.get(key, 0)
        for status, n in got["statuses"].items():
            self.totals["statuses"][status] = self.totals["statuses"].get(status, 0) + n
        rss = self.sampler.sample()
        if got["ok"] == 0:  # nothing is being served: say why instead of looping forever
            raise RuntimeError(f"a chunk of {seconds} s got no 2xx: {got['statuses']}")
        print(
            f"  [{self.sampler.phase}] {self.totals['ok']:,} RPCs so far, this chunk "
            f"{got['ok_per_second']:,.0f}/s, statuses {got['statuses']}; RSS {rss or 0:.1f} MB",
            flush=True,
        )
        return got

    def until_count(self, rpcs: int) -> None:
        """Run chunks until at least ``rpcs`` 2xx in total; each sized to end near it."""
        rate = 0.0
        while self.totals["ok"] < rpcs:
            left = rpcs - self.totals["ok"]
            # A short first chunk finds the rate; the others are sized to end near ``rpcs``.
            seconds = 5 if rate <= 0 else int(min(CHUNK_SECONDS, left / rate + 1))
            rate = self.chunk(max(2, seconds))["ok_per_second"]

    def for_minutes(self, minutes: float) -> None:
        """Run chunks for ``minutes`` of wall time."""
        end = time.monotonic() + minutes * 60
        while (left := end - time.monotonic()) >= 1:
            self.chunk(int(min(CHUNK_SECONDS, left)))


def _summary(
    args: argparse.Namespace, sampler: Sampler, starts: dict[str, Any], load: Load, rpcs: int
) -> dict[str, Any]:
    final = sampler.of("final")
    first_phase = sampler.of("rpcs")
    all_mb = [mb for _, _, mb in sampler.samples]
    slope = slope_per_minute(final)
    last_minus_first = final[-1][1] - final[0][1] if final else 0.0
    rss_ok = bool(all_mb) and max(all_mb) < MAX_RSS_MB
    growth_ok = bool(final) and slope * args.minutes < MAX_GROWTH_MB
    growth_ok = growth_ok and last_minus_first < MAX_GROWTH_MB
    full_size = (
        args.flows >= GOAL_SIZES["flows"]
        and args.rpcs >= GOAL_SIZES["rpcs"]
        and args.minutes >= GOAL_SIZES["minutes"]
    )
    flows_phase = sampler.of("flows")
    return {
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "flows": args.flows,
        "rpcs": args.rpcs,
        "minutes": args.minutes,
        "full_size": full_size,
        "starts": starts,
        "load": {
            **load.totals,
            "rpcs_first_phase": rpcs,
            "non_2xx": {k: v for k, v in load.totals["statuses"].items() if not k.startswith("2")},
            "command": f"wrk -t{WRK_THREADS} -c{CONNECTIONS} post.lua rotate, chunks of "
            f"<= {CHUNK_SECONDS} s",
        },
        "rss_mb": {
            "start": round(all_mb[0], 1) if all_mb else None,
            "after_flows": round(flows_phase[-1][1], 1) if flows_phase else None,
            "after_first_phase": round(first_phase[-1][1], 1) if first_phase else None,
            "max": round(max(all_mb), 1) if all_mb else None,
            "final_phase": {
                "first": round(final[0][1], 1) if final else None,
                "last": round(final[-1][1], 1) if final else None,
                "last_minus_first_mb": round(last_minus_first, 2),
                "slope_mb_per_min": round(slope, 3),
                "samples": len(final),
            },
            "every_seconds": args.sample_every,
            "series": [[t, phase, round(mb, 1)] for t, phase, mb in sampler.samples],
        },
        "verdict": {
            "rss_ok": rss_ok,
            "growth_ok": growth_ok,
            "rule": f"max RSS < {MAX_RSS_MB:g} MB; over the final phase slope x minutes and "
            f"last - first both < {MAX_GROWTH_MB:g} MB",
        },
        "pass": rss_ok and growth_ok,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, run the three phases while sampling RSS, and return the summary."""
    with temp_dir("memory") as tmp, server("bench._server:rpc_app", dexlite_env(tmp), tmp) as srv:
        with Sampler(srv.process.pid, args.sample_every) as sampler:
            print(f"  server pid {srv.process.pid}, RSS {sampler.sample() or 0:.1f} MB", flush=True)
            sampler.phase = "flows"
            starts = start_flows(srv.url, args.flows, sampler)
            print(
                f"  [flows] {starts['open_runs']:,} open Flows on the server after "
                f"{starts['seconds']} s ({starts['per_second']:,.0f}/s); "
                f"RSS {sampler.sample() or 0:.1f} MB",
                flush=True,
            )
            load = Load(srv.url, args.flows, sampler)
            sampler.phase = "rpcs"
            load.until_count(args.rpcs)
            rpcs = load.totals["ok"]
            sampler.sample()
            sampler.phase = "final"
            sampler.sample()
            load.for_minutes(args.minutes)
            sampler.sample()
        if srv.process.poll() is not None:
            raise RuntimeError(f"the server died:\n{srv.log_tail()}")
    return _summary(args, sampler, starts, load, rpcs)


def _print(summary: dict[str, Any]) -> None:
    rss, load, verdict = summary["rss_mb"], summary["load"], summary["verdict"]
    final = rss["final_phase"]
    print()
    print(
        f"== memory: {summary['flows']:,} Flows, {load['rpcs_first_phase']:,} RPCs, then "
        f"{summary['minutes']:g} more minutes =="
    )
    print(
        f"  RSS start {rss['start']} MB, after the Flows {rss['after_flows']} MB, after the RPCs "
        f"{rss['after_first_phase']} MB, max {rss['max']} MB"
    )
    print(
        f"  final phase ({final['samples']} samples): {final['first']} -> {final['last']} MB, "
        f"last - first {final['last_minus_first_mb']:+.2f} MB, slope "
        f"{final['slope_mb_per_min']:+.3f} MB/min"
    )
    print(
        f"  RPCs in all {load['ok']:,} 2xx of {load['requests']:,}; non-2xx "
        f"{load['non_2xx'] or 'none'}; socket errors {load['socket_errors']}"
    )
    print(f"  rule: {verdict['rule']}")
    print(
        f"  RSS {'ok' if verdict['rss_ok'] else 'TOO HIGH'}, growth "
        f"{'ok' if verdict['growth_ok'] else 'TOO MUCH'}: {'PASS' if summary['pass'] else 'FAIL'}"
        + ("" if summary["full_size"] else " (smaller than the goal's sizes: not goal 5's verdict)")
    )


def main(argv: list[str] | None = None) -> int:
    """Run the memory scenario; exit 1 when it fails its rule or cannot run."""
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--flows", type=int, default=GOAL_SIZES["flows"])
    parser.add_argument("--rpcs", type=int, default=GOAL_SIZES["rpcs"])
    parser.add_argument("--minutes", type=float, default=GOAL_SIZES["minutes"])
    parser.add_argument("--sample-every", type=float, default=5.0, metavar="SECONDS")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.flows < WRK_THREADS or args.rpcs < 1 or args.minutes <= 0:
        parser.error("--flows must be at least 2, --rpcs and --minutes positive")
    if not wrk_path():
        print("wrk is not installed; install it with `apt-get install -y wrk` (Debian)")
        return 1
    info = machine()
    print_machine(info)
    print(f"  memory       {args.flows:,} Flows, {args.rpcs:,} RPCs, then {args.minutes:g} min")
    summary = {"machine": info, **run(args)}
    _print(summary)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"  saved to {args.output}")
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
