"""The fast path (``app/fast_path.py``) answers exactly as FastAPI does.

The same requests go to two apps over two databases in the same state, one with the fast path
and one without (``fast_path=False``: every request through FastAPI). Each pair of answers
must have the same status, content type, the headers a client acts on, and the same body once
what differs by nature between two databases is masked (run IDs, times). The requests cover the
hot routes and every way their input can be refused: the fast path hands the refusals to
FastAPI, so those must come out byte for byte the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.fast_path import FastPath
from app.settings import Settings
from tests.conftest import served_app
from tests.support import backends

#: Fields whose values differ between two databases by nature.
_VOLATILE_KEYS = {
    "runId",
    "startedAt",
    "closedAt",
    "registeredAt",
    "parentRunId",
    "requestId",
    "at",
}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Headers a client acts on (X-Request-ID is fresh per request, by design).
_HEADERS = ("content-type", "allow", "retry-after", "www-authenticate", "location")

START = "/patterns/sequentially-chunked-attribute-map/start"
REGISTER = "/patterns/sequentially-chunked-attribute-map/register"
SUBSCRIBERS = "/patterns/sequentially-chunked-attribute-map/subscribers"
JSON = {"content-type": "application/json"}
LONG_ID = "f" * 300

#: (method, path, params, body bytes or None, headers): in order, state-changing ones included.
REQUESTS: list[tuple[str, str, Any, bytes | None, dict[str, str]]] = [
    ("GET", "/healthz", None, None, {}),
    ("GET", "/readyz", None, None, {}),
    ("POST", REGISTER, None, b'{"email":"a@x.example","name":"A"}', JSON),  # not started: 404
    ("POST", START, None, None, {}),
    ("POST", START, None, None, {}),  # already running: 200
    ("POST", REGISTER, None, b'{"email":"a@x.example","name":"A"}', JSON),
    ("POST", REGISTER, None, b'{"email":"b@x.example","name":"B"}', JSON),
    ("POST", REGISTER, {"flowId": "elsewhere"}, b'{"email":"c@x.example","name":"C"}', JSON),
    ("POST", REGISTER, {"flowId": ""}, b'{"email":"c@x.example","name":"C"}', JSON),
    ("POST", REGISTER, {"flowId": LONG_ID}, b'{"email":"c@x.example","name":"C"}', JSON),
    ("POST", REGISTER, None, b'{"email":"not-an-email","name":"B"}', JSON),
    ("POST", REGISTER, None, b'{"email":"b@x.example","name":"B","extra":1}', JSON),
    ("POST", REGISTER, None, b'{"email":"b@x.example","name":7}', JSON),
    ("POST", REGISTER, None, b'{"email":"b@x.example"', JSON),
    ("POST", REGISTER, None, b"\xff\xfe", JSON),
    ("POST", REGISTER, None, b"[]", JSON),
    ("POST", REGISTER, None, b"null", JSON),
    ("POST", REGISTER, None, b"", JSON),
    ("POST", REGISTER, None, b'{"email":"b@x.example","name":"B"}', {"content-type": "text/plain"}),
    ("POST", REGISTER, None, b'{"email":"b@x.example","name":"B"}', {}),
    (
        "POST",
        REGISTER,
        None,
        b'{"email":"d@x.example","name":"D"}',
        {"content-type": "application/json; charset=utf-8"},
    ),
    ("GET", REGISTER, None, None, {}),  # 405
    ("HEAD", SUBSCRIBERS, None, None, {}),
    ("GET", SUBSCRIBERS, None, None, {}),
    ("GET", SUBSCRIBERS, {"pageToken": "00000000000000000001"}, None, {}),
    ("GET", SUBSCRIBERS, {"pageToken": "7"}, None, {}),
    ("POST", "/api/v1/flows", None, b'{"flowType":"CounterFlow","flowId":"c"}', JSON),
    ("POST", "/api/v1/flows", None, b'{"flowType":"CounterFlow","flowId":"c"}', JSON),  # 409
    (
        "POST",
        "/api/v1/flows",
        None,
        b'{"flowType":"CounterFlow","flowId":"c","options":{"ignoreAlreadyStarted":true}}',
        JSON,
    ),
    ("POST", "/api/v1/flows", None, b'{"flowType":"Nope","flowId":"n"}', JSON),
    ("POST", "/api/v1/flows", None, b'{"flowType":"CounterFlow"}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":2}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":3}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":"three"}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":true}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b"{}", JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b"", JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":1,"runId":""}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":1,"bogus":1}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/nope", None, b'{"input":1}', JSON),
    ("POST", "/api/v1/flows/missing/rpcs/increment", None, b'{"input":1}', JSON),
    ("POST", f"/api/v1/flows/{LONG_ID}/rpcs/increment", None, b'{"input":1}', JSON),
    (
        "POST",
        "/api/v1/flows/c/rpcs/increment",
        None,
        b'{"input":1,"options":{"loadAttributeMapInstances":["nomap"]}}',
        JSON,
    ),
    ("GET", "/api/v1/flows/c/attributes", [("name", "counter")], None, {}),
    ("GET", "/api/v1/flows/c/attributes", [("name", "counter"), ("name", "nope")], None, {}),
    ("GET", "/api/v1/flows/c/attributes", None, None, {}),
    ("GET", "/api/v1/flows/c/attributes", {"runId": ""}, None, {}),
    ("GET", "/api/v1/flows/missing/attributes", None, None, {}),
    ("PUT", "/api/v1/flows/c/attributes", None, b'{"values":{"counter":40}}', JSON),
    ("PUT", "/api/v1/flows/c/attributes", None, b'{"values":{"counter":"x"}}', JSON),
    ("GET", "/api/v1/flows/c", None, None, {}),
    ("GET", "/api/v1/flows/missing", None, None, {}),
    ("GET", "/api/v1/flows/c/result", {"waitSeconds": "0"}, None, {}),
    ("GET", "/api/v1/flows/c/result", {"waitSeconds": "-1"}, None, {}),
    ("GET", "/api/v1/flows/c/history", None, None, {}),
    ("GET", "/api/v1/flows/c/history", {"pageSize": "0"}, None, {}),
    ("GET", "/api/v1/flows", {"query": "FlowType = 'CounterFlow'"}, None, {}),
    ("GET", "/api/v1/flows", {"query": "FlowType = "}, None, {}),
    ("GET", "/api/v1/flows", {"pageSize": "abc"}, None, {}),
    ("GET", "/api/v1/flows/c/channels", None, None, {}),
    ("POST", "/api/v1/flows/c/stop", None, b'{"type":"TERMINATE","reason":"done"}', JSON),
    ("POST", "/api/v1/flows/c/rpcs/increment", None, b'{"input":1}', JSON),  # closed: 404
    ("GET", "/api/v1/flow-types", None, None, {}),
    ("GET", "/api/v1/flows/c/", None, None, {}),  # trailing slash: FastAPI's redirect
    ("GET", "/nowhere", None, None, {}),
    ("GET", "/problems/", None, None, {}),
]


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<volatile>" if k in _VOLATILE_KEYS else _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<uuid>", value)
    return value


def _answer(response: httpx.Response) -> tuple[int, dict[str, str], Any]:
    headers = {name: response.headers[name] for name in _HEADERS if name in response.headers}
    try:
        body: Any = _mask(json.loads(response.content)) if response.content else b""
    except ValueError:
        body = response.content
    return response.status_code, headers, body


def _settings(settings: Settings, tmp_path: Path, name: str, fast: bool) -> Settings:
    data = tmp_path / name
    data.mkdir()
    return settings.model_copy(
        update={
            "database_url": backends.database_url_for(data),
            "blob_dir": str(data / "blobs"),
            "fast_path": fast,
        }
    )


async def test_the_fast_path_answers_every_request_as_fastapi_does(
    settings: Settings, tmp_path: Path
) -> None:
    from engine import Registry
    from patterns.primitives.rpc.flow import CounterFlow
    from patterns.sequentially_chunked_attribute_map.flow import ChunkedSubscriberFlow
    from patterns.sequentially_chunked_attribute_map.routes import router

    registry = Registry([CounterFlow(), ChunkedSubscriberFlow()])
    fast_settings = _settings(settings, tmp_path, "fast", True)
    slow_settings = _settings(settings, tmp_path, "slow", False)
    async with (
        served_app(fast_settings, registry, routers=[router]) as fast,
        served_app(slow_settings, registry, routers=[router]) as slow,
    ):
        for method, path, params, body, headers in REQUESTS:
            answers = []
            for served in (fast, slow):
                response = await served.client.request(
                    method, path, params=params, content=body, headers=headers
                )
                answers.append(_answer(response))
            assert answers[0] == answers[1], f"{method} {path} {params} {body!r}"
        served_paths = {path for path, _ in _fast_path_of(fast.app).compiled_paths()}
        assert _fast_path_of(slow.app)._enabled is False
    # The hot routes are among those the fast path serves.
    assert {
        "/api/v1/flows",
        "/api/v1/flows/{flowId}/rpcs/{rpcName}",
        "/api/v1/flows/{flowId}/attributes",
        REGISTER,
        SUBSCRIBERS,
    } <= served_paths


def _fast_path_of(app: Any) -> FastPath:
    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, FastPath):
        layer = getattr(layer, "app", None)
    assert isinstance(layer, FastPath), "the app has no fast path"
    return layer


@pytest.fixture
def count_fastapi_handling(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count the requests FastAPI's own request handler takes (the fast path's fallbacks)."""
    import fastapi.routing

    calls = 0
    original = fastapi.routing.solve_dependencies

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        if kwargs.get("embed_body_fields") is not None and "body" in kwargs:
            calls += 1
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counted)
    return lambda: calls


async def test_valid_requests_to_the_hot_routes_skip_fastapis_handler_and_refusals_take_it(
    settings: Settings, count_fastapi_handling: Callable[[], int]
) -> None:
    from engine import Registry
    from patterns.primitives.rpc.flow import CounterFlow

    async with served_app(settings, Registry([CounterFlow()])) as served:
        client = served.client
        started = await client.post(
            "/api/v1/flows", json={"flowType": "CounterFlow", "flowId": "c"}
        )
        assert started.status_code == 201
        for n in range(1, 4):
            answer = await client.post("/api/v1/flows/c/rpcs/increment", json={"input": 1})
            assert answer.status_code == 200 and answer.json() == {"output": n}
        read = await client.get("/api/v1/flows/c/attributes", params={"name": "counter"})
        assert read.json()["values"] == {"counter": 3}
        assert count_fastapi_handling() == 0
        refused = await client.post("/api/v1/flows/c/rpcs/increment", json={"input": "x"})
        assert refused.status_code == 400  # the engine refuses the input: still the fast path
        assert count_fastapi_handling() == 0
        invalid = await client.post("/api/v1/flows/c/rpcs/increment", json={"bogus": 1})
        assert invalid.status_code == 422  # the body model refuses it: FastAPI answers
        assert count_fastapi_handling() == 1
