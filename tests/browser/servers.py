"""Servers of a registry of their own, for the playground tests of such a server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server import ServerProcess

#: The registry of tests/browser/failing_flows.py: none of the bundled examples is in it.
FAILING = "tests.browser.failing_flows:registry"


def serve_registry(tmp_path_factory: pytest.TempPathFactory, registry: str) -> Iterator[str]:
    """Run ``dexlite serve`` on a registry (``module:name``); yield its base URL.

    A module's ``server`` fixture yields from it to put the module's tests on that registry.
    """
    tmp = tmp_path_factory.mktemp("registry-server")
    env = {"DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL", "DEXLITE_REGISTRY": registry}
    with ServerProcess(tmp, env=env, serve=True) as process:
        yield process.url
