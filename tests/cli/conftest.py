"""Fixtures of the CLI tests: a live server with the bundled examples (one per test module),
the ``dexlite`` command run against it as a subprocess, and a Flow ID per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.running import SERVER_ENV, Dexlite
from tests.server import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Run one dexlite server serving the bundled examples for the module."""
    with ServerProcess(tmp_path_factory.mktemp("cli-server"), env=SERVER_ENV) as running:
        yield running


@pytest.fixture(scope="module")
def dexlite(server: ServerProcess) -> Dexlite:
    """Return the ``dexlite`` command, pointed at the server through DEXLITE_URL."""
    return Dexlite({"DEXLITE_URL": server.url})


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    """Return an HTTP client of the server, to set up what a test then reads with the CLI."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def flow_id(request: pytest.FixtureRequest) -> str:
    """Return a Flow ID no other test uses."""
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"
