"""App factories the RPC benchmark serves with ``uvicorn --factory``.

- ``rpc_app``: dexlite's engine API over a Registry of the bench's own Flows.
- ``bare_app``: a bare FastAPI app whose endpoint does one stdlib-sqlite3 commit (WAL,
  synchronous=FULL), the floor any engine commit is compared with.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Annotated

from fastapi import FastAPI, HTTPException, Path
from pydantic import BaseModel

from app.main import create_app
from engine import Registry

BARE_DB_ENV = "BENCH_BARE_DB"
BARE_ROWS_ENV = "BENCH_BARE_ROWS"


def rpc_app() -> FastAPI:
    """Serve the engine API for the bench's CounterFlow (settings from DEXLITE_* env)."""
    from bench._flows import CounterFlow

    return create_app(registry=Registry([CounterFlow()]))


class Increment(BaseModel):
    """The body both endpoints take: ``{"input": n}``."""

    input: int


class Counted(BaseModel):
    """The new counter value."""

    output: int


def bare_app() -> FastAPI:
    """Serve ``POST /counters/{id}``: one read-modify-write commit on a stdlib sqlite3 file."""
    path = os.environ[BARE_DB_ENV]
    rows = int(os.environ.get(BARE_ROWS_ENV, "256"))
    # One connection used only from the event loop thread: the commit runs inline, so the
    # baseline has no thread hand-off and no group commit, just one fsync per request.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("CREATE TABLE IF NOT EXISTS counters (id INTEGER PRIMARY KEY, value INTEGER)")
    conn.executemany("INSERT OR IGNORE INTO counters VALUES (?, 0)", [(i,) for i in range(rows)])
    app = FastAPI(title="bare sqlite3 baseline")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/noop/{counter_id}")
    async def noop(counter_id: Annotated[int, Path()], body: Increment) -> Counted:
        return Counted(output=body.input)

    @app.post("/counters/{counter_id}")
    async def increment(counter_id: Annotated[int, Path()], body: Increment) -> Counted:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "UPDATE counters SET value = value + ? WHERE id = ? RETURNING value",
                (body.input, counter_id),
            ).fetchone()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if row is None:
            raise HTTPException(404, "no such counter")
        return Counted(output=row[0])

    return app
