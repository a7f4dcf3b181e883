"""What the change log (time travel) costs: the same work with the log on and off, in one run.

Every Attribute write and Channel publication, deletion and consumption is also written to the
``change_log`` table, in the commit that makes it, and each commit of a run that keeps the log
takes the run's next commit number (in the statement that locks the run; a run without the log
takes none). The log is switched off by ``EngineConfig(change_log=False)`` in process and
``DEXLITE_CHANGE_LOG=false`` for a server. Both sides run in alternating rounds (on, off, on,
off, ...), so a noisy neighbour on the machine hits both alike:

- register over HTTP: registrations/s on one Flow, the chunked pattern's register route loaded
  by wrk from 32 connections, as http_register, on two servers side by side
  (``uvicorn --factory app.main:create_app``, each on its own temp database), one with the log
  on and one with it off. Each round runs on a fresh Flow and is checked as http_register checks
  its rounds (every reply 201, the sequences distinct, ``nextSequence`` - 1 = the 201s plus the
  replies wrk cut off in flight), and against the log: the on server's run holds one logged
  write per Attribute a registration wrote (two each, three when it archived a chunk), in one
  commit per registration; the off server's run keeps no log and holds none. Beside 2xx/s,
  each server's CPU seconds (user + system, /proc) per registration, which the machine's other
  work moves less.
- 3-Step Flows to completion per second, in process: flow_throughput's dexlite ``async def``
  run (``bench._flow_worker``: a fresh process and database each), with
  ``EngineConfig(change_log=True)`` and ``False``. Every Flow must complete with the right
  output, and the database must say that its runs keep the log (on) or keep none (off).
- bytes per write: N registrations (sequential RPCs on one in-process Engine, from an empty
  log) and N counter increments (bench._flows.CounterFlow: one small int Attribute), each on a
  fresh SQLite file, with the log on and off. Once the Engine has closed: ``PRAGMA
  wal_checkpoint(TRUNCATE)``, then the file's size, its used pages (page_count - freelist)
  and, by dbstat, the pages of the log's table and its primary-key index. (bytes on - bytes
  off) / N is what the log adds per registration or increment; divided by the logged writes
  instead, per Attribute write. The stored state (``nextSequence``, the counter) must show N
  on both sides.

The chunked append at 100 vs 100,000 records (goal 6b) is chunked_append's, taken with the log
on (the default; that scenario checks it in the database).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

import engine
from bench._common import (
    combine_rounds,
    dexlite_env,
    heading,
    print_wrk,
    ratio,
    server,
    temp_dir,
    wrk_missing_note,
    wrk_path,
)
from bench._flows import CounterFlow
from bench._seed import archived_by, chunked_state
from bench.flow_throughput import _run_worker
from bench.http_register import BASE, CONNECTIONS, _check_register, _load, _settled_state
from patterns.sequentially_chunked_attribute_map.flow import (
    CHUNK_SIZE,
    ChunkedSubscriberFlow,
    RegisterSubscriberInput,
)

#: The two sides, in the order their rounds alternate: side -> DEXLITE_CHANGE_LOG.
SIDES = {"on": "true", "off": "false"}
FLOW_PREFIX = "bench-change-log"
#: The workloads of the bytes measurement: key -> what one of its N operations is.
WORKLOADS = {"register": "registration", "counter": "counter increment"}


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "register_rounds": 1,
            "round_seconds": 2,
            "warmup_seconds": 0,
            "flow_rounds": 1,
            "flows": 100,
            "flow_warmup": 16,
            "concurrency": 64,
            "writes": 100,
        }
    # Whole chunks of registrations (CHUNK_SIZE), so that the logged ``current`` chunks average
    # what a long-lived log's do.
    return {
        "register_rounds": 6,
        "round_seconds": 3,
        "warmup_seconds": 1,
        "flow_rounds": 4,
        "flows": 500,
        "flow_warmup": 32,
        "concurrency": 64,
        "writes": 1000,
    }


def _cpu_seconds(pid: int) -> float:
    """Return a process's user + system CPU seconds so far, all its threads (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _connect_ro(path: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def _run_log(conn: sqlite3.Connection, flow_id: str) -> dict[str, Any]:
    """Return a Flow's run: whether it keeps the log, its commit number, and its log's rows."""
    run_id, keeps, commit_seq = conn.execute(
        "SELECT run_id, change_log, commit_seq FROM runs WHERE flow_id = ?", (flow_id,)
    ).fetchone()
    rows, writes, commits, value_bytes = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(kind = 'W' AND external = 1), 0), "
        "COUNT(DISTINCT CASE WHEN external = 1 THEN commit_seq END), "
        "COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0) FROM change_log WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    return {
        "keeps_log": bool(keeps),
        "commit_seq": int(commit_seq),
        "log_rows": int(rows),
        "logged_writes": int(writes),
        "logged_commits": int(commits),
        "logged_value_bytes": int(value_bytes),
    }


def _check_log(found: dict[str, Any], on: bool, writes: int, commits: int) -> bool:
    """Set and return ``found["ok"]``: with the log on, ``writes`` logged external writes in
    ``commits`` commits; with it off, a run that keeps no log and no row of one."""
    found["expected_logged_writes"] = writes if on else 0
    if on:
        found["ok"] = (
            found["keeps_log"]
            and found["logged_writes"] == writes
            and found["logged_commits"] == commits
        )
    else:
        found["ok"] = not found["keeps_log"] and found["log_rows"] == 0
    return bool(found["ok"])


# -- register over HTTP -----------------------------------------------------------------------


def _register(sizes: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Alternate register rounds between a server with the log on and one with it off."""
    envs = {}
    for side, value in SIDES.items():
        (tmp / side).mkdir()
        envs[side] = dexlite_env(tmp / side, DEXLITE_CHANGE_LOG=value)
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    with (
        server("app.main:create_app", envs["on"], tmp) as on,
        server("app.main:create_app", envs["off"], tmp) as off,
        httpx.Client(base_url=on.url, timeout=30.0) as on_client,
        httpx.Client(base_url=off.url, timeout=30.0) as off_client,
    ):
        servers = {"on": (on, on_client), "off": (off, off_client)}
        # Unmeasured: each server's first requests (imports, caches, the pool) on a Flow of
        # its own (not in --quick, whose figures are not judged).
        for srv, client in servers.values():
            if sizes["warmup_seconds"]:
                flow_id = f"{FLOW_PREFIX}-warmup"
                client.post(f"{BASE}/start", params={"flowId": flow_id}).raise_for_status()
                _load(f"{srv.url}{BASE}/register?flowId={flow_id}", sizes["warmup_seconds"])
        for r in range(sizes["register_rounds"]):
            for side, (srv, client) in servers.items():
                flow_id = f"{FLOW_PREFIX}-{r}"
                client.post(f"{BASE}/start", params={"flowId": flow_id}).raise_for_status()
                cpu = _cpu_seconds(srv.process.pid)
                load = _load(f"{srv.url}{BASE}/register?flowId={flow_id}", sizes["round_seconds"])
                state, current = _settled_state(client, flow_id)
                cpu = _cpu_seconds(srv.process.pid) - cpu
                _check_register(load, state, current)
                done = load["next_sequence_minus_1"]
                load["server_cpu_seconds"] = round(cpu, 3)
                load["registrations"] = done
                with _connect_ro(tmp / side / "x.db") as conn:
                    found = _run_log(conn, flow_id)
                logged = 2 * done + archived_by(1, done)
                load["log"] = found
                load["state_ok"] = _check_log(found, side == "on", logged, done) and bool(
                    load["state_ok"]
                )
                rounds[side].append(load)
        log_tails = {side: srv.log_tail(10) for side, (srv, _c) in servers.items()}
    out: dict[str, Any] = {}
    for side, done_rounds in rounds.items():
        registrations = sum(d["registrations"] for d in done_rounds)
        cpu = sum(d["server_cpu_seconds"] for d in done_rounds)
        out[side] = {
            **combine_rounds(done_rounds),
            "registrations": registrations,
            "server_cpu_ms_per_registration": round(cpu * 1000 / registrations, 3)
            if registrations
            else float("nan"),
            "rounds": [{k: v for k, v in d.items() if k != "statuses"} for d in done_rounds],
            "state_ok": all(d["state_ok"] for d in done_rounds),
        }
    # With the log, a run's commits are its start and one per registration; without, it takes
    # no commit numbers (its row keeps the start's).
    extra = {d["log"]["commit_seq"] - d["next_sequence_minus_1"] for d in rounds["on"]}
    unnumbered = {d["log"]["commit_seq"] for d in rounds["off"]}
    out["start_commits"] = sorted(extra)
    out["pair_ratios"] = [
        ratio(a["ok_per_second"], b["ok_per_second"])
        for a, b in zip(out["on"]["rounds"], out["off"]["rounds"], strict=True)
    ]
    out["state_ok"] = (
        out["on"]["state_ok"] and out["off"]["state_ok"] and extra == {1} and unnumbered == {1}
    )
    out["server_log_tails"] = None if out["state_ok"] else log_tails
    return out


# -- 3-Step Flows in process ------------------------------------------------------------------


def _flows(sizes: dict[str, Any]) -> dict[str, Any]:
    """Alternate flow_throughput's dexlite async def run with the log on and off."""
    worker_sizes = {
        "flows": sizes["flows"],
        "subflow_flows": 0,
        "concurrency": sizes["concurrency"],
        "warmup": sizes["flow_warmup"],
    }
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for _round in range(sizes["flow_rounds"]):
        for side in SIDES:
            extra = () if side == "on" else ("--no-change-log",)
            data = _run_worker("dexlite", "async", extra, worker_sizes)
            data.pop("latencies_s")
            runs = data["flows"] + data["warmup"]
            data["flows_per_second"] = round(data["flows"] / data["wall_seconds"], 1)
            data["cpu_ms_per_flow"] = round(data["cpu_seconds"] * 1000 / data["flows"], 3)
            data["ok"] = (
                data["completed_ok"] == data["flows"] == data["stored_completed"]
                and data["stored_runs"] == runs
                and data["change_log"] == (side == "on")
                and data["runs_keeping_change_log"] == (runs if side == "on" else 0)
                and (side == "on" or data["change_log_rows"] == 0)
            )
            rounds[side].append(data)
    out: dict[str, Any] = {}
    for side, done in rounds.items():
        flows = sum(d["flows"] for d in done)
        wall = sum(d["wall_seconds"] for d in done)
        out[side] = {
            "flows": flows,
            "wall_seconds": round(wall, 3),
            "flows_per_second": round(flows / wall, 1),
            "round_flows_per_second": [d["flows_per_second"] for d in done],
            "cpu_ms_per_flow": round(statistics.median(d["cpu_ms_per_flow"] for d in done), 3),
            "runs_keeping_change_log": sum(d["runs_keeping_change_log"] for d in done),
            "stored_runs": sum(d["stored_runs"] for d in done),
            "change_log_rows": sum(d["change_log_rows"] for d in done),
            "ok": all(d["ok"] for d in done),
            "rounds": done,
        }
    out["pair_ratios"] = [
        ratio(a["flows_per_second"], b["flows_per_second"])
        for a, b in zip(rounds["on"], rounds["off"], strict=True)
    ]
    out["ok"] = out["on"]["ok"] and out["off"]["ok"]
    return out


# -- bytes per write --------------------------------------------------------------------------


async def _write(db: Path, workload: str, on: bool, n: int) -> float:
    """Make ``n`` registrations or increments on one Flow of a fresh database; return seconds."""
    chunked, counter = ChunkedSubscriberFlow(), CounterFlow()
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{db}",
        blob_dir=str(db.parent / "blobs"),
        change_log=on,
    )
    flow_id = f"{FLOW_PREFIX}-{workload}"
    async with engine.Engine(engine.Registry([chunked, counter]), config) as eng:
        if workload == "register":
            options = engine.StartFlowOptions(initial_attributes=chunked_state(0))
            await eng.start_flow(chunked, flow_id, None, options)
        else:
            await eng.start_flow(counter, flow_id, None)
        started = time.perf_counter()
        for i in range(n):
            if workload == "register":
                payload = RegisterSubscriberInput(email=f"w{i}@bench.example", name=f"Bench {i}")
                await eng.invoke_rpc(chunked.register_subscriber, flow_id, payload)
            else:
                await eng.invoke_rpc(counter.increment, flow_id, 1)
        return time.perf_counter() - started


def _measure(db: Path, workload: str, on: bool, n: int) -> dict[str, Any]:
    """Checkpoint the closed database and measure it: file, used pages, the log's pages."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        busy, _wal_pages, _moved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        # Every b-tree's pages, by the table it belongs to (an index counts for its table).
        by_table = dict(
            conn.execute(
                "SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat AS d "
                "LEFT JOIN sqlite_schema AS m ON m.name = d.name GROUP BY 1"
            ).fetchall()
        )
        flow_id = f"{FLOW_PREFIX}-{workload}"
        log = _run_log(conn, flow_id)
        values = dict(
            conn.execute(
                "SELECT a.name || '/' || a.instance, a.value FROM attributes AS a "
                "JOIN runs AS r ON r.run_id = a.run_id WHERE r.flow_id = ?",
                (flow_id,),
            ).fetchall()
        )
    wal = db.with_name(db.name + "-wal")
    if workload == "register":
        # The RPCs' writes (external); the start's initial Attributes are logged as well.
        state = json.loads(values["SubscriberArchiveState/"])
        current = [r["sequence"] for r in json.loads(values["SubscriberChunks/current"])]
        size = (n - 1) % CHUNK_SIZE + 1
        state_ok = state["nextSequence"] == n + 1 and current == list(range(n - size + 1, n + 1))
        writes = 2 * n + archived_by(1, n)
        stored = {"next_sequence": state["nextSequence"], "current_records": len(current)}
    else:
        state_ok = json.loads(values["Counter/"]) == n
        writes = n
        stored = {"counter": json.loads(values["Counter/"])}
    log_ok = _check_log(log, on, writes, n)
    return {
        "file_bytes": os.path.getsize(db),
        "wal_bytes": os.path.getsize(wal) if wal.exists() else 0,
        "checkpoint_busy": int(busy),
        "page_size": page_size,
        "pages": pages,
        "free_pages": free,
        "used_bytes": (pages - free) * page_size,
        "log_table_bytes": int(by_table.get("change_log", 0)),
        "attributes_table_bytes": int(by_table.get("attributes", 0)),
        "history_table_bytes": int(by_table.get("history", 0)),
        "log": log,
        "stored": stored,
        "ok": state_ok and log_ok and int(busy) == 0,
    }


def _bytes(sizes: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Measure the database after the same writes with the log on and off; per write figures."""
    n = sizes["writes"]
    out: dict[str, Any] = {"writes": n}
    for workload in WORKLOADS:
        sides: dict[str, Any] = {}
        for side in SIDES:
            db = tmp / f"bytes-{workload}-{side}" / "x.db"
            db.parent.mkdir()
            seconds = asyncio.run(_write(db, workload, side == "on", n))
            sides[side] = {"seconds": round(seconds, 2), **_measure(db, workload, side == "on", n)}
        on, off = sides["on"], sides["off"]
        logged = on["log"]["logged_writes"]
        per_op: dict[str, float] = {}
        per_write: dict[str, float] = {}
        for key in ("file_bytes", "used_bytes", "log_table_bytes"):
            added = on[key] - off[key]
            per_op[key] = round(added / n, 1)
            per_write[key] = round(added / logged, 1) if logged else float("nan")
        # What the logged values alone hold (the JSON text), without keys, rows and pages.
        per_op["logged_value_bytes"] = round(on["log"]["logged_value_bytes"] / n, 1)
        per_write["logged_value_bytes"] = (
            round(on["log"]["logged_value_bytes"] / logged, 1) if logged else float("nan")
        )
        out[workload] = {
            **sides,
            "attribute_writes_logged": logged,
            "attribute_writes_per_op": round(logged / n, 3),
            "added_per_op": per_op,
            "added_per_write": per_write,
            "ok": on["ok"] and off["ok"],
        }
    out["ok"] = all(out[w]["ok"] for w in WORKLOADS)
    return out


# -- the scenario -----------------------------------------------------------------------------


def main(quick: bool) -> dict[str, Any]:
    """Measure register/s and 3-Step Flows/s with the log on and off, and its bytes per write."""
    sizes = _sizes(quick)
    note = None if wrk_path() else wrk_missing_note()
    with temp_dir("change-log") as tmp:
        register = _register(sizes, tmp)
        flows = _flows(sizes)
        written = _bytes(sizes, tmp)
    ratios = {
        "register_per_s_on_over_off": ratio(
            register["on"]["ok_per_second"], register["off"]["ok_per_second"]
        ),
        "flows_per_s_on_over_off": ratio(
            flows["on"]["flows_per_second"], flows["off"]["flows_per_second"]
        ),
        "register_server_cpu_ms_on_over_off": ratio(
            register["on"]["server_cpu_ms_per_registration"],
            register["off"]["server_cpu_ms_per_registration"],
        ),
        "flows_cpu_ms_per_flow_on_over_off": ratio(
            flows["on"]["cpu_ms_per_flow"], flows["off"]["cpu_ms_per_flow"]
        ),
        "register_file_bytes_on_over_off": ratio(
            written["register"]["on"]["file_bytes"], written["register"]["off"]["file_bytes"]
        ),
        "counter_file_bytes_on_over_off": ratio(
            written["counter"]["on"]["file_bytes"], written["counter"]["off"]["file_bytes"]
        ),
    }
    ok = bool(register["state_ok"] and flows["ok"] and written["ok"])
    _print(sizes, register, flows, written, ratios, note)
    return {
        "sizes": sizes,
        "connections": CONNECTIONS,
        "register": register,
        "flows": flows,
        "bytes": written,
        "ratios": ratios,
        "checks_ok": ok,
        "load_note": note,
    }


def _print(
    sizes: dict[str, Any],
    register: dict[str, Any],
    flows: dict[str, Any],
    written: dict[str, Any],
    ratios: dict[str, float],
    note: str | None,
) -> None:
    heading("change log: the same work with the log on and off")
    print(
        f"  register over HTTP: two uvicorn app.main:create_app servers (DEXLITE_CHANGE_LOG "
        f"true / false), {CONNECTIONS} connections,"
    )
    warmup = sizes["warmup_seconds"]
    print(
        f"  {sizes['register_rounds']} alternating round(s) of {sizes['round_seconds']} s each "
        "(on, off, ...) on a fresh Flow, "
        + (f"after {warmup} s of warm-up each" if warmup else "no warm-up (--quick)")
    )
    if note:
        print(f"  note: {note}")
    for side in SIDES:
        load = register[side]
        rates = ", ".join(f"{r:,.0f}" for r in load["round_ok_per_second"])
        print_wrk(f"log {side}: rounds {rates} 2xx/s", load)
    for side in SIDES:
        for i, r in enumerate(register[side]["rounds"]):
            log = r["log"]
            print(
                f"  log {side:<3} round {i + 1}: 201s {r['created_201']}, nextSequence-1 "
                f"{r['next_sequence_minus_1']} (+{r['cut_off_in_flight']} cut off), "
                f"non-201 {r['non_201'] or 'none'}; run keeps log {log['keeps_log']}, logged "
                f"writes {log['logged_writes']} (expected {log['expected_logged_writes']}): "
                f"{'ok' if r['state_ok'] else 'MISMATCH'}"
            )
    pairs = ", ".join(f"{p:.2f}" for p in register["pair_ratios"])
    print(f"  on/off per round pair: {pairs}; start commits per run {register['start_commits']}")
    cpu = ", ".join(
        f"log {side} {register[side]['server_cpu_ms_per_registration']:.3f} ms" for side in SIDES
    )
    print(
        "  server CPU per registration (user + system, all threads; moves less with the "
        f"machine's load):\n    {cpu}"
    )
    if register["server_log_tails"]:
        for side, tail in register["server_log_tails"].items():
            print(f"  server (log {side}) log tail:\n{tail}")

    print(
        f"  3-Step Flows (async def), in process: {sizes['flow_rounds']} alternating round(s) of "
        f"{sizes['flows']:,} Flows, {sizes['concurrency']} in flight, a fresh process and "
        "database each"
    )
    print(
        f"  {'log':<5}{'Flows/s':>9}{'CPU ms/Flow':>13}{'runs':>7}{'keep log':>10}"
        f"{'log rows':>10}{'checks':>8}  rounds"
    )
    for side in SIDES:
        got = flows[side]
        rates = " ".join(f"{r:,.0f}" for r in got["round_flows_per_second"])
        print(
            f"  {side:<5}{got['flows_per_second']:>9,.1f}{got['cpu_ms_per_flow']:>13.2f}"
            f"{got['stored_runs']:>7}{got['runs_keeping_change_log']:>10}"
            f"{got['change_log_rows']:>10}{'ok' if got['ok'] else 'BAD':>8}  {rates}"
        )
    pairs = ", ".join(f"{p:.2f}" for p in flows["pair_ratios"])
    print(f"  on/off per round pair: {pairs}; Flows/s over the summed wall time of the rounds")
    print(
        "  a 3-Step Flow writes no Attribute, so its log holds no row: the figure is the log's "
        "fixed cost"
    )

    n = written["writes"]
    print(
        f"  bytes per write: {n:,} sequential RPCs on one Flow of a fresh SQLite file per side; "
        "after closing,\n  wal_checkpoint(TRUNCATE), then the file, its used pages, and the "
        "log's table + indexes (dbstat)"
    )
    print(
        f"  {'workload':<10}{'log':<5}{'file bytes':>12}{'used bytes':>12}{'log table':>11}"
        f"{'attributes':>12}{'logged writes':>15}{'s':>6}{'checks':>8}"
    )
    for workload in WORKLOADS:
        for side in SIDES:
            got = written[workload][side]
            print(
                f"  {workload:<10}{side:<5}{got['file_bytes']:>12,}{got['used_bytes']:>12,}"
                f"{got['log_table_bytes']:>11,}{got['attributes_table_bytes']:>12,}"
                f"{got['log']['logged_writes']:>15,}{got['seconds']:>6.1f}"
                f"{'ok' if got['ok'] else 'BAD':>8}"
            )
    print(
        f"  {'added by the log (on - off)':<34}{'file':>9}{'used':>9}{'log table':>11}{'values':>9}"
    )
    for workload, what in WORKLOADS.items():
        got = written[workload]
        for label, per in (
            (f"per {what}", got["added_per_op"]),
            (f"per Attribute write (x{got['attribute_writes_per_op']:g})", got["added_per_write"]),
        ):
            print(
                f"    {label:<32}{per['file_bytes']:>9,.0f}{per['used_bytes']:>9,.0f}"
                f"{per['log_table_bytes']:>11,.0f}{per['logged_value_bytes']:>9,.0f}"
            )
    print(
        "  values: the logged JSON alone; a registration logs the whole current chunk (1..100 "
        "records)\n  and the archive state, three writes when it archives a chunk"
    )
    print("  ratios (same run):")
    for name, value in ratios.items():
        print(f"    {name:<36}{value:>8.2f}x")
