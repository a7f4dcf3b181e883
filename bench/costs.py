"""What one operation costs on each backend: CPU on each side, round trips, WAL bytes.

Three operations run in process on an ``engine.Engine`` (no HTTP, so the engine's own cost is
what is measured): a locked RPC (CounterFlow's ``increment`` on 16 Flows, 16 in flight), a
registration of the chunked pattern (one Flow, one at a time: its lock serializes them), and a
3-Step Flow (``async def`` Steps, 64 in flight). Each runs on SQLite (a temp file, WAL,
synchronous=FULL) and on PostgreSQL (a fresh database), and reports:

- operations per second and this process's CPU per operation (user + system);
- PostgreSQL's CPU per operation: every ``postgres`` process's user + system time (backends,
  WAL writer, checkpointer, and through the postmaster the backends that ended) read from
  /proc before and after, divided by the operations;
- WAL bytes per operation (``pg_current_wal_lsn`` before and after);
- round trips per operation, counted on the wire: a second, shorter run goes through a proxy
  (tests/support/tcp_proxy) that counts every Query, Sync and Flush message the engine sends
  (each ends what it sends before it reads an answer); net of the background's (lease
  renewals, polls: the count while the engine then sits idle as long), and with it;
- what those CPU figures project for a machine of 16 and of 64 cores: dexlite and PostgreSQL
  on one machine (cores / both CPUs), and on machines of their own (the smaller of cores /
  each CPU), assuming work spreads over the cores, which it does over processes (several
  dexlite processes on one database) but not within one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

import engine
from bench import _postgres as pg
from bench._common import heading, temp_dir
from bench._flow_worker import ThreeStepAsyncFlow, expected
from bench._flows import CounterFlow
from patterns.sequentially_chunked_attribute_map.flow import (
    ChunkedSubscriberFlow,
    RegisterSubscriberInput,
)
from tests.support.tcp_proxy import CuttingProxy

OPERATIONS = {"rpc": "locked RPC", "register": "registration", "flow": "3-Step Flow"}
RPC_FLOWS = 16
FLOW_CONCURRENCY = 64
CORES = (16, 64)


def _sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"rpc": 600, "register": 200, "flow": 150, "counted": 100}
    return {"rpc": 3000, "register": 1000, "flow": 600, "counted": 200}


def _postgres_cpu_seconds() -> float:
    """Return the user + system CPU seconds of every ``postgres`` process now."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(entry.path, "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            if name.startswith("postgres"):
                fields = stat[stat.rindex(")") + 2 :].split()
                # utime, stime, and the children's that ended (the postmaster's: backends of
                # connections closed during the run would be missed otherwise).
                total += sum(int(f) for f in fields[11:15])
    return total / ticks


async def _wal_lsn(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"))
    finally:
        await conn.close()


class Operations:
    """The three operations on one Engine, each run ``n`` times."""

    def __init__(self, eng: engine.Engine) -> None:
        self.eng = eng
        self.counter = CounterFlow()
        self.chunked = ChunkedSubscriberFlow()
        self.three_steps = ThreeStepAsyncFlow()
        self._registered = 0
        self._flows = 0

    @staticmethod
    def flows() -> list[engine.Flow[Any]]:
        """The Flows the Engine must register (fresh instances of the same types)."""
        return [CounterFlow(), ChunkedSubscriberFlow(), ThreeStepAsyncFlow()]

    async def prepare(self) -> None:
        """Start the Flows the RPCs and the registrations go to."""
        for n in range(RPC_FLOWS):
            await self.eng.start_flow(self.counter, f"counter-{n}")
        await self.eng.start_flow(self.chunked, "chunked")

    async def rpc(self, n: int) -> None:
        """``n`` locked RPCs, 16 in flight, each on its own Flow."""

        async def worker(k: int) -> None:
            for _ in range(n // RPC_FLOWS):
                await self.eng.invoke_rpc(self.counter.increment, f"counter-{k}", 1)

        await asyncio.gather(*(worker(k) for k in range(RPC_FLOWS)))

    async def register(self, n: int) -> None:
        """``n`` registrations on one Flow, one after the other."""
        for _ in range(n):
            self._registered += 1
            subscriber = RegisterSubscriberInput(
                email=f"s{self._registered}@example.com", name=f"S {self._registered}"
            )
            await self.eng.invoke_rpc(self.chunked.register_subscriber, "chunked", subscriber)

    async def flow(self, n: int) -> None:
        """``n`` 3-Step Flows to completion, 64 in flight; each result checked."""
        gate = asyncio.Semaphore(FLOW_CONCURRENCY)

        async def one(x: int) -> None:
            async with gate:
                flow_id = f"flow-{x}"
                await self.eng.start_flow(self.three_steps, flow_id, x)
                result = await self.eng.wait_for_flow(flow_id, wait_seconds=60)
                outputs = [c.output for c in result.completions]
                assert result.status == "COMPLETED" and outputs == [expected(x)], result

        start = self._flows
        self._flows += n
        await asyncio.gather(*(one(x) for x in range(start, start + n)))

    def run(self, kind: str) -> Callable[[int], Awaitable[None]]:
        """Return the operation called ``kind``."""
        runs: dict[str, Callable[[int], Awaitable[None]]] = {
            "rpc": self.rpc,
            "register": self.register,
            "flow": self.flow,
        }
        return runs[kind]


async def _measure(url: str, blobs: Path, sizes: dict[str, int], dsn: str | None) -> dict[str, Any]:
    """Each operation's figures on the database at ``url`` (``dsn``: PostgreSQL's, or None)."""
    config = engine.EngineConfig(database_url=url, blob_dir=str(blobs))
    out: dict[str, Any] = {}
    async with engine.Engine(engine.Registry(Operations.flows()), config) as eng:
        ops = Operations(eng)
        await ops.prepare()
        for kind in OPERATIONS:
            n = sizes[kind]
            await ops.run(kind)(max(n // 10, RPC_FLOWS))  # warm up: statements prepared
            wal = await _wal_lsn(dsn) if dsn else 0
            pg_cpu = _postgres_cpu_seconds() if dsn else 0.0
            cpu, wall = time.process_time(), time.perf_counter()
            await ops.run(kind)(n)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            figures: dict[str, Any] = {
                "operations": n,
                "per_second": round(n / wall, 1),
                "cpu_us": round(cpu / n * 1e6),
            }
            if dsn:
                figures["postgres_cpu_us"] = round((_postgres_cpu_seconds() - pg_cpu) / n * 1e6)
                figures["wal_bytes"] = round((await _wal_lsn(dsn) - wal) / n)
            out[kind] = figures
    return out


async def _count_round_trips(url: str, blobs: Path, sizes: dict[str, int]) -> dict[str, Any]:
    """Round trips per operation, counted by a proxy in front of the server at ``url``: all
    of them, and net of the background's (lease renewals, polls), counted while the engine
    sat idle for as long as the operations took."""
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    with CuttingProxy(host, int(port)) as proxy:
        proxied = url.replace(host_port, f"127.0.0.1:{proxy.port}")
        config = engine.EngineConfig(database_url=proxied, blob_dir=str(blobs))
        out: dict[str, Any] = {"all": {}}
        async with engine.Engine(engine.Registry(Operations.flows()), config) as eng:
            ops = Operations(eng)
            await ops.prepare()
            n = sizes["counted"]
            for kind in OPERATIONS:
                await ops.run(kind)(n // 4)  # warm up: statements prepared
                proxy.round_trips = 0
                began = time.perf_counter()
                await ops.run(kind)(n)
                spent = time.perf_counter() - began
                counted = proxy.round_trips
                proxy.round_trips = 0
                await asyncio.sleep(spent)  # the background alone, as long
                out["all"][kind] = round(counted / n, 2)
                out[kind] = round(max(counted - proxy.round_trips, 0) / n, 2)
        return out


@contextlib.contextmanager
def _postgres_database() -> Iterator[str]:
    with pg.fresh_database("costs") as name:
        yield pg.engine_url(name)


def _projection(dexlite_us: float, postgres_us: float) -> dict[str, float]:
    """Operations per second that the CPU figures allow on 16 and 64 cores."""
    out: dict[str, float] = {}
    for cores in CORES:
        budget = cores * 1e6
        out[f"one_machine_{cores}"] = round(budget / (dexlite_us + postgres_us))
        out[f"own_machines_{cores}"] = round(min(budget / dexlite_us, budget / postgres_us))
    return out


def _print(results: dict[str, Any]) -> None:
    heading("Cost per operation: CPU on each side, round trips, WAL bytes (in process)")
    sqlite, postgres, trips = results["sqlite"], results["postgres"], results["round_trips"]
    print(
        f"  {'operation':<14}{'SQLite ops/s':>13}{'CPU us':>8}{'PG ops/s':>10}{'CPU us':>8}"
        f"{'PG CPU us':>10}{'trips':>7}{'WAL B':>7}{'PG/SQLite':>10}"
    )
    for kind, label in OPERATIONS.items():
        s, p = sqlite[kind], postgres[kind]
        ratio = p["per_second"] / s["per_second"] if s["per_second"] else 0.0
        print(
            f"  {label:<14}{s['per_second']:>13,.0f}{s['cpu_us']:>8,}{p['per_second']:>10,.0f}"
            f"{p['cpu_us']:>8,}{p['postgres_cpu_us']:>10,}{trips[kind]:>7}{p['wal_bytes']:>7,}"
            f"{ratio:>9.2f}x"
        )
    background = ", ".join(f"{OPERATIONS[k]} {trips['all'][k]}" for k in OPERATIONS)
    print(f"  trips: net of the background's; with it: {background}")
    print("  projected PostgreSQL operations/s from the CPU figures (one machine / own machines):")
    for kind, label in OPERATIONS.items():
        proj = results["projection"][kind]
        cells = "   ".join(
            f"{cores} cores {proj[f'one_machine_{cores}']:,} / {proj[f'own_machines_{cores}']:,}"
            for cores in CORES
        )
        print(f"    {label:<14}{cells}")


def main(quick: bool) -> dict[str, Any]:
    """Measure each operation's cost on SQLite and on PostgreSQL."""
    sizes = _sizes(quick)
    reason = pg.unavailable()
    if reason:
        heading("Cost per operation: skipped")
        print(f"  {reason}")
        return {"skipped": reason}
    with temp_dir("costs") as tmp:
        sqlite_url = f"sqlite+aiosqlite:///{tmp}/costs.db"
        results: dict[str, Any] = {
            "sizes": sizes,
            "sqlite": asyncio.run(_measure(sqlite_url, tmp / "blobs-sqlite", sizes, None)),
        }
        with _postgres_database() as url:
            dsn = url.replace("postgresql+asyncpg://", "postgresql://")
            results["postgres"] = asyncio.run(_measure(url, tmp / "blobs-pg", sizes, dsn))
        with _postgres_database() as url:
            results["round_trips"] = asyncio.run(
                _count_round_trips(url, tmp / "blobs-count", sizes)
            )
    results["projection"] = {
        kind: _projection(
            results["postgres"][kind]["cpu_us"],
            max(results["postgres"][kind]["postgres_cpu_us"], 1),
        )
        for kind in OPERATIONS
    }
    _print(results)
    return results
