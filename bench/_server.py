"""App factories the HTTP benchmarks serve with ``uvicorn --factory``.

- ``rpc_app``: dexlite's engine API over a Registry of the bench's own Flows.
- ``register_and_rpc_app``: that plus the chunked pattern's Flow and routes.
- ``bare_app``: a bare FastAPI app holding the baselines every dexlite figure is divided by:

  - ``POST /counters/{id}``: one read-modify-write commit on a stdlib sqlite3 file (WAL,
    synchronous=FULL) run inline on the event loop: the disk floor, one fsync per request
    and nothing else;
  - ``POST /sqla/{id}`` (an ``{"input": n}`` body, as the RPC takes) and
    ``POST /sqla-register`` (the register route's body and response): what a typical
    FastAPI + SQLAlchemy-async service does per write, one Core INSERT and its COMMIT in
    ``async with engine.begin()`` on ``create_async_engine("sqlite+aiosqlite:///...")``
    with the default pool, WAL and synchronous=FULL set on every new connection;
  - ``POST /echo``: the pydantic echo, the register route's body model validated and
    answered as its response model, with no database: the HTTP limit;
  - ``POST /noop/{id}``: the RPC's body echoed, no database.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Path, status
from pydantic import BaseModel
from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, event, insert
from sqlalchemy.ext.asyncio import create_async_engine

from app.main import create_app
from engine import Registry
from patterns.sequentially_chunked_attribute_map.routes import RegisterBody, SubscriberResponse

BARE_DB_ENV = "BENCH_BARE_DB"
BARE_ROWS_ENV = "BENCH_BARE_ROWS"
SQLA_DB_ENV = "BENCH_SQLA_DB"

#: The SQLAlchemy baseline's tables: a row per increment, a row per registration.
SQLA_METADATA = MetaData()
SQLA_INCREMENTS = Table(
    "increments",
    SQLA_METADATA,
    Column("id", Integer, primary_key=True),
    Column("counter_id", Integer, nullable=False),
    Column("amount", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)
SQLA_SUBSCRIBERS = Table(
    "subscribers",
    SQLA_METADATA,
    Column("id", Integer, primary_key=True),
    Column("email", String(320), nullable=False),
    Column("name", String(200), nullable=False),
    Column("registered_at", BigInteger, nullable=False),
)


def rpc_app() -> FastAPI:
    """Serve the engine API for the bench's CounterFlow (settings from DEXLITE_* env)."""
    from bench._flows import CounterFlow

    return create_app(registry=Registry([CounterFlow()]))


def register_and_rpc_app() -> FastAPI:
    """Serve the chunked pattern's routes and the engine API for it and CounterFlow.

    The postgres scenario loads both on one set of servers, each started once.
    """
    from bench._flows import CounterFlow
    from patterns.sequentially_chunked_attribute_map.flow import ChunkedSubscriberFlow
    from patterns.sequentially_chunked_attribute_map.routes import router

    app = create_app(registry=Registry([ChunkedSubscriberFlow(), CounterFlow()]))
    app.include_router(router)
    return app


class Increment(BaseModel):
    """The body the counter endpoints take: ``{"input": n}``."""

    input: int


class Counted(BaseModel):
    """The new counter value (or the inserted row's ID)."""

    output: int


def _micros() -> int:
    return int(datetime.now(UTC).timestamp() * 1_000_000)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """Set WAL and FULL on each new pool connection, as a service's engine setup would."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    # Concurrent requests contend for SQLite's one write lock: wait for it, do not fail.
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def bare_app() -> FastAPI:
    """Serve the baselines: stdlib-sqlite3 commit, SQLAlchemy-async insert, pydantic echo."""
    path = os.environ[BARE_DB_ENV]
    rows = int(os.environ.get(BARE_ROWS_ENV, "256"))
    sqla_path = os.environ.get(SQLA_DB_ENV, path + ".sqla")
    # One connection used only from the event loop thread: the commit runs inline, so the
    # baseline has no thread hand-off and no group commit, just one fsync per request.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("CREATE TABLE IF NOT EXISTS counters (id INTEGER PRIMARY KEY, value INTEGER)")
    conn.executemany("INSERT OR IGNORE INTO counters VALUES (?, 0)", [(i,) for i in range(rows)])

    # The engine's defaults (pool included): the baseline is the usual setup, not a tuned one.
    sqla = create_async_engine(f"sqlite+aiosqlite:///{sqla_path}")
    event.listen(sqla.sync_engine, "connect", _sqlite_pragmas)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with sqla.begin() as setup:
            await setup.run_sync(SQLA_METADATA.create_all)
        try:
            yield
        finally:
            await sqla.dispose()
            conn.close()

    app = FastAPI(title="bare baselines", lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/noop/{counter_id}")
    async def noop(counter_id: Annotated[int, Path()], body: Increment) -> Counted:
        return Counted(output=body.input)

    @app.post("/echo", status_code=status.HTTP_201_CREATED)
    async def echo(body: RegisterBody) -> SubscriberResponse:
        """The pydantic echo: the register body validated and answered, no database."""
        return SubscriberResponse(
            sequence=0, email=body.email, name=body.name, registered_at=datetime.now(UTC)
        )

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

    @app.post("/sqla/{counter_id}", status_code=status.HTTP_201_CREATED)
    async def sqla_increment(counter_id: Annotated[int, Path()], body: Increment) -> Counted:
        """One SQLAlchemy-async INSERT of the increment and its COMMIT."""
        async with sqla.begin() as db:
            result = await db.execute(
                insert(SQLA_INCREMENTS)
                .values(counter_id=counter_id, amount=body.input, created_at=_micros())
                .returning(SQLA_INCREMENTS.c.id)
            )
            row_id = result.scalar_one()
        return Counted(output=row_id)

    @app.post("/sqla-register", status_code=status.HTTP_201_CREATED)
    async def sqla_register(body: RegisterBody) -> SubscriberResponse:
        """One SQLAlchemy-async INSERT of the subscriber and its COMMIT."""
        now = datetime.now(UTC)
        async with sqla.begin() as db:
            result = await db.execute(
                insert(SQLA_SUBSCRIBERS)
                .values(email=body.email, name=body.name, registered_at=_micros())
                .returning(SQLA_SUBSCRIBERS.c.id)
            )
            sequence = result.scalar_one()
        return SubscriberResponse(
            sequence=sequence, email=body.email, name=body.name, registered_at=now
        )

    return app
