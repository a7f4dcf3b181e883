"""The Stream events endpoint (Server-Sent Events): live follow through a real uvicorn server,
resume with Last-Event-ID, a clean end when the client leaves, and the response time limit."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import Flow, Registry, Stream

ROOT = Path(__file__).resolve().parents[2]


class TickerFlow(Flow[None]):
    ticks = Stream("ticks", str)


def registry() -> Registry:
    """The server subprocess serves this (DEXLITE_REGISTRY=tests.api.test_streams_sse:registry)."""
    return Registry([TickerFlow()])


EVENTS = "/api/v1/streams/TickerFlow/t1/ticks/events"
MESSAGES = "/api/v1/streams/TickerFlow/t1/ticks/messages"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def uvicorn_server(tmp_path: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``uvicorn --factory app.main:create_app`` on a free port with this file's registry."""
    port = _free_port()
    environment = {
        **os.environ,
        "DEXLITE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/sse.db",
        "DEXLITE_BLOB_DIR": str(tmp_path / "blobs"),
        "DEXLITE_REGISTRY": "tests.api.test_streams_sse:registry",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed in finally
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "app.main:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "info",
        ],
        cwd=ROOT,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "server did not start:\n"
                    + (tmp_path / "server.log").read_text(errors="replace")
                )
            time.sleep(0.05)
        yield base, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """Parse a text/event-stream body into events (comments are skipped)."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


async def test_events_follow_a_stream_live_resume_and_end_when_the_client_leaves(
    tmp_path: Path,
) -> None:
    # A long response limit: only the client's departure can end the response.
    with uvicorn_server(tmp_path, DEXLITE_STREAM_EVENTS_MAX_SECONDS="600") as (base, process):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            tokens: list[str] = []
            async with client.stream("GET", EVENTS) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                events = sse_events(response)
                first = await anext(events)
                assert first == {"retry": "1000"}
                for i in range(3):
                    written = await client.post(MESSAGES, json={"source": "sse", "value": f"t{i}"})
                    tokens.append(written.json()["resumeToken"])
                    event = await asyncio.wait_for(anext(events), 10)
                    data = json.loads(event["data"])
                    assert data["value"] == f"t{i}" and data["source"] == "sse"
                    assert event["id"] == data["resumeToken"] == tokens[i]
            # Left: the server keeps serving and no response is left running.
            assert (await client.get("/healthz")).status_code == 200

            headers = {"Last-Event-ID": tokens[0]}
            async with client.stream("GET", EVENTS, headers=headers) as response:
                events = sse_events(response)
                await anext(events)  # retry
                resumed = json.loads((await asyncio.wait_for(anext(events), 10))["data"])
                assert resumed["value"] == "t1"

            params = {"resumeToken": tokens[2]}
            async with client.stream("GET", EVENTS, params=params) as response:
                events = sse_events(response)
                await anext(events)
                waiting = asyncio.ensure_future(anext(events))
                await asyncio.sleep(0.2)
                assert not waiting.done()  # nothing after t2 yet: the response waits
                await client.post(MESSAGES, json={"source": "sse", "value": "t3"})
                live = json.loads((await asyncio.wait_for(waiting, 10))["data"])
                assert live["value"] == "t3"

        # Every events response ended when its client left, so shutdown does not wait.
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
    output = (tmp_path / "server.log").read_text(errors="replace")
    assert "Traceback" not in output
    assert "Waiting for connections to close" not in output


async def test_events_response_ends_after_the_configured_limit(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry(), stream_events_max_seconds=0.3) as client:
        for i in range(2):
            await client.post(MESSAGES, json={"source": "s", "value": f"m{i}"})
        started = time.monotonic()
        response = await client.get(EVENTS)  # the in-process transport reads it to the end
        assert time.monotonic() - started < 10
    assert response.status_code == 200
    blocks = [b for b in response.text.split("\n\n") if b.strip()]
    assert blocks[0].splitlines() == [": following", "retry: 1000"]
    values = [
        json.loads(line[len("data: ") :])["value"]
        for block in blocks[1:]
        for line in block.splitlines()
        if line.startswith("data: ")
    ]
    assert values == ["m0", "m1"]


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"resumeToken": "garbage"}, 400, "INVALID_ARGUMENT"),
    ],
)
async def test_events_with_a_bad_token_is_a_problem_before_streaming(
    make_client: Callable[..., Any],
    params: dict[str, str],
    status: int,
    code: str,
) -> None:
    async with make_client(registry()) as client:
        response = await client.get(EVENTS, params=params)
    assert response.status_code == status
    assert response.json()["code"] == code
