"""Flow throughput (3-Step Flows to completion) vs DBOS Transact on the same SQLite file system,
and a parent with three SubFlows (child workflows on DBOS) against the 3-Step Flow.

Both sides run the same shape of work: a Flow (a DBOS workflow) of three trivial Steps A → B → C
(x + 1, x * 2, x - 1), N of them started with at most CONCURRENCY in flight, each awaited to
completion; the figure is Flows completed per second of wall time and each Flow's time from the
start call to its result (p50/p99).

- dexlite: an in-process ``engine.Engine`` on a SQLite file with the server's defaults (WAL,
  synchronous=FULL, one writer with group commit); ``start_flow`` then
  ``wait_for_flow(wait_seconds=60)`` from asyncio tasks. Once with ``async def`` Steps, once
  with ``def`` Steps (those run in the engine's Step threads).
- SubFlows: a parent Flow whose one Step waits for three one-Step child Flows
  (``Wait.all_of`` of three ``SubFlow.run``; x + 1, x * 2, x - 1) and completes with their
  sum, so each parent is four runs and four Steps; DBOS: a workflow that starts three child
  workflows of one step each and sums their results. The parent-with-3-children rate is also
  shown against the 3-Step Flow's of the same run.
- DBOS Transact for Python (the ``bench`` extra), system database on SQLite: an ``async def``
  workflow driven by ``start_workflow_async`` + ``get_result`` from asyncio tasks, and a ``def``
  workflow driven by ``start_workflow`` + ``get_result`` from CONCURRENCY client threads. DBOS
  as shipped leaves SQLite's rollback journal (journal_mode=DELETE, synchronous=FULL); the
  ``WAL`` rows switch its fresh database file to WAL first (still synchronous=FULL), as
  dexlite uses, to show how much of the gap is the journal.

Every run is a fresh interpreter (``python -m bench._flow_worker``, this interpreter) on a fresh
temp directory, so DBOS's global state dies with its process, and neither side inherits
threads, caches or garbage from the other or from earlier scenarios. Each run first completes
some unmeasured warm-up Flows. The variants alternate between the sides, in one round (the
slowest DBOS variants run at a few Flows/s, and ``make bench`` has ten minutes for everything);
with more rounds each variant reports its best (the machine is shared; every round's rate is
printed too). Both sides check every result (status and output) and then count the completed
runs in their own database; the figures count only if every round completed every Flow.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

from bench._common import REPO, heading, latency_summary, ratio, temp_dir
from bench._flow_worker import MARKER

INSTALL_HINT = (
    "DBOS Transact is not installed, so only dexlite's figures are shown; install it with "
    "`.venv/bin/pip install -e '.[bench]'` (`make bench` does)"
)
RUN_TIMEOUT_S = 300.0

#: (label, side, steps, extra worker arguments), run in this order.
VARIANTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("dexlite async def", "dexlite", "async", ()),
    ("DBOS async def", "dbos", "async", ()),
    ("dexlite def", "dexlite", "def", ()),
    ("DBOS def+threads", "dbos", "def", ()),
    ("DBOS async WAL", "dbos", "async", ("--wal",)),
    ("DBOS def WAL", "dbos", "def", ("--wal",)),
    ("dexlite 3 SubFlows", "dexlite", "subflows", ()),
    ("DBOS 3 children", "dbos", "subflows", ()),
]

#: (dexlite label, DBOS label) pairs whose ratios are printed.
PAIRS = [
    ("dexlite async def", "DBOS async def"),
    ("dexlite def", "DBOS def+threads"),
    ("dexlite async def", "DBOS async WAL"),
    ("dexlite def", "DBOS def WAL"),
    ("dexlite 3 SubFlows", "DBOS 3 children"),
]


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"flows": 100, "subflow_flows": 60, "concurrency": 64, "warmup": 16, "rounds": 1}
    # One round, and half as many parents with SubFlows (four runs each): the slowest DBOS
    # variants run at a few Flows/s here, and make bench has ten minutes for every scenario.
    return {"flows": 240, "subflow_flows": 120, "concurrency": 64, "warmup": 32, "rounds": 1}


def dbos_available() -> bool:
    """Return whether DBOS Transact is installed (found without importing it here)."""
    try:
        return importlib.util.find_spec("dbos") is not None
    except (ImportError, ValueError):
        return False


def _run_worker(side: str, steps: str, extra: tuple[str, ...], sizes: dict[str, Any]) -> Any:
    with temp_dir(f"flows-{side}") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "bench._flow_worker",
            side,
            steps,
            str(sizes["subflow_flows" if steps == "subflows" else "flows"]),
            str(sizes["concurrency"]),
            str(sizes["warmup"]),
            str(tmp),
            *extra,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        load = os.getloadavg()[0]
        out = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
    for line in out.stdout.splitlines():
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER) :])
            data["load_before"] = round(load, 2)
            return data
    tail = "\n".join((out.stdout + out.stderr).splitlines()[-30:])
    raise RuntimeError(f"{' '.join(cmd[1:])} printed no result (rc {out.returncode}):\n{tail}")


def main(quick: bool) -> dict[str, Any]:
    """Run every variant in rounds; print Flows/s, latencies and dexlite/DBOS ratios."""
    sizes = _sizes(quick)
    have_dbos = dbos_available()
    variants = [v for v in VARIANTS if have_dbos or v[1] == "dexlite"]
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in variants}
    for _round in range(sizes["rounds"]):
        for label, side, steps, extra in variants:
            data = _run_worker(side, steps, extra, sizes)
            rounds[label].append(
                {
                    "flows_per_second": round(data["flows"] / data["wall_seconds"], 1),
                    "latency": latency_summary(data.pop("latencies_s")),
                    "cpu_ms_per_flow": round(data["cpu_seconds"] * 1000 / data["flows"], 3),
                    **data,
                }
            )
    # The least disturbed round of each variant (the machine is shared); the spread shows noise.
    runs: dict[str, dict[str, Any]] = {}
    for label, done in rounds.items():
        best = max(done, key=lambda r: r["flows_per_second"])
        rates = [r["flows_per_second"] for r in done]
        runs[label] = {
            **best,
            "rounds_flows_per_second": rates,
            "all_rounds_completed": all(
                r["completed_ok"] == r["flows"] == r["stored_completed"]
                and r["stored_children_completed"]
                == (3 * r["flows"] if r["steps"] == "subflows" else 0)
                for r in done
            ),
        }

    heading(f"Flow throughput: {sizes['flows']:,} 3-Step Flows to completion, dexlite vs DBOS")
    print(
        f"  each run: a fresh process and temp dir (same file system), {sizes['warmup']} "
        f"warm-up Flows, then {sizes['flows']:,} measured with {sizes['concurrency']} in flight"
        f" ({sizes['subflow_flows']:,} parents with SubFlows);"
    )
    print(
        f"  {sizes['rounds']} round(s), the variants alternating; each row is its variant's "
        "best round, 'rounds' lists Flows/s of every round"
    )
    if not have_dbos:
        print(f"  {INSTALL_HINT}")
    print(
        f"  {'variant':<19}{'Flows/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"{'CPU ms/Flow':>12}{'completed':>12}{'journal':>9}{'load':>6}  rounds"
    )
    all_ok = True
    for label, run in runs.items():
        stat = run["latency"]
        done = f"{run['completed_ok']}/{run['stored_completed']}"
        ok = run["all_rounds_completed"]
        all_ok = all_ok and ok
        spread = " ".join(f"{rate:,.0f}" for rate in run["rounds_flows_per_second"])
        print(
            f"  {label:<19}{run['flows_per_second']:>9,.1f}{stat['p50_ms']:>9.1f}"
            f"{stat['p99_ms']:>9.1f}{stat['max_ms']:>9.1f}{run['cpu_ms_per_flow']:>12.2f}"
            f"{done:>12}{run['journal_mode']:>9}{run['load_before']:>6.2f}  {spread}"
            + ("" if ok else f"  INCOMPLETE {[w for r in rounds[label] for w in r['wrong']]}")
        )
    print(
        "  completed: results checked (status and output) / runs counted as completed in the "
        "side's own\n  database (warm-up excluded); CPU: user+sys of the whole process per Flow; "
        "load: 1-minute\n  load average before the run"
    )
    print("  drivers:")
    for label, run in runs.items():
        print(f"    {label:<19}{run['driver']}; synchronous={run['synchronous']}")

    ratios: dict[str, float] = {}
    pairs = [(d, b) for d, b in PAIRS if d in runs and b in runs]
    if pairs:
        print("  ratios dexlite/DBOS (same run; Flows/s > 1 and p50 < 1 favour dexlite):")
        for dex, dbos in pairs:
            key = f"{dex} / {dbos}"
            flows = ratio(runs[dex]["flows_per_second"], runs[dbos]["flows_per_second"])
            p50 = ratio(runs[dex]["latency"]["p50_ms"], runs[dbos]["latency"]["p50_ms"])
            ratios[f"{key}: flows_per_second"] = flows
            ratios[f"{key}: p50"] = p50
            print(f"    {key:<40} Flows/s {flows:>6.2f}x   p50 {p50:>6.2f}x")
    if "dexlite def" in runs and "dexlite async def" in runs:
        ratios["dexlite def / async def: flows_per_second"] = ratio(
            runs["dexlite def"]["flows_per_second"], runs["dexlite async def"]["flows_per_second"]
        )
        print(
            "  dexlite def / async def Steps: Flows/s "
            f"{ratios['dexlite def / async def: flows_per_second']:.2f}x"
        )
    if "dexlite 3 SubFlows" in runs and "dexlite async def" in runs:
        key = "dexlite 3 SubFlows / 3-Step async def: flows_per_second"
        ratios[key] = ratio(
            runs["dexlite 3 SubFlows"]["flows_per_second"],
            runs["dexlite async def"]["flows_per_second"],
        )
        print(
            "  dexlite parent with 3 SubFlows (4 runs, 4 Steps) / 3-Step Flow: Flows/s "
            f"{ratios[key]:.2f}x"
        )
    print(f"  every Flow completed with the right output: {'yes' if all_ok else 'NO'}")
    return {
        "sizes": sizes,
        "dbos_installed": have_dbos,
        "runs": runs,
        "rounds": rounds,
        "ratios": ratios,
        "all_completed": all_ok,
    }
