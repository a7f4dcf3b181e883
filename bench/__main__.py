"""Run the benchmark scenarios: ``python -m bench [--quick] [--only NAME ...]``.

Prints the machine (and the versions that ran) first, a progress line as each scenario
starts, each scenario's block, and at the end the goals table (``bench/goals.toml``, judged by
``bench._goals``); saves every figure and that table (``"goals"``) to
``bench/results/latest.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import machine, print_machine
from bench._goals import as_json, goals, load_memory, print_goals

#: Scenario modules, run in this order. A module that does not exist yet is skipped.
MODULES = [
    "chunked_append",
    "http_register",
    "rpc_roundtrip",
    "streams",
    "flow_throughput",
    "channels",
    "search",
    "postgres",
    "costs",
    "change_log",
    "schedules",
    "client_hop",
    "accelerations",
]
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios and save their figures; exit 1 when one of them failed."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shrink sizes and durations")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=MODULES,
        help="run only this scenario (repeatable)",
    )
    args = parser.parse_args(argv)
    chosen = [m for m in MODULES if not args.only or m in args.only]

    info = machine()
    print_machine(info)
    print(f"  mode         {'quick' if args.quick else 'full'}; scenarios: {', '.join(chosen)}")
    results: dict[str, Any] = {
        "machine": info,
        "quick": args.quick,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "scenarios": {},
    }
    failed = False
    began = time.monotonic()
    for index, name in enumerate(chosen, 1):
        spent = _clock(time.monotonic() - began)
        print(f"\n[{index}/{len(chosen)}] {name}: starting, {spent} into the run", flush=True)
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bench.{name}":
                raise
            print(f"\n== {name}: skipped (bench/{name}.py does not exist yet)")
            results["scenarios"][name] = {"skipped": "module missing"}
            continue
        started = time.monotonic()
        load_before = os.getloadavg()[0]
        try:
            figures = module.main(args.quick)
        except Exception:  # one broken scenario must not hide the others' figures
            failed = True
            print(f"\n== {name}: FAILED")
            traceback.print_exc()
            results["scenarios"][name] = {"error": traceback.format_exc()}
            continue
        elapsed = time.monotonic() - started
        load_after = os.getloadavg()[0]
        print(
            f"  ({name} took {elapsed:.1f} s; 1-minute load average {load_before:.2f} before, "
            f"{load_after:.2f} after, on {info['nproc']} CPUs)"
        )
        results["scenarios"][name] = {
            "seconds": round(elapsed, 1),
            "load_average": [round(load_before, 2), round(load_after, 2)],
            **figures,
        }

    rows = goals(results, load_memory())
    print_goals(rows, args.quick, info)
    total = time.monotonic() - began
    print(f"  all scenarios took {_clock(total)}")
    results["goals"] = as_json(rows)
    results["seconds"] = round(total, 1)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n")
    shown = RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS
    print(f"\nresults saved to {shown}")
    return 1 if failed else 0


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


if __name__ == "__main__":
    sys.exit(main())
