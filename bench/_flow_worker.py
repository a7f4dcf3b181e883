"""One measured run of the flow_throughput scenario, in a process of its own.

``python -m bench._flow_worker SIDE STEPS N CONCURRENCY WARMUP DIR [--wal] [--no-change-log]``
runs WARMUP unmeasured then N measured 3-Step Flows to completion, at most CONCURRENCY in
flight, on a SQLite file in DIR, and prints one ``FLOWJSON {...}`` line with the figures. SIDE is
``dexlite`` (an in-process engine.Engine) or ``dbos`` (DBOS Transact, system database on
SQLite); STEPS is ``async`` (``async def`` Steps) or ``def``, or ``subflows``: instead of the
3-Step Flow, a parent that starts three one-Step children and completes with the sum of their
outputs (``async def`` throughout; DBOS: a workflow starting three child workflows).
``--wal`` (DBOS only) switches the fresh DBOS database file to WAL before DBOS opens it; DBOS
leaves SQLite's default rollback journal otherwise. ``--no-change-log`` (dexlite only) runs the
engine with ``EngineConfig(change_log=False)`` (the change_log scenario); either way the figures
count, in the database, the runs that keep a change log and the log's rows. Each run is a fresh
interpreter on a fresh directory, so neither side inherits the other's (or an earlier
scenario's) threads, caches or garbage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sqlite3
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench._flows import FanOutFlow, LeafFlow, fan_out_expected
from engine import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete

MARKER = "FLOWJSON "
WAIT_SECONDS = 60.0  # per wait_for_flow call (the engine's maximum)
RUN_DEADLINE_S = 300.0  # a Flow still open after this counts as not completed


def expected(x: int) -> int:
    """Return what A → B → C computes from ``x`` on both sides."""
    return (x + 1) * 2 - 1


# -- dexlite Flows ----------------------------------------------------------------------------


class AsyncStepA(Step[int]):
    """A (``async def``): go to B with x + 1."""

    async def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(AsyncStepB, input + 1)


class AsyncStepB(Step[int]):
    """B (``async def``): go to C with x * 2."""

    async def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(AsyncStepC, input * 2)


class AsyncStepC(Step[int]):
    """C (``async def``): complete with x - 1."""

    async def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input - 1)


class ThreeStepAsyncFlow(Flow[int]):
    """A → B → C with ``async def`` Steps (run on the engine's event loop)."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(AsyncStepA()).other_steps(AsyncStepB(), AsyncStepC())


class SyncStepA(Step[int]):
    """A (``def``): go to B with x + 1."""

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(SyncStepB, input + 1)


class SyncStepB(Step[int]):
    """B (``def``): go to C with x * 2."""

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(SyncStepC, input * 2)


class SyncStepC(Step[int]):
    """C (``def``): complete with x - 1."""

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input - 1)


class ThreeStepSyncFlow(Flow[int]):
    """A → B → C with ``def`` Steps (run in the engine's Step threads)."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(SyncStepA()).other_steps(SyncStepB(), SyncStepC())


# -- measuring --------------------------------------------------------------------------------


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Tally:
    """Latencies and outcomes of the measured Flows."""

    def __init__(self, expect: Callable[[int], int]) -> None:
        self.expect = expect
        self.latencies: list[float] = []
        self.ok = 0
        self.wrong: list[str] = []
        self._lock = threading.Lock()

    def add(self, seconds: float, x: int, outcome: str, value: Any) -> None:
        """Record one Flow: ``outcome`` is its final status, ``value`` its output."""
        with self._lock:
            self.latencies.append(seconds)
            if outcome == "ok" and value == self.expect(x):
                self.ok += 1
            elif len(self.wrong) < 5:
                self.wrong.append(f"flow {x}: {outcome} {value!r}")


def _expectation(steps: str) -> Callable[[int], int]:
    return fan_out_expected if steps == "subflows" else expected


async def _drive_async(
    one: Callable[[int], Awaitable[tuple[str, Any]]],
    first: int,
    n: int,
    concurrency: int,
    expect: Callable[[int], int] = expected,
) -> tuple[Tally, float, float]:
    """Run ``one(x)`` for x in [first, first + n) with at most ``concurrency`` in flight."""
    tally = Tally(expect)
    gate = asyncio.Semaphore(concurrency)

    async def timed(x: int) -> None:
        async with gate:
            started = time.perf_counter()
            outcome, value = await one(x)
            tally.add(time.perf_counter() - started, x, outcome, value)

    cpu = _cpu_seconds()
    began = time.perf_counter()
    await asyncio.gather(*(timed(x) for x in range(first, first + n)))
    return tally, time.perf_counter() - began, _cpu_seconds() - cpu


def _drive_threads(
    one: Callable[[int], tuple[str, Any]], first: int, n: int, concurrency: int
) -> tuple[Tally, float, float]:
    """Run ``one(x)`` for x in [first, first + n) on ``concurrency`` threads."""
    tally = Tally(expected)

    def timed(x: int) -> None:
        started = time.perf_counter()
        outcome, value = one(x)
        tally.add(time.perf_counter() - started, x, outcome, value)

    cpu = _cpu_seconds()
    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency, thread_name_prefix="bench-client") as pool:
        list(pool.map(timed, range(first, first + n)))
    return tally, time.perf_counter() - began, _cpu_seconds() - cpu


def _journal_mode(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


# -- dexlite ----------------------------------------------------------------------------------


async def _run_dexlite(args: argparse.Namespace) -> dict[str, Any]:
    import engine

    flow: Flow[Any] = {
        "async": ThreeStepAsyncFlow,
        "def": ThreeStepSyncFlow,
        "subflows": FanOutFlow,
    }[args.steps]()
    flows: list[Flow[Any]] = [flow, LeafFlow()] if args.steps == "subflows" else [flow]
    expect = _expectation(args.steps)
    db_path = Path(args.dir) / "dexlite.db"
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{db_path}",
        blob_dir=str(Path(args.dir) / "blobs"),
        change_log=not args.no_change_log,
    )
    async with engine.Engine(engine.Registry(flows), config) as eng:

        async def one(x: int) -> tuple[str, Any]:
            flow_id = f"flow-{x}"
            await eng.start_flow(flow, flow_id, x)
            deadline = time.monotonic() + RUN_DEADLINE_S
            while True:
                result = await eng.wait_for_flow(flow_id, wait_seconds=WAIT_SECONDS)
                if result.status != "RUNNING" or time.monotonic() > deadline:
                    break
            if result.status != "COMPLETED":
                return result.status, result.error_message
            outputs = [c.output for c in result.completions]
            return "ok", outputs[0] if len(outputs) == 1 else outputs

        await _drive_async(one, -args.warmup, args.warmup, args.concurrency, expect)
        tally, wall, cpu = await _drive_async(one, 0, args.n, args.concurrency, expect)

        # Count from the database what the waits reported: every run, warm-up included.
        completed = await _count_completed(eng, flow.flow_type())
        children = await _count_completed(eng, LeafFlow.flow_type())
    return {
        "tally": tally,
        "wall": wall,
        "cpu": cpu,
        "stored_completed": completed - args.warmup,
        "stored_children_completed": children - 3 * args.warmup if args.steps == "subflows" else 0,
        "journal_mode": _journal_mode(db_path),
        "synchronous": "FULL (EngineConfig default)",
        "driver": f"asyncio, {args.concurrency} in flight: start_flow + wait_for_flow",
        "change_log": not args.no_change_log,
        **_change_log_counts(db_path),
    }


def _change_log_counts(path: Path) -> dict[str, int]:
    """Count, in the database, the runs that keep a change log, and the log's rows."""
    with sqlite3.connect(path) as conn:
        runs, logging = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(change_log), 0) FROM runs"
        ).fetchone()
        (rows,) = conn.execute("SELECT COUNT(*) FROM change_log").fetchone()
    return {
        "stored_runs": int(runs),
        "runs_keeping_change_log": int(logging),
        "change_log_rows": int(rows),
    }


async def _count_completed(eng: Any, flow_type: str) -> int:
    completed, token = 0, ""
    while True:
        page = await eng.search_flows("Status = 'COMPLETED'", 1000, token, flow_type=flow_type)
        completed += len(page.flows)
        token = page.next_page_token or ""
        if not token:
            return completed


# -- DBOS -------------------------------------------------------------------------------------


def _run_dbos(args: argparse.Namespace) -> dict[str, Any]:
    from dbos import DBOS

    from bench import _dbos_flows

    db_path = Path(args.dir) / "dbos.sqlite"
    if args.wal:
        # journal_mode=WAL is stored in the file, so DBOS's own engine opens it in WAL.
        with sqlite3.connect(db_path) as conn:
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
    DBOS(
        config={
            "name": "dexlite-bench",
            "system_database_url": f"sqlite:///{db_path}",
            "log_level": "WARNING",
        }
    )
    try:
        DBOS.launch()
        if args.steps in ("async", "subflows"):
            workflow = (
                _dbos_flows.fan_out_async
                if args.steps == "subflows"
                else _dbos_flows.three_step_async
            )
            expect = _expectation(args.steps)

            async def one_async(x: int) -> tuple[str, Any]:
                handle = await DBOS.start_workflow_async(workflow, x)
                return "ok", await handle.get_result()

            async def both() -> tuple[Tally, float, float]:
                await _drive_async(one_async, -args.warmup, args.warmup, args.concurrency, expect)
                return await _drive_async(one_async, 0, args.n, args.concurrency, expect)

            tally, wall, cpu = asyncio.run(both())
            driver = f"asyncio, {args.concurrency} in flight: start_workflow_async + get_result"
        else:

            def one_sync(x: int) -> tuple[str, Any]:
                handle = DBOS.start_workflow(_dbos_flows.three_step_sync, x)
                return "ok", handle.get_result()

            _drive_threads(one_sync, -args.warmup, args.warmup, args.concurrency)
            tally, wall, cpu = _drive_threads(one_sync, 0, args.n, args.concurrency)
            driver = f"{args.concurrency} client threads: start_workflow + get_result"
        stored = DBOS.list_workflows(
            status="SUCCESS", has_parent=False, load_input=False, load_output=False
        )
        children = DBOS.list_workflows(
            status="SUCCESS", has_parent=True, load_input=False, load_output=False
        )
    finally:
        DBOS.destroy(destroy_registry=True)
    return {
        "tally": tally,
        "wall": wall,
        "cpu": cpu,
        "stored_completed": len(stored) - args.warmup,
        "stored_children_completed": (
            len(children) - 3 * args.warmup if args.steps == "subflows" else 0
        ),
        "journal_mode": _journal_mode(db_path),
        "synchronous": "FULL (SQLite default; DBOS sets none)",
        "driver": driver,
    }


def main(argv: list[str] | None = None) -> int:
    """Run one side and print its figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench._flow_worker")
    parser.add_argument("side", choices=["dexlite", "dbos"])
    parser.add_argument("steps", choices=["async", "def", "subflows"])
    parser.add_argument("n", type=int)
    parser.add_argument("concurrency", type=int)
    parser.add_argument("warmup", type=int)
    parser.add_argument("dir")
    parser.add_argument("--wal", action="store_true", help="DBOS: put its database in WAL")
    parser.add_argument(
        "--no-change-log", action="store_true", help="dexlite: keep no change log for any run"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    raw = asyncio.run(_run_dexlite(args)) if args.side == "dexlite" else _run_dbos(args)
    tally: Tally = raw.pop("tally")
    wall, cpu = raw.pop("wall"), raw.pop("cpu")
    figures = {
        "side": args.side,
        "steps": args.steps,
        "flows": args.n,
        "concurrency": args.concurrency,
        "warmup": args.warmup,
        "completed_ok": tally.ok,
        "wrong": tally.wrong,
        "latencies_s": tally.latencies,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "process_seconds": time.perf_counter() - started,
        "threads_at_end": threading.active_count(),
        "pid": os.getpid(),
        **raw,
    }
    print(MARKER + json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
