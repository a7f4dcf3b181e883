"""What only the REST client does: a server that goes away, values without a Registry, the
bearer token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

import engine
from app.client import Client
from tests.client.conftest import FACTORY
from tests.client.served_flows import ORDERS, Orders
from tests.client.test_calls import AT, PAYLOAD
from tests.server import ServerProcess, free_port


class AnnouncingTransport(httpx.AsyncHTTPTransport):
    """The client's transport, telling when a request to a path ending in ``suffix`` goes out."""

    def __init__(self, suffix: str) -> None:
        super().__init__()
        self.suffix = suffix
        self.sent = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(self.suffix):
            self.sent.set()
        return await super().handle_async_request(request)


async def test_a_server_killed_during_a_long_poll_is_unavailable_until_it_is_back(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path, factory=FACTORY)
    await asyncio.to_thread(server.start)
    try:
        transport = AnnouncingTransport("/result")
        async with Client(server.url, timeout=5, transport=transport) as client:
            started = await client.start_flow(Orders, "killed", PAYLOAD)
            polling = asyncio.create_task(client.wait_for_flow("killed", wait_seconds=30))
            await transport.sent.wait()  # the long poll is on its way to the server
            await asyncio.to_thread(server.kill)
            with pytest.raises(engine.UnavailableError) as caught:
                await polling
            with pytest.raises(engine.UnavailableError):
                await client.describe_flow("killed")
            await asyncio.to_thread(server.start)
            result = await client.wait_for_flow("killed", wait_seconds=0.1)
    finally:
        await asyncio.to_thread(server.stop)
    assert caught.value.retryable and caught.value.code == "UNAVAILABLE"
    assert (result.run_id, result.status) == (started.run_id, "RUNNING")


async def test_nothing_listening_is_unavailable() -> None:
    async with Client(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(engine.UnavailableError) as caught:
            await client.describe_flow("anything")
    assert caught.value.retryable and caught.value.operation == "describeFlow"


async def test_without_a_registry_values_stay_json_data(
    server: ServerProcess, flow_id: str
) -> None:
    async with Client(server.url) as client:
        await client.start_flow("Orders", flow_id, engine.to_json_data(PAYLOAD))
        echoed = await client.invoke_rpc("echo", flow_id, PAYLOAD)
        later = await client.invoke_rpc("stamp", flow_id, AT)
        found = await client.get_attributes(flow_id, ["payload"])
        with pytest.raises(engine.FailedPreconditionError):
            client.list_flow_types()
    assert echoed == engine.to_json_data(PAYLOAD) == found.values["payload"]
    assert later == "2024-05-06T08:08:09.123456Z"


async def test_a_flow_class_passed_to_a_call_types_its_values(
    server: ServerProcess, flow_id: str
) -> None:
    async with Client(server.url) as client:
        await client.start_flow(Orders, flow_id, PAYLOAD)
        echoed = await client.invoke_rpc(ORDERS.echo, flow_id, PAYLOAD)
        found = await client.get_attributes(flow_id, ["payload"])
    assert echoed == PAYLOAD == found.values["payload"]


async def test_the_bearer_token_is_sent(tmp_path: Path, flow_id: str) -> None:
    env = {"DEXLITE_API_TOKEN": "s3cret"}
    with ServerProcess(tmp_path, factory=FACTORY, env=env) as server:
        async with (
            Client(server.url, token="s3cret") as good,
            Client(server.url, token="wrong") as bad,
        ):
            started = await good.start_flow(Orders, flow_id, PAYLOAD)
            with pytest.raises(engine.InvalidArgumentError) as caught:
                await bad.describe_flow(flow_id)
    assert started.started
    assert caught.value.field == "token" and caught.value.extra["code"] == "UNAUTHENTICATED"
