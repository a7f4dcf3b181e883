"""One measured run of the channels scenario, in a process of its own.

``python -m bench._channel_worker SIDE DIR [options]`` runs, on a SQLite file in DIR, a
sequential latency phase on one Flow (one DBOS workflow) and one throughput phase per
``--throughput FLOWS:MESSAGES``, then prints one ``CHANJSON {...}`` line with the figures. SIDE
is ``dexlite`` (an in-process engine.Engine) or ``dbos`` (DBOS Transact, system database on
SQLite switched to WAL before DBOS opens it, synchronous=FULL); ``--poll`` sets DBOS's
``notification_listener_polling_interval_sec``, the only way ``recv`` and ``get_event`` learn of
a message on SQLite (no LISTEN/NOTIFY there).

The consumer loops on one message at a time: dexlite's ``Consume`` Step waits with
``Wait.until(inbox.for_one())`` and its ``execute`` records the message in Attributes and goes to
``Consume`` again; DBOS's ``inbox_loop`` workflow loops on ``DBOS.recv``. Both note the
``perf_counter`` at which their code first handled each message in a dict of this process (no
I/O), which times the throughput phases' end and splits the latency.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import (
    Attribute,
    Channel,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    Wait,
    go_to,
)

MARKER = "CHANJSON "
WAIT_SECONDS = 60.0  # per wait_for_attribute_match call (the engine's maximum)
PHASE_DEADLINE_S = 240.0  # a phase still unconsumed after this fails

#: (Flow ID, message) -> time.perf_counter() when the Consume Step's execute first handled it.
HANDLED: dict[tuple[str, int], float] = {}


# -- the dexlite Flow -------------------------------------------------------------------------


class Consume(Step[None]):
    """Wait for one inbox message; record it (count, sum, order) and wait for the next."""

    async def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.inbox.for_one())

    async def execute(self, context: Context, input: None) -> StepDecision:
        flow: InboxFlow = self.flow
        [value] = flow.inbox.results(context)
        HANDLED.setdefault((context.flow_id, value), time.perf_counter())
        count = flow.count.get(context) or 0
        if value != count:  # messages are published 0, 1, 2, ... by one client per Flow
            flow.out_of_order.set(context, (flow.out_of_order.get(context) or 0) + 1)
        flow.total.set(context, (flow.total.get(context) or 0) + value)
        flow.count.set(context, count + 1)
        return go_to(Consume)


class InboxFlow(Flow[None]):
    """One consumer Step looping on its inbox Channel."""

    inbox: Channel[int] = Channel("inbox", int)
    count: Attribute[int] = Attribute("Count", int)
    total: Attribute[int] = Attribute("Sum", int)
    out_of_order: Attribute[int] = Attribute("OutOfOrder", int)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Consume())


# -- shared -----------------------------------------------------------------------------------


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _journal_mode(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


def _handled_after(stamps: dict[tuple[str, int], float], key: tuple[str, int], t0: float) -> float:
    """Return seconds from ``t0`` to the stamp of ``key`` (NaN when it was never handled)."""
    stamp = stamps.get(key)
    return stamp - t0 if stamp is not None else float("nan")


def _check(
    label: str,
    sent: int,
    count: int,
    total: int,
    out_of_order: int,
    duplicates: int,
    problems: list[str],
) -> dict[str, Any]:
    """Return one consumer's tally; ``ok`` when every message was consumed exactly once (count,
    sum and no duplicate) and ``problems`` (the side's own further checks) is empty."""
    if count != sent or total != sent * (sent - 1) // 2:
        problems = [*problems, f"consumed {count} of {sent} (sum {total})"]
    if duplicates:
        problems = [*problems, f"{duplicates} consumed twice"]
    return {
        "flow": label,
        "sent": sent,
        "consumed": count,
        "ok": not problems,
        "in_order": out_of_order == 0,
        "problems": problems,
    }


def _phase(
    flows: int, per_flow: int, t0: float, last_handled: float, published: float, cpu: float
) -> dict[str, Any]:
    n = flows * per_flow
    wall = last_handled - t0
    return {
        "flows": flows,
        "messages": n,
        "wall_seconds": wall,
        "publish_seconds": published - t0,
        "messages_per_second": n / wall if wall > 0 else float("nan"),
        "cpu_ms_per_message": cpu * 1000 / n,
    }


# -- dexlite ----------------------------------------------------------------------------------


async def _run_dexlite(args: argparse.Namespace) -> dict[str, Any]:
    import engine

    flow = InboxFlow()
    db_path = Path(args.dir) / "dexlite.db"
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{db_path}", blob_dir=str(Path(args.dir) / "blobs")
    )
    checks: list[dict[str, Any]] = []
    async with engine.Engine(engine.Registry([flow]), config) as eng:

        async def consumed(flow_id: str, n: int) -> None:
            deadline = time.monotonic() + PHASE_DEADLINE_S
            while not (
                await eng.wait_for_attribute_match(
                    flow_id, "Count", "GE", n, wait_seconds=WAIT_SECONDS
                )
            ).matched:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{flow_id}: {n} messages not consumed in time")

        async def verify(flow_id: str, sent: int, ids: list[str]) -> None:
            """Check the Attributes, the empty inbox and the history: each ID consumed once."""
            values = (await eng.get_attributes(flow_id)).values
            events, token = [], ""
            while True:
                page = await eng.get_flow_history(flow_id, page_size=1000, page_token=token)
                events.extend(page.events)
                token = page.next_page_token
                if not token:
                    break
            published = [
                e.details["messageId"] for e in events if e.event_type == "CHANNEL_PUBLISHED"
            ]
            taken = [
                i
                for e in events
                if e.event_type == "CHANNEL_CONSUMED"
                for i in e.details["messageIds"]
            ]
            [inbox] = (await eng.list_channels(flow_id)).channels
            problems = [] if inbox.size == 0 else [f"{inbox.size} still pending"]
            if not sorted(published) == sorted(taken) == sorted(ids):
                problems.append("history: published and consumed message IDs differ")
            checks.append(
                _check(
                    flow_id,
                    sent,
                    values.get("Count", 0),
                    values.get("Sum", 0),
                    values.get("OutOfOrder", 0),
                    len(taken) - len(set(taken)),
                    problems,
                )
            )
            await eng.stop_flow(flow_id, reason="benchmark done")

        # Latency: one publish, then wait until the Step's execute committed its Count.
        await eng.start_flow(flow, "latency")
        rtt: list[float] = []
        to_handled: list[float] = []
        ids: list[str] = []
        deadline = time.monotonic() + args.budget
        n = 0
        while n < args.latency_warmup + args.latency and (
            n < args.latency_warmup + 2 or time.monotonic() < deadline
        ):
            t0 = time.perf_counter()
            ids.append(await eng.publish_to_channel("latency", InboxFlow.inbox, n))
            await consumed("latency", n + 1)
            if n >= args.latency_warmup:
                rtt.append(time.perf_counter() - t0)
                to_handled.append(_handled_after(HANDLED, ("latency", n), t0))
            n += 1
        await verify("latency", n, ids)

        async def throughput(prefix: str, flows: int, per_flow: int) -> dict[str, Any]:
            flow_ids = [f"{prefix}-{k}" for k in range(flows)]
            sent_ids: dict[str, list[str]] = {f: [] for f in flow_ids}
            for flow_id in flow_ids:
                await eng.start_flow(flow, flow_id)

            async def publisher(flow_id: str) -> float:
                for i in range(per_flow):
                    message_id = await eng.publish_to_channel(flow_id, InboxFlow.inbox, i)
                    sent_ids[flow_id].append(message_id)
                return time.perf_counter()

            cpu = _cpu_seconds()
            t0 = time.perf_counter()
            published = max(await asyncio.gather(*(publisher(f) for f in flow_ids)))
            await asyncio.gather(*(consumed(f, per_flow) for f in flow_ids))
            cpu = _cpu_seconds() - cpu
            last = max(HANDLED[(f, per_flow - 1)] for f in flow_ids)
            for flow_id in flow_ids:
                await verify(flow_id, per_flow, sent_ids[flow_id])
            return _phase(flows, per_flow, t0, last, published, cpu)

        phases = []
        for flows, per_flow in args.throughput:
            await throughput(f"warm{flows}", flows, args.throughput_warmup)
            phases.append(await throughput(f"tp{flows}", flows, per_flow))
    return {
        "latencies_s": rtt,
        "to_handled_s": to_handled,
        "throughput": phases,
        "checks": checks,
        "journal_mode": _journal_mode(db_path),
        "synchronous": "FULL (EngineConfig default)",
        "driver": (
            "asyncio: publish_to_channel; consumption observed by wait_for_attribute_match "
            "(Count GE n) on the Attribute the Step's execute commits"
        ),
    }


# -- DBOS -------------------------------------------------------------------------------------


def _run_dbos(args: argparse.Namespace) -> dict[str, Any]:
    from dbos import DBOS, SetWorkflowID

    from bench import _dbos_flows
    from bench._dbos_flows import INBOX_TOPIC, inbox_loop

    stamps = _dbos_flows.HANDLED
    db_path = Path(args.dir) / "dbos.sqlite"
    # journal_mode=WAL is stored in the file, so DBOS's own engine opens it in WAL.
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA journal_mode=WAL").fetchone()
    DBOS(
        config={
            "name": "dexlite-bench",
            "system_database_url": f"sqlite:///{db_path}",
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": args.poll,
        }
    )
    checks: list[dict[str, Any]] = []

    def start(workflow_id: str, ack: bool) -> Any:
        with SetWorkflowID(workflow_id):
            return DBOS.start_workflow(inbox_loop, ack)

    def finish(handle: Any, sent: int) -> None:
        """Check the tally the workflow returned once its negative message ended it."""
        tally = handle.get_result()
        problems = ["a recv timed out"] if tally["timed_out"] else []
        checks.append(
            _check(
                handle.workflow_id,
                sent,
                tally["count"],
                tally["sum"],
                tally["out_of_order"],
                tally["duplicates"],
                problems,
            )
        )

    def in_threads(work: Callable[[str], float], ids: list[str]) -> list[float]:
        results: list[float] = [0.0] * len(ids)

        def run(k: int) -> None:
            results[k] = work(ids[k])

        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(ids))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    try:
        DBOS.launch()
        # Latency: one send, then wait for the workflow's acknowledgement event.
        handle = start("latency", ack=True)
        rtt: list[float] = []
        to_handled: list[float] = []
        deadline = time.monotonic() + args.budget
        n = 0
        while n < args.latency_warmup + args.latency and (
            n < args.latency_warmup + 2 or time.monotonic() < deadline
        ):
            t0 = time.perf_counter()
            DBOS.send("latency", n, INBOX_TOPIC)
            if DBOS.get_event("latency", f"ack-{n}", timeout_seconds=PHASE_DEADLINE_S) != n:
                raise RuntimeError(f"latency: no acknowledgement of message {n}")
            if n >= args.latency_warmup:
                rtt.append(time.perf_counter() - t0)
                to_handled.append(_handled_after(stamps, ("latency", n), t0))
            n += 1
        DBOS.send("latency", -1, INBOX_TOPIC)
        finish(handle, n)

        def throughput(prefix: str, flows: int, per_flow: int) -> dict[str, Any]:
            ids = [f"{prefix}-{k}" for k in range(flows)]
            handles = [start(i, ack=False) for i in ids]

            def publisher(workflow_id: str) -> float:
                for i in range(per_flow):
                    DBOS.send(workflow_id, i, INBOX_TOPIC)
                published = time.perf_counter()
                DBOS.send(workflow_id, -1, INBOX_TOPIC)  # ends the workflow after the others
                return published

            cpu = _cpu_seconds()
            t0 = time.perf_counter()
            published = max(in_threads(publisher, ids))
            for h in handles:  # an in-process workflow's result is a future: no polling
                h.get_result()
            cpu = _cpu_seconds() - cpu
            last = max(_handled_after(stamps, (i, per_flow - 1), 0.0) for i in ids)
            for h in handles:
                finish(h, per_flow)
            return _phase(flows, per_flow, t0, last, published, cpu)

        phases = []
        for flows, per_flow in args.throughput:
            throughput(f"warm{flows}", flows, args.throughput_warmup)
            phases.append(throughput(f"tp{flows}", flows, per_flow))
        # What the database holds: every message sent consumed, none left pending.
        with sqlite3.connect(db_path) as conn:
            rows = conn.execute(
                "SELECT consumed, count(*) FROM notifications WHERE topic = ? GROUP BY consumed",
                (INBOX_TOPIC,),
            ).fetchall()
    finally:
        DBOS.destroy(destroy_registry=True)
    stored = {bool(consumed): count for consumed, count in rows}
    return {
        "latencies_s": rtt,
        "to_handled_s": to_handled,
        "throughput": phases,
        "checks": checks,
        "stored_consumed": stored.get(True, 0),
        "stored_pending": stored.get(False, 0),
        "journal_mode": _journal_mode(db_path),
        "synchronous": "FULL (SQLite default; DBOS sets none)",
        "driver": (
            f"client threads: DBOS.send; a def workflow looping on DBOS.recv; "
            f"latency observed by DBOS.get_event on a set_event per message; "
            f"notification polling every {args.poll * 1000:g} ms"
        ),
    }


def _pair(text: str) -> tuple[int, int]:
    flows, per_flow = text.split(":")
    return int(flows), int(per_flow)


def main(argv: list[str] | None = None) -> int:
    """Run one side and print its figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench._channel_worker")
    parser.add_argument("side", choices=["dexlite", "dbos"])
    parser.add_argument("dir")
    parser.add_argument("--latency", type=int, default=100, help="measured round trips")
    parser.add_argument("--latency-warmup", type=int, default=10)
    parser.add_argument("--budget", type=float, default=10.0, help="latency phase seconds")
    parser.add_argument(
        "--throughput", type=_pair, action="append", default=[], metavar="FLOWS:PER_FLOW"
    )
    parser.add_argument("--throughput-warmup", type=int, default=5, help="per Flow")
    parser.add_argument("--poll", type=float, default=1.0, help="DBOS polling interval (s)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    raw = asyncio.run(_run_dexlite(args)) if args.side == "dexlite" else _run_dbos(args)
    figures = {
        "side": args.side,
        "process_seconds": time.perf_counter() - started,
        "threads_at_end": threading.active_count(),
        "pid": os.getpid(),
        **raw,
    }
    print(MARKER + json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
