"""The client's one HTTP connection pool and the lookups every area of calls shares."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

import engine
from app.client.decoding import flow_info
from app.client.errors import error_from_response, unavailable
from app.client.flow_types import FlowTypeInfo, FlowTypes

#: Added to a long poll's wait so the answer, not the client's timeout, ends the call.
LONG_POLL_MARGIN_SECONDS = 10.0


def segment(value: str) -> str:
    """Return ``value`` quoted as one path segment (a ``/`` in an ID stays inside it)."""
    return quote(str(value), safe="")


class ClientBase:
    """An ``httpx.AsyncClient`` over the REST API, raising engine errors for Problems."""

    def __init__(
        self,
        base_url: str,
        *,
        registry: engine.Registry | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.registry = registry
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._types = FlowTypes(registry)
        self._flow_types: list[engine.FlowTypeDescription] | None = None

    async def close(self) -> None:
        """Close the connection pool; the client cannot be used afterwards."""
        await self._http.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        params: Any = None,
        body: Any = None,
        wait_seconds: float | None = None,
    ) -> Any:
        """Send one request and return its JSON answer (None for an empty one).

        A long poll (``wait_seconds``) gets a read timeout longer than its wait. A transport
        failure (no connection, the server gone mid-call, no answer in time) raises
        UnavailableError; an error answer raises the engine error it stands for.
        """
        timeout: Any = httpx.USE_CLIENT_DEFAULT
        if wait_seconds:
            timeout = httpx.Timeout(self.timeout + wait_seconds + LONG_POLL_MARGIN_SECONDS)
        try:
            response = await self._http.request(
                method, path, params=params, json=body, timeout=timeout
            )
        except httpx.TransportError as exc:
            raise unavailable(exc, self.base_url, operation) from exc
        if response.is_success:
            return response.json() if response.content else None
        raise error_from_response(response, operation)

    async def _info_of_run(
        self, flow_id: str, run_id: str | None, flow_type: str | None = None
    ) -> FlowTypeInfo | None:
        """Return the declared types of a run's Flow type, asking the server which type it is
        when no answer named it yet (only when the client knows some Flow type at all)."""
        if flow_type is None:
            flow_type = self._types.run_type(flow_id, run_id)
        if flow_type is None and self._types.all():
            try:
                described = await self.describe_flow(flow_id, run_id)
            except engine.NotFoundError:
                return None
            flow_type = described.flow_type
        return None if flow_type is None else self._types.get(flow_type)

    async def describe_flow(self, flow_id: str, run_id: str | None = None) -> engine.FlowInfo:
        """Describe the latest (or given) run of ``flow_id`` (describeFlow)."""
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}",
            "describeFlow",
            params={"runId": run_id} if run_id else None,
        )
        info = flow_info(data)
        self._types.remember_run(info.flow_id, info.run_id, info.flow_type)
        return info
