"""The bundled examples served the two ways an application serves them: in process, and by a
front end (``DEXLITE_REMOTE_URL``) whose routes call a dexlite server in another process.

:func:`front_end_client` yields an HTTP client of the second kind that a pattern test uses
unchanged: the examples' routes go to a front-end app in this process, and what the test reads
from the engine API (``/api/v1/...``) goes straight to the server, which a front end does not
proxy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from app.main import create_app
from app.settings import Settings
from tests.server import ServerProcess

#: Paths the engine server answers itself; every other path goes to the front end.
ENGINE_PATHS = ("/api/v1/",)


class SplitTransport(httpx.AsyncBaseTransport):
    """Send ``ENGINE_PATHS`` to the server at ``engine_url`` and the rest to ``front``."""

    def __init__(self, front: httpx.AsyncBaseTransport, engine_url: str) -> None:
        self._front = front
        self._engine = httpx.AsyncHTTPTransport()
        self._engine_url = httpx.URL(engine_url)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Route ``request`` by its path."""
        if not request.url.path.startswith(ENGINE_PATHS):
            return await self._front.handle_async_request(request)
        target = self._engine_url
        request.url = request.url.copy_with(
            scheme=target.scheme, host=target.host, port=target.port
        )
        request.headers["host"] = target.netloc.decode()
        return await self._engine.handle_async_request(request)

    async def aclose(self) -> None:
        """Close both transports."""
        await self._engine.aclose()
        await self._front.aclose()


@asynccontextmanager
async def front_end_client(settings: Settings, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    """Start a server of the bundled examples over a database in ``data_dir`` (the same one on
    every call with that directory, as a restarted server would find it), and yield a client of
    a front end to it built from ``settings``."""
    with ServerProcess(data_dir) as server:
        app = create_app(settings.model_copy(update={"remote_url": server.url}))
        async with app.router.lifespan_context(app):
            transport = SplitTransport(httpx.ASGITransport(app=app), server.url)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield client
