"""Fixtures of the contract tests: a Python client generated from the OpenAPI document, and a
live server for it to drive (one of each per test module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract.python_client import (
    SERVER_ENV,
    GeneratedClient,
    document_path,
    generate,
    imported,
)
from tests.server import ServerProcess


@pytest.fixture(scope="module")
def python_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedClient]:
    """Generate the client from the document once, import it, and forget it afterwards."""
    folder = tmp_path_factory.mktemp("python-client")
    output = generate(document_path(), folder)
    with imported(folder, output) as generated:
        yield generated


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Run one dexlite server (the bundled examples, small body limits) for the module."""
    with ServerProcess(tmp_path_factory.mktemp("server"), env=SERVER_ENV) as running:
        yield running


@pytest.fixture(scope="module")
def client(python_client: GeneratedClient, server: ServerProcess) -> Iterator[Any]:
    """Return the generated ``Client`` on the server; an undocumented status raises."""
    with python_client.client(server.url) as generated_client:
        yield generated_client
