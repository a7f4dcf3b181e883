"""The bundled examples served by a front-end process (``DEXLITE_REMOTE_URL``) against a
dexlite server in another process: the same routes, answers and errors as in process, through
``app.client.Client``; the server going away is a 503 and its return is picked up."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.conftest import api_client
from tests.server import ServerProcess
from tests.support.problems import assert_problem

CHUNKED = "/patterns/sequentially-chunked-attribute-map"
PROFILES = "/patterns/hash-partitioned-attribute-map"
RPC = "/primitives/rpc"


@pytest.fixture
def make_front_end(settings: Settings) -> Callable[..., Any]:
    """Return a factory of HTTP clients over a front-end app (its settings name the server)."""

    def factory(**overrides: Any) -> Any:
        return api_client(settings.model_copy(update=overrides))

    return factory


@pytest.fixture
def engine_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A dexlite server of the bundled examples, in its own process."""
    with ServerProcess(tmp_path) as running:
        yield running


async def test_the_patterns_answer_alike_through_a_front_end(
    make_front_end: Callable[..., Any], engine_server: ServerProcess
) -> None:
    async with make_front_end(remote_url=engine_server.url) as front:
        ready = await front.get("/readyz")
        started = await front.post(f"{CHUNKED}/start")
        registered = [
            await front.post(
                f"{CHUNKED}/register", json={"email": f"u{n}@example.com", "name": f"U{n}"}
            )
            for n in range(3)
        ]
        page = await front.get(f"{CHUNKED}/subscribers", params={"pageToken": "current"})
        bad_email = await front.post(f"{CHUNKED}/register", json={"email": "no", "name": "x"})
        await front.post(f"{PROFILES}/start")
        upserted = await front.post(
            f"{PROFILES}/profiles", json={"email": " Ada@Example.com ", "displayName": "Ada"}
        )
        looked_up = await front.get(f"{PROFILES}/profiles", params={"email": "ada@example.com"})
        unknown = await front.get(f"{PROFILES}/profiles", params={"email": "bob@example.com"})
        no_api = await front.get("/api/v1/flows")
    async with httpx.AsyncClient(base_url=engine_server.url) as direct:
        on_the_server = await direct.get(f"{CHUNKED}/subscribers", params={"pageToken": "current"})
    assert ready.json() == {"status": "ready"}
    assert started.status_code == 201, started.text
    assert [r.status_code for r in registered] == [201, 201, 201]
    assert [r.json()["sequence"] for r in registered] == [1, 2, 3]
    assert [s["email"] for s in page.json()["subscribers"]] == [
        "u2@example.com",
        "u1@example.com",
        "u0@example.com",
    ]
    assert page.json() == on_the_server.json()  # the front end reads the server's state
    assert_problem(bad_email, 422, "VALIDATION_ERROR")
    assert upserted.status_code == 200, upserted.text
    assert looked_up.json()["email"] == "ada@example.com"
    assert_problem(unknown, 404, "PROFILE_NOT_FOUND")
    assert no_api.status_code == 404  # a front end serves no engine API of its own


async def test_a_lock_conflict_through_a_front_end_is_the_same_409(
    make_front_end: Callable[..., Any], engine_server: ServerProcess
) -> None:
    async with make_front_end(remote_url=engine_server.url, lock_retry_seconds=0.2) as front:
        await front.post(f"{RPC}/start")
        first = await front.post(f"{RPC}/increment", json={"by": 2})
        held = await front.post(f"{RPC}/hold")
        # The hold's Step takes the lock when it is handed out, after the RPC has answered; it
        # announces the lock on its Stream, read here from the engine server itself.
        async with httpx.AsyncClient(base_url=engine_server.url) as direct:
            holding = await direct.get(
                "/api/v1/streams/CounterFlow/primitive-rpc/counter-lock/next",
                params={"resumeToken": "", "waitSeconds": 10},
            )
        refused = await front.post(f"{RPC}/increment", json={"by": 1})
        await front.post(f"{RPC}/finish")
        counter = await front.get(f"{RPC}/counter")
    assert first.json()["counter"] == 2, first.text
    assert held.status_code in (200, 202), held.text
    assert holding.json()["message"]["value"].startswith("holding the counter lock"), holding.text
    problem = assert_problem(refused, 409, "RPC_LOCK_CONFLICT")
    assert problem["lockKey"] == "counter"
    assert refused.headers["retry-after"].isdigit()
    assert counter.json()["counter"] == 2


async def test_the_server_going_away_is_503_and_its_return_is_picked_up(
    make_front_end: Callable[..., Any], engine_server: ServerProcess
) -> None:
    async with make_front_end(remote_url=engine_server.url) as front:
        await front.post(f"{CHUNKED}/start")
        engine_server.kill()
        down = await front.post(f"{CHUNKED}/register", json={"email": "a@b.c", "name": "A"})
        not_ready = await front.get("/readyz")
        engine_server.start()
        up = await front.post(f"{CHUNKED}/register", json={"email": "a@b.c", "name": "A"})
        ready = await front.get("/readyz")
    assert_problem(down, 503, "UNAVAILABLE")
    assert down.headers["retry-after"].isdigit()
    assert not_ready.status_code == 503
    assert up.status_code == 201 and up.json()["sequence"] == 1
    assert ready.status_code == 200
