"""Grow the search scenario's database past what ``start_flow`` can seed in the time budget.

``start_flow`` seeds a few hundred Flows per second on this machine (its rate is the
scenario's seed figure), so a million would take most of an hour. The scenario seeds a base of
Flows through the engine API, then :func:`grow` adds the rest as copies of the base's rows,
table by table, in the exact shape ``start_flow`` wrote them: one ``flows`` row, one ``runs``
row, the three ``attributes`` rows, the two ``search_values`` rows and the FLOW_STARTED
``history`` row per Flow. Only what makes a Flow itself is made anew:

- the Flow ID ``flow-<n>`` and a run ID unique to it (a UUIDv7 made of the copied run's start
  time and ``n``, so run IDs still sort by start time);
- the times, moved back by a whole multiple of the base's seeding span, so copies never lie in
  the future and the base's order in time repeats;
- the Attribute values and their search values, computed from ``n`` as :func:`attributes`
  computes them for the engine seed.

It runs on a plain sqlite3 connection while no Engine has the file open (the scenario closes
its Engine first and reopens it afterwards, as a restart would), and the scenario then checks
through the engine API that the engine sees every Flow (its open-run count, and searches and
reads of copied Flows).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

FLOW_TYPE = "SearchBenchFlow"
#: The bench Flow's Attributes and index keys: the copy statements rewrite exactly these.
ATTRIBUTE_NAMES = ("status", "amount", "note")
INDEX_KEYS = ("keyword1", "int1")
#: Distinct keyword values per generation of Flows (see :func:`keyword`).
KEYWORDS = 100


def flow_id(n: int) -> str:
    """Return the Flow ID of Flow ``n``."""
    return f"flow-{n:07}"


def keyword(n: int, generation: int) -> str:
    """Return Flow ``n``'s KEYWORD value: one of KEYWORDS values per ``generation`` Flows.

    Within a generation the values repeat every KEYWORDS Flows, so each matches
    ``generation / KEYWORDS`` Flows spread over the generation's start times; a bigger
    database adds generations, never matches to an existing value.
    """
    return f"s{n % KEYWORDS}-g{n // generation}"


def attributes(n: int, generation: int) -> dict[str, Any]:
    """Return the initial Attributes Flow ``n`` is started with."""
    return {"status": keyword(n, generation), "amount": n, "note": f"not indexed {n}"}


# The statements read the base Flows through two temp tables: ``grow_base`` (base Flow number
# -> its run and start time) and ``grow_map`` (new Flow number -> the base run it copies, its
# run ID and time shift), each keyed for the lookups that follow, so every table's copy is
# one INSERT ... SELECT of index lookups run inside SQLite.
_TEMP_TABLES = (
    """
    CREATE TEMP TABLE grow_base (
        b INTEGER PRIMARY KEY, run_id TEXT NOT NULL, started_at INTEGER NOT NULL
    )
    """,
    """
    CREATE TEMP TABLE grow_map (
        n INTEGER PRIMARY KEY, old_run_id TEXT NOT NULL, new_run_id TEXT NOT NULL,
        shift INTEGER NOT NULL
    )
    """,
)
_FILL_BASE = """
INSERT INTO grow_base (b, run_id, started_at)
SELECT CAST(substr(f.flow_id, 6) AS INTEGER), f.latest_run_id, r.started_at
FROM flows f JOIN runs r ON r.run_id = f.latest_run_id
WHERE f.flow_type = :flow_type AND CAST(substr(f.flow_id, 6) AS INTEGER) < :base
"""
# The run ID is a UUIDv7 of the copy's start time (milliseconds, 48 bits), version 7,
# variant 10, and n as the random part: unique per Flow, and ordered by start time.
_FILL_MAP = """
WITH RECURSIVE ns(n) AS (SELECT :first UNION ALL SELECT n + 1 FROM ns WHERE n + 1 < :stop),
shifted AS (
    SELECT ns.n AS n, b.run_id AS run_id, (ns.n / :base) * :span AS shift,
           printf('%012x', (b.started_at - (ns.n / :base) * :span) / 1000) AS ms
    FROM ns JOIN grow_base b ON b.b = ns.n % :base
)
INSERT INTO grow_map (n, old_run_id, new_run_id, shift)
SELECT n, run_id, substr(ms, 1, 8) || '-' || substr(ms, 9) || '-7000-8000-' || printf('%012x', n),
       shift
FROM shifted
"""
#: Table -> the statement that copies its rows (runs first: flows refer to them).
_COPIES = {
    "runs": """
    INSERT INTO runs (run_id, flow_id, flow_type, status, input, request_id, started_at,
                      closed_at, timeout_at, error_type, error_message)
    SELECT m.new_run_id, printf('flow-%07d', m.n), r.flow_type, r.status, r.input,
           r.request_id, r.started_at - m.shift, r.closed_at, r.timeout_at, r.error_type,
           r.error_message
    FROM grow_map m JOIN runs r ON r.run_id = m.old_run_id
    """,
    "flows": """
    INSERT INTO flows (flow_id, flow_type, latest_run_id)
    SELECT printf('flow-%07d', m.n), :flow_type, m.new_run_id FROM grow_map m
    """,
    "attributes": """
    INSERT INTO attributes (run_id, instance, name, value, blob, updated_at)
    SELECT m.new_run_id, a.instance, a.name,
           CASE a.name
               WHEN 'status' THEN
                   '"s' || (m.n % :keywords) || '-g' || (m.n / :generation) || '"'
               WHEN 'amount' THEN CAST(m.n AS TEXT)
               WHEN 'note' THEN '"not indexed ' || m.n || '"'
           END,
           a.blob, a.updated_at - m.shift
    FROM grow_map m JOIN attributes a ON a.run_id = m.old_run_id
    """,
    "search_values": """
    INSERT INTO search_values
        (run_id, key, type, value, text_value, int_value, real_value, started_at)
    SELECT m.new_run_id, v.key, v.type,
           CASE v.key
               WHEN 'keyword1' THEN
                   '"s' || (m.n % :keywords) || '-g' || (m.n / :generation) || '"'
               WHEN 'int1' THEN CAST(m.n AS TEXT)
           END,
           CASE v.key
               WHEN 'keyword1' THEN 's' || (m.n % :keywords) || '-g' || (m.n / :generation)
           END,
           CASE v.key WHEN 'int1' THEN m.n END,
           v.real_value,
           v.started_at - m.shift
    FROM grow_map m JOIN search_values v ON v.run_id = m.old_run_id
    """,
    "history": """
    INSERT INTO history (run_id, event_type, at, details)
    SELECT m.new_run_id, h.event_type, h.at - m.shift, h.details
    FROM grow_map m JOIN history h ON h.run_id = m.old_run_id
    """,
}
#: The tables a start of the bench's Flow writes to, and the rows it writes to each.
ROWS_PER_FLOW = {"flows": 1, "runs": 1, "attributes": 3, "search_values": 2, "history": 1}


def grow(path: Path, base: int, first: int, stop: int, generation: int) -> dict[str, Any]:
    """Add Flows ``first`` .. ``stop - 1`` to the database at ``path`` as copies of the base.

    Flow ``n`` copies base Flow ``n % base`` (started by the engine). Returns the rows added
    per table and the time it took; raises RuntimeError when a table got other than
    ROWS_PER_FLOW rows per new Flow.
    """
    began = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # A setup step on a temporary database, not a measured write: a crash loses only the
        # run, so no fsyncs.
        conn.execute("PRAGMA synchronous=OFF")
        # No journal either: WAL would write every new page twice (log, then checkpoint).
        # Switched back to WAL, the engine's mode, before the file is handed back.
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-1048576")  # 1 GiB: the tables being extended
        # Block k of copies is moved back by k spans: the base's seeding time plus a second,
        # so no two blocks overlap in time.
        span = conn.execute(
            "SELECT MAX(started_at) - MIN(started_at) + 1000000 FROM runs WHERE flow_type = ?",
            (FLOW_TYPE,),
        ).fetchone()[0]
        params = {
            "first": first,
            "stop": stop,
            "base": base,
            "span": span,
            "flow_type": FLOW_TYPE,
            "keywords": KEYWORDS,
            "generation": generation,
        }
        before = {t: _count(conn, t) for t in ROWS_PER_FLOW}
        conn.execute("BEGIN")
        for statement in _TEMP_TABLES:
            conn.execute(statement)
        conn.execute(_FILL_BASE, params)
        if _count(conn, "grow_base") != base:
            raise RuntimeError(f"found {_count(conn, 'grow_base')} base Flows, wanted {base}")
        _check_base_shape(conn)
        conn.execute(_FILL_MAP, params)
        # Secondary indexes are rebuilt from their own definitions once the rows are in: one
        # sort each instead of a million random inserts into each.
        indexes = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            f"AND tbl_name IN ({', '.join('?' * len(ROWS_PER_FLOW))})",
            tuple(ROWS_PER_FLOW),
        ).fetchall()
        for name, _sql in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        mapped = _count(conn, "grow_map")
        if mapped != stop - first:
            raise RuntimeError(f"mapped {mapped} copies, wanted {stop - first}")
        steps: dict[str, float] = {}
        for table, statement in _COPIES.items():
            step_began = time.perf_counter()
            conn.execute(statement, params)
            steps[table] = round(time.perf_counter() - step_began, 1)
        step_began = time.perf_counter()
        for _name, sql in indexes:
            conn.execute(sql)
        steps[f"{len(indexes)} indexes rebuilt"] = round(time.perf_counter() - step_began, 1)
        conn.execute("DROP TABLE grow_map")
        conn.execute("DROP TABLE grow_base")
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode=WAL")
        added = {t: _count(conn, t) - before[t] for t in ROWS_PER_FLOW}
    finally:
        conn.close()
    # The copy wrote without fsyncs: have the kernel write the file out now, so that the
    # searches measured next do not read while a gigabyte of it is being written back.
    step_began = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    steps["written out"] = round(time.perf_counter() - step_began, 1)
    wrong = {t: n for t, n in added.items() if n != ROWS_PER_FLOW[t] * (stop - first)}
    if wrong:
        raise RuntimeError(f"copy added {wrong} rows, wanted {ROWS_PER_FLOW} per Flow")
    return {
        "flows": stop - first,
        "rows": added,
        "seconds": round(time.perf_counter() - began, 1),
        "seconds_by_step": steps,
    }


def _check_base_shape(conn: sqlite3.Connection) -> None:
    """Refuse to copy base Flows whose rows are not the ones the statements rewrite."""
    names = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT a.name FROM grow_base b JOIN attributes a ON a.run_id = b.run_id"
        )
    }
    keys = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT v.key FROM grow_base b JOIN search_values v ON v.run_id = b.run_id"
        )
    }
    if names != set(ATTRIBUTE_NAMES) or keys != set(INDEX_KEYS):
        raise RuntimeError(f"the base Flows hold Attributes {names} and index keys {keys}")


def _count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0])
