"""A database that is slow or cannot write answers 503 UNAVAILABLE with Retry-After, never 500,
commits nothing of the refused request, and serves again by itself once it can.

The PostgreSQL cases hold a run's row lock from a connection of the test, so that an RPC's
commit waits on it until the lock or statement timeout ends the wait; the SQLite case limits
the size of the server's files (RLIMIT_FSIZE), as a full disk does.
"""

from __future__ import annotations

import resource
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

import engine
from app.settings import Settings
from engine import Attribute, Context, Flow, rpc
from tests.conftest import api_client
from tests.server import ServerProcess
from tests.support import backends
from tests.support.problems import assert_problem
from tests.support.waiting import eventually


class TallyFlow(Flow[None]):
    """An RPC-only Flow: one locked counter and a large note, both written by RPCs."""

    tally = Attribute("Tally", int)
    note = Attribute("Note", str)

    @rpc(lock_attributes=(tally.lock(),))
    def add(self, context: Context, input: int) -> int:
        """Add ``input`` to the tally and return the new value."""
        value = (self.tally.get(context) or 0) + input
        self.tally.set(context, value)
        return value

    @rpc
    def write_note(self, context: Context, input: str) -> None:
        """Replace the note (its size is the caller's)."""
        self.note.set(context, input)


REGISTRY = engine.Registry([TallyFlow()])


async def _start(client: httpx.AsyncClient, flow_id: str) -> None:
    response = await client.post(
        "/api/v1/flows", json={"flowType": "TallyFlow", "flowId": flow_id, "input": None}
    )
    assert response.status_code == 201, response.text


async def _add(client: httpx.AsyncClient, flow_id: str, amount: int = 1) -> httpx.Response:
    return await client.post(f"/api/v1/flows/{flow_id}/rpcs/add", json={"input": amount})


async def _tally(client: httpx.AsyncClient, flow_id: str) -> int | None:
    response = await client.get(f"/api/v1/flows/{flow_id}/attributes", params={"name": "Tally"})
    assert response.status_code == 200, response.text
    value: int | None = response.json()["values"].get("Tally")
    return value


@asynccontextmanager
async def _run_row_locked(db_url: str, flow_id: str) -> AsyncIterator[None]:
    """Hold the row lock of ``flow_id``'s run from a connection of the test until the block
    ends (every commit unit on the run locks that row first)."""
    dsn = db_url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            locked = await conn.fetch(
                "SELECT run_id FROM runs WHERE flow_id = $1 FOR UPDATE", flow_id
            )
            assert locked, "the run's row exists"
            yield
    finally:
        await conn.close()


@backends.postgres_only("PostgreSQL's lock and statement timeouts")
@pytest.mark.parametrize(
    ("timeouts", "what"),
    [
        ({"lock_timeout": 0.3, "statement_timeout": 30.0}, "lock timeout"),
        ({"lock_timeout": 0.0, "statement_timeout": 1.0}, "statement timeout"),
    ],
)
async def test_a_commit_that_waits_past_a_timeout_answers_503_and_commits_nothing(
    settings: Settings, db_url: str, timeouts: dict[str, float], what: str
) -> None:
    # Only the refused RPC runs under the short timeouts: on a loaded machine a Flow's start
    # can itself run past a short statement timeout, which is not what this test is about.
    async with api_client(settings, REGISTRY) as client:
        await _start(client, "slow")
        assert (await _add(client, "slow")).status_code == 200
        async with (
            api_client(settings.updated(postgres=timeouts), REGISTRY) as hurried,
            _run_row_locked(db_url, "slow"),
        ):
            refused = await _add(hurried, "slow", 10)
            body = assert_problem(refused, 503, "UNAVAILABLE")
            assert refused.headers["Retry-After"] == "1"
            assert what in body["detail"], body

            # The database answers reads meanwhile: the process is ready (on a loaded machine
            # a first probe may itself run past the short statement timeout).
            async def ready() -> bool:
                return (await hurried.get("/readyz")).status_code == 200

            await eventually(ready, what="/readyz to answer 200 while the row stays locked")
        # The refused RPC committed nothing and let go of its Attribute lock.
        assert (await _add(client, "slow", 100)).json() == {"output": 101}
        assert await _tally(client, "slow") == 101


@backends.sqlite_only("SQLite's own file-system errors")
async def test_a_full_disk_answers_503_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, "tests.api.test_database_outage:serve").start()
    try:
        assert server.process is not None
        pid = server.process.pid
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            await _start(client, "full")
            acknowledged = 0
            for _ in range(5):
                assert (await _add(client, "full")).status_code == 200
                acknowledged += 1
            # From now on no file of the server may grow past its size plus a little: the
            # next large writes cannot reach the disk.
            largest = _largest_file(tmp_path)
            limit = largest + 64 * 1024
            # The soft limit only: lifting it again needs no privilege.
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, hard))
            statuses: list[int] = []
            for n in range(40):
                response = await client.post(
                    "/api/v1/flows/full/rpcs/write_note", json={"input": f"{n}" * 300_000}
                )
                statuses.append(response.status_code)
                if response.status_code != 200:
                    body = assert_problem(response, 503, "UNAVAILABLE")
                    assert response.headers["Retry-After"] == "1"
                    assert "disk" in body["detail"] or "I/O" in body["detail"], body
                    break
            assert statuses[-1] == 503, statuses
            # Small writes may still fit; whatever each answers, 200 means committed.
            for _ in range(5):
                response = await _add(client, "full")
                assert response.status_code in (200, 503), response.text
                acknowledged += response.status_code == 200
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))

            async def serves_again() -> bool:
                return (await _add(client, "full")).status_code == 200

            await eventually(serves_again, what="writes succeed once the disk has room")
            acknowledged += 1
            assert (await client.get("/readyz")).status_code == 200
            assert await _tally(client, "full") == acknowledged
    finally:
        server.stop()
    database = tmp_path / "dexlite.db"
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _largest_file(directory: Path) -> int:
    """Return the size of the largest file under ``directory``."""
    return max(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def serve() -> Any:
    """The app of the subprocess test: the bundled settings with this module's registry."""
    from app.main import create_app

    return create_app(Settings(), REGISTRY)


def test_a_database_error_that_is_not_an_outage_stays_a_bug() -> None:
    """A constraint violated or a corrupt file is not an outage: no 503 hides it."""
    from engine._storage.outage import unavailable

    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    corrupt.sqlite_errorcode = sqlite3.SQLITE_CORRUPT
    assert unavailable(corrupt) is None
    assert unavailable(asyncpg.exceptions.UniqueViolationError("duplicate")) is None
    assert unavailable(OSError("no such file")) is None
    assert isinstance(unavailable(OSError("refused"), connecting=True), engine.UnavailableError)
