"""One fixture, two sides: each client test runs against the in-process Engine and against
``app.client.Client`` talking to a real server process serving the same Flows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

import engine
from app.client import Client
from tests.client.served_flows import ORDERS, registry
from tests.conftest import running_engine
from tests.server import ServerProcess

FACTORY = "tests.client.served_flows:create"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Run one server of the test Flows for the module."""
    with ServerProcess(tmp_path_factory.mktemp("client-server"), factory=FACTORY) as running:
        yield running


@pytest.fixture(params=["engine", "client"])
async def flows(
    request: pytest.FixtureRequest, server: ServerProcess
) -> AsyncIterator[engine.FlowClient]:
    """Return a FlowClient: the Engine in process, or the REST client of a server.

    The server is a direct dependency, so it starts before the per-test database snapshot
    (``tests.conftest``) and its PostgreSQL database lives as long as the module.
    """
    if request.param == "engine":
        config: engine.EngineConfig = request.getfixturevalue("engine_config")
        async with running_engine([ORDERS], config) as eng:
            yield eng
    else:
        async with Client(server.url, registry=registry()) as client:
            yield client


@pytest.fixture
def flow_id(request: pytest.FixtureRequest) -> str:
    """Return a Flow ID no other test uses (the server outlives each test)."""
    return f"{request.node.originalname[:40]}-{uuid.uuid4().hex[:8]}"
