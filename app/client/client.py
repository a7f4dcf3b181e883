"""``Client``: every call of ``engine.FlowClient``, over dexlite's REST API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.client.flows import FlowCalls
from app.client.schedules import ScheduleCalls
from app.client.state import StateCalls
from app.client.streams import StreamCalls

if TYPE_CHECKING:
    import engine


class Client(FlowCalls, StateCalls, StreamCalls, ScheduleCalls):
    """An async client of a dexlite server that satisfies ``engine.FlowClient``.

    ``Client(base_url, registry=None, token=None, timeout=30.0, transport=None)`` keeps one
    ``httpx.AsyncClient`` (one connection pool); close it with ``async with`` or
    :meth:`close`. Each call returns the engine's own result types and raises the engine's
    own error for each Problem answer; a connection failure raises ``UnavailableError``
    (retryable). With a Registry, or the Flow classes and RPC methods the calls pass, values
    are validated and decoded with their declared types, as in process.
    """

    async def check_ready(self) -> None:
        """Return once the server answers that it is ready (its /readyz); raise
        UnavailableError (or the Problem's error) otherwise."""
        await self._call("GET", "/readyz", "ready")

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


if TYPE_CHECKING:

    def _a_client_is_a_flow_client(client: Client) -> engine.FlowClient:
        # mypy checks here that Client has every call of FlowClient, with its signature.
        return client
