"""Soak test: ``python -m soak --minutes 10`` (``make soak``).

One server (the bundled examples, SQLite with its default ``synchronous=FULL``, a fresh
database, 127.0.0.1 only) takes a mixed load from asyncio workers for the given time: Flow
starts (CounterFlow, ChannelFlow, and repeated IDs that must be 409 FLOW_ALREADY_STARTED),
increments on a few shared counters while HoldCounterLock Steps take their lock (409
RPC_LOCK_CONFLICT), searches that follow a page, Stream lists, reads and writes, Channel
publishes and moves. Every acknowledged write is recorded. Afterwards it checks that each
acknowledged start is there, that each counter equals its acknowledged increments exactly,
and that each Channel holds exactly the published messages not moved (and the moved ones were
consumed). It fails (exit 1) on any answer outside 2xx except those 409s and 429, on any
transport error, on a failed check, or when the server's resident memory passed the bound.
The summary is printed and saved to ``soak/results/soak.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench._common import dexlite_env, machine, percentile, server, temp_dir
from soak.checks import check_channels, check_counters, check_starts
from soak.load import API, MIX, Ledger, Load, allowed, rss_mb, sample_rss

RESULTS = Path(__file__).resolve().parent / "results" / "soak.json"


def summarize(
    ledger: Ledger, seconds: float, rss: list[float], rss_end: float | None
) -> dict[str, Any]:
    """Return operation counts, rates, latencies and errors of the load."""
    operations = {}
    for kind in sorted(ledger.sent, key=lambda k: -ledger.sent[k]):
        ms = [s * 1000 for s in ledger.latencies[kind]]
        operations[kind] = {
            "sent": ledger.sent[kind],
            "ok": ledger.ok[kind],
            "refused": ledger.refused[kind],
            "per_second": round(ledger.sent[kind] / seconds, 1),
            "p50_ms": round(percentile(ms, 50), 2) if ms else None,
            "p99_ms": round(percentile(ms, 99), 2) if ms else None,
        }
    total = sum(ledger.sent.values())
    errors = [
        {"status": status, "code": code, "count": count, "allowed": allowed(status, code)}
        for (status, code), count in sorted(ledger.errors.items())
    ]
    return {
        "operations": operations,
        "total": {"sent": total, "per_second": round(total / seconds, 1)},
        "errors": errors,
        "unexpected_examples": ledger.examples,
        "acknowledged": {
            "starts": len(ledger.started),
            "increments": sum(ledger.increments.values()),
            "publications": sum(len(p) for p in ledger.published.values()),
            "moves": sum(len(m) for m in ledger.moved.values()),
        },
        "rss_mb": {
            "start": round(rss[0], 1) if rss else None,
            "max": round(max([*rss, rss_end or 0.0]), 1) if rss else None,
            "end": round(rss_end, 1) if rss_end is not None else None,
            "samples": len(rss),
            # One sample every --rss-every seconds from the start of the load: the trend.
            "series": [round(mb, 1) for mb in rss],
        },
    }


async def soak(url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    """Set up the shared Flows, run the load, check it, and return the summary."""
    rng = random.Random(args.seed)
    ledger = Ledger()
    limits = httpx.Limits(max_connections=args.workers, max_keepalive_connections=args.workers)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0) as client:
        counters = [f"soak-counter-{i}" for i in range(args.counters)]
        channels = [f"soak-channel-{i}" for i in range(args.channels)]
        for flow_id in counters:
            body = {
                "flowType": "CounterFlow",
                "flowId": flow_id,
                "options": {"initialAttributes": {"counter": 0}},
            }
            (await client.post(f"{API}/flows", json=body)).raise_for_status()
        for flow_id in channels:
            body = {"flowType": "ChannelFlow", "flowId": flow_id}
            (await client.post(f"{API}/flows", json=body)).raise_for_status()
        load = Load(client, ledger, counters, channels, rng, args.mix)
        rss: list[float] = []
        sampler = asyncio.create_task(sample_rss(pid, rss, args.rss_every))
        began = time.monotonic()
        until = began + args.duration
        await asyncio.gather(*(load.worker(until) for _ in range(args.workers)))
        seconds = time.monotonic() - began
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        checks = {
            "starts": await check_starts(client, ledger),
            "counters": await check_counters(client, ledger, counters),
            "channels": await check_channels(client, ledger, channels),
        }
        rss_end = rss_mb(pid)
    summary = summarize(ledger, seconds, rss, rss_end)
    summary["checks"] = checks
    summary["duration_seconds"] = round(seconds, 1)
    return summary


def verdict(summary: dict[str, Any], max_rss_mb: float) -> list[str]:
    """Return why the soak failed (empty when it passed)."""
    reasons = []
    for error in summary["errors"]:
        if not error["allowed"]:
            reasons.append(f"{error['count']} answers {error['status']} {error['code']}")
    checks = summary["checks"]
    if not checks["starts"]["ok"]:
        reasons.append(f"starts missing: {checks['starts']['missing']}")
    reasons += [f"counter {c['flowId']}: {c}" for c in checks["counters"] if not c["ok"]]
    reasons += [f"channel {c['flowId']}: {c}" for c in checks["channels"] if not c["ok"]]
    peak = summary["rss_mb"]["max"]
    if peak is not None and peak > max_rss_mb:
        reasons.append(f"server RSS reached {peak} MB (bound {max_rss_mb:g} MB)")
    return reasons


def print_summary(summary: dict[str, Any]) -> None:
    """Print the figures as tables."""
    print(
        f"soak: {summary['duration_seconds']} s, {summary['workers']} workers, "
        f"{summary['counters']} shared counters, {summary['channels']} ChannelFlows, "
        "SQLite synchronous=FULL, 127.0.0.1"
    )
    print(
        f"  {'operation':<13}{'sent':>9}{'2xx':>9}{'409/429':>9}{'per s':>9}{'p50 ms':>9}"
        f"{'p99 ms':>9}"
    )
    for kind, op in summary["operations"].items():
        print(
            f"  {kind:<13}{op['sent']:>9}{op['ok']:>9}{op['refused']:>9}{op['per_second']:>9}"
            f"{op['p50_ms']:>9}{op['p99_ms']:>9}"
        )
    total = summary["total"]
    print(f"  {'total':<13}{total['sent']:>9}{'':>27}{total['per_second']:>9}")
    print("  answers outside 2xx")
    for error in summary["errors"] or [{"status": "-", "code": "none", "count": 0, "allowed": 1}]:
        mark = "allowed" if error["allowed"] else "UNEXPECTED"
        print(f"    {error['status']} {error['code']:<24}{error['count']:>9}  {mark}")
    acked = summary["acknowledged"]
    checks = summary["checks"]
    print("  acknowledged writes")
    starts = checks["starts"]
    print(f"    starts         {starts['acknowledged']} acknowledged, {starts['found']} found")
    for c in checks["counters"]:
        print(
            f"    {c['flowId']:<15}{c['acknowledged']} increments acknowledged, value "
            f"{c['value']}  {'ok' if c['ok'] else 'MISMATCH'}"
        )
    for c in checks["channels"]:
        print(
            f"    {c['flowId']:<15}{c['published']} published, {c['moved']} moved, "
            f"{c['pending']} pending (expected {c['expectedPending']}), {c['unconsumed']} "
            f"unconsumed, handled keeps {c['handledKept']}  {'ok' if c['ok'] else 'MISMATCH'}"
        )
    print(f"    totals         {acked}")
    rss = summary["rss_mb"]
    print(
        f"  server RSS MB  start {rss['start']}  max {rss['max']}  end {rss['end']}  "
        f"bound {rss['bound']:g} ({rss['samples']} samples)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit 1 when an unexpected error, a failed check or the RSS bound occurred."""
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="load duration (default 10)")
    parser.add_argument("--seconds", type=float, help="load duration in seconds (overrides)")
    parser.add_argument("--workers", type=int, default=16, help="concurrent workers")
    parser.add_argument("--counters", type=int, default=4, help="shared CounterFlows")
    parser.add_argument("--channels", type=int, default=2, help="shared ChannelFlows")
    parser.add_argument("--max-rss-mb", type=float, default=400.0, help="server RSS bound")
    parser.add_argument("--rss-every", type=float, default=2.0, help="RSS sampling period (s)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the operation mix")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="KIND",
        choices=sorted(MIX),
        help="leave this operation out of the mix (repeatable)",
    )
    args = parser.parse_args(argv)
    args.mix = {kind: weight for kind, weight in MIX.items() if kind not in args.without}
    args.duration = args.seconds if args.seconds is not None else args.minutes * 60
    with temp_dir("soak") as tmp:
        env = dexlite_env(tmp, DEXLITE_LOG_LEVEL="warning")
        with server("app.main:create_app", env, tmp) as srv:
            summary = asyncio.run(soak(srv.url, srv.process.pid, args))
        # The server's whole output, next to the JSON, for whoever reads a failure.
        server_log = args.output.with_suffix(".server.log")
        server_log.parent.mkdir(parents=True, exist_ok=True)
        server_log.write_bytes(srv.log_path.read_bytes())
        log_tail = srv.log_tail()
    summary.update(
        workers=args.workers, counters=args.counters, channels=args.channels, mix=args.mix
    )
    summary["rss_mb"]["bound"] = args.max_rss_mb
    summary["machine"] = machine()
    summary["failures"] = verdict(summary, args.max_rss_mb)
    summary["passed"] = not summary["failures"]
    print_summary(summary)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"  saved to {args.output}")
    if summary["failures"]:
        print("FAIL")
        for reason in summary["failures"]:
            print(f"  {reason}")
        for key, text in summary["unexpected_examples"].items():
            print(f"  first {key}: {text[:300]}")
        print(f"server log ({server_log}) ends:\n{log_tail}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
