"""Run an engine-API test on both sides of :class:`engine.FlowClient`: the Engine in process,
and ``app.client.Client`` talking to a server process that serves the same Flows.

A test takes the ``serve_flows`` fixture (``tests.conftest``) and writes
``async with serve_flows([SomeFlow()]) as flows:`` where it would start an Engine; it then runs
once per side. Only what crosses the wire belongs in such a test: no ManualClock, no ``settle``,
no events shared with a handler (the server runs the handlers in another process).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import engine
from app.client import Client
from tests.server import ServerProcess
from tests.support.flow_server import FLOWS_VARIABLE, reference_of

SIDES = ("engine", "client")

#: The ``serve_flows`` fixture: ``serve(flows)`` yields a FlowClient over those Flows.
ServeFlows = Callable[[list[engine.Flow[Any]]], AbstractAsyncContextManager[engine.FlowClient]]


@asynccontextmanager
async def served_flows(
    side: str, flows: list[engine.Flow[Any]], config: engine.EngineConfig, data_dir: Path
) -> AsyncIterator[engine.FlowClient]:
    """Yield a FlowClient over ``flows``: an Engine on ``config`` (side ``engine``), or a Client
    of a server process on a database of its own in ``data_dir``, which must exist (side
    ``client``)."""
    if side == "engine":
        eng = engine.Engine(engine.Registry(flows), config)
        await eng.start()
        try:
            yield eng
        finally:
            await eng.close()
        return
    references = ",".join(reference_of(flow) for flow in flows)
    server = ServerProcess(
        data_dir, factory="tests.support.flow_server:create", env={FLOWS_VARIABLE: references}
    )
    with server:
        async with Client(server.url, registry=engine.Registry(flows)) as client:
            yield client
