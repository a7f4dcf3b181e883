"""Every pattern test that serves the bundled examples through ``make_client()`` runs twice:
against an app running the engine in process, and against a front end whose routes call a
dexlite server in another process (``DEXLITE_REMOTE_URL``; see ``tests.support.front_end``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import engine
from app.settings import Settings
from tests.conftest import api_client
from tests.support.front_end import front_end_client


@pytest.fixture(params=["in-process", "front-end"])
def make_client(
    request: pytest.FixtureRequest, settings: Settings, tmp_path: Path
) -> Callable[..., Any]:
    """Return a factory of HTTP clients over the bundled examples, served in process or by a
    front end of a server process (each call of one test reaches the same database)."""
    if request.param == "in-process":

        def in_process(registry: engine.Registry | None = None, **overrides: Any) -> Any:
            chosen = settings.updated(**overrides) if overrides else settings
            return api_client(chosen, registry)

        return in_process
    server_dir = tmp_path / "engine-server"
    server_dir.mkdir()

    def front_end(**overrides: Any) -> Any:
        chosen = settings.updated(**overrides) if overrides else settings
        return front_end_client(chosen, server_dir)

    return front_end
