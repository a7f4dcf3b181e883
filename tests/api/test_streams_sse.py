"""The Stream events endpoint (Server-Sent Events): live follow through a real uvicorn server,
resume with Last-Event-ID, a clean end when the client leaves, and the response time limit."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import Flow, Registry, Stream
from tests.server import ServerProcess


class TickerFlow(Flow[None]):
    ticks = Stream("ticks", str)


def registry() -> Registry:
    """The server subprocess serves this (DEXLITE_REGISTRY=tests.api.test_streams_sse:registry)."""
    return Registry([TickerFlow()])


EVENTS = "/api/v1/streams/TickerFlow/t1/ticks/events"
MESSAGES = "/api/v1/streams/TickerFlow/t1/ticks/messages"


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
    server = ServerProcess(
        tmp_path,
        env={
            "DEXLITE_REGISTRY": "tests.api.test_streams_sse:registry",
            "DEXLITE_STREAM__EVENTS_MAX_SECONDS": "600",
        },
        log_level="info",
    ).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
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
                await client.post(MESSAGES, json={"source": "sse", "value": "t3"})
                # The first event after t2 is t3: the response waited, sending nothing else.
                live = json.loads((await asyncio.wait_for(waiting, 10))["data"])
                assert live["value"] == "t3"

        # Every events response ended when its client left, so shutdown does not wait.
        assert server.interrupt() == 0
    finally:
        server.kill()
    output = server.log_text()
    assert "Traceback" not in output
    assert "Waiting for connections to close" not in output


async def test_events_response_ends_after_the_configured_limit(
    make_client: Callable[..., Any],
) -> None:
    # Long enough to send the two retained messages on a loaded machine (at 0.3 s one was
    # sometimes all that went before the limit), short enough to end the response soon.
    async with make_client(registry(), stream={"events_max_seconds": 2.0}) as client:
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
