"""A long poll whose client has left ends at once: the server stops watching for nobody, and
a graceful stop does not wait out the poll (uvicorn lets requests in flight finish first)."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server import ServerProcess

POLLS = {
    "readStream": "GET /api/v1/streams/TickerFlow/t1/ticks/next?waitSeconds=60",
    "waitForFlow": "GET /api/v1/flows/t1/result?waitSeconds=60",
}


def _head_of_response(sock: socket.socket) -> bytes:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    return received


@pytest.mark.parametrize("operation", sorted(POLLS))
async def test_a_long_poll_whose_client_left_does_not_hold_up_a_graceful_stop(
    tmp_path: Path, operation: str
) -> None:
    server = ServerProcess(
        tmp_path, env={"DEXLITE_REGISTRY": "tests.api.test_streams_sse:registry"}, log_level="info"
    ).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            started = await client.post(
                "/api/v1/flows", json={"flowType": "TickerFlow", "flowId": "t1", "input": None}
            )
            assert started.status_code == 201, started.text  # no Steps: it stays RUNNING
        address = urlsplit(server.url)
        assert address.hostname is not None and address.port is not None
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            # Pipelined behind a quick request, so the poll is in the server once the quick
            # request's answer is back.
            sock.sendall(
                b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"
                + f"{POLLS[operation]} HTTP/1.1\r\nHost: test\r\n\r\n".encode()
            )
            assert _head_of_response(sock).startswith(b"HTTP/1.1 200")
        # The client left with the poll waiting up to 60 s: the stop must not wait for it.
        assert server.interrupt(timeout=15) == 0
    finally:
        server.kill()
    assert "Traceback" not in server.log_text()
