"""The CLI's HTTP client on answers a live server does not give on demand: server errors, a
proxy's non-problem answers, a body that is not JSON, a timeout. No server: httpx's mock
transport answers."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from app.cli.client import NO_INPUT, Client
from app.cli.errors import APIError, ExitCode
from tests.support.backends import backend_independent

pytestmark = backend_independent("no database")


def _client(answer: Callable[[httpx.Request], httpx.Response]) -> Client:
    return Client("http://dexlite.test/", "t0ken", transport=httpx.MockTransport(answer))


def _problem(status: int, code: str) -> httpx.Response:
    body = {"type": "/problems/x", "title": "T", "status": status, "detail": "why", "code": code}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


@pytest.mark.parametrize(
    ("status", "code", "exit_code"),
    [
        (400, "INVALID_ARGUMENT", ExitCode.BAD_INPUT),
        (401, "UNAUTHENTICATED", ExitCode.UNAUTHENTICATED),
        (404, "FLOW_NOT_FOUND", ExitCode.NOT_FOUND),
        (409, "RPC_LOCK_CONFLICT", ExitCode.CONFLICT),
        (413, "PAYLOAD_TOO_LARGE", ExitCode.BAD_INPUT),
        (422, "VALIDATION_ERROR", ExitCode.BAD_INPUT),
        (429, "RESOURCE_EXHAUSTED", ExitCode.ERROR),
        (500, "RPC_HANDLER_ERROR", ExitCode.ERROR),
        (504, "RPC_TIMEOUT", ExitCode.ERROR),
    ],
)
def test_a_problem_answer_raises_its_code_and_detail_with_the_exit_code_of_its_status(
    status: int, code: str, exit_code: ExitCode
) -> None:
    with _client(lambda _: _problem(status, code)) as client, pytest.raises(APIError) as raised:
        client.invoke_rpc("f", "r", NO_INPUT)
    assert (raised.value.code, raised.value.detail, raised.value.status) == (code, "why", status)
    assert raised.value.exit_code == exit_code


def test_an_answer_that_is_not_a_problem_names_its_status() -> None:
    gateway = _client(lambda _: httpx.Response(502, text="<html>bad gateway</html>"))
    with gateway as client, pytest.raises(APIError) as raised:
        client.describe_flow("f")
    assert (raised.value.code, raised.value.detail) == ("HTTP_502", "Bad Gateway")
    assert raised.value.exit_code == ExitCode.ERROR


def test_a_success_that_is_not_json_is_an_error() -> None:
    html = _client(lambda _: httpx.Response(200, text="<html>"))
    with html as client, pytest.raises(APIError) as raised:
        client.describe_flow("f")
    assert raised.value.code == "INVALID_RESPONSE"
    assert raised.value.exit_code == ExitCode.ERROR


def test_a_timeout_is_an_error() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with _client(slow) as client, pytest.raises(APIError) as raised:
        client.describe_flow("f")
    assert (raised.value.code, raised.value.status, raised.value.exit_code) == (
        "TIMEOUT",
        None,
        ExitCode.ERROR,
    )


def test_requests_carry_the_token_escaped_ids_and_only_the_given_fields() -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"output": None})

    with _client(record) as client:
        client.invoke_rpc("a b?", "read", NO_INPUT)
        client.invoke_rpc("f", "set", None, run_id="r1")
        client.get_attributes("f", ["x", "m/k"])
    assert [r.headers["authorization"] for r in seen] == ["Bearer t0ken"] * 3
    assert seen[0].url.raw_path == b"/api/v1/flows/a%20b%3F/rpcs/read"
    assert (seen[0].content, seen[1].content) == (b"{}", b'{"input":null,"runId":"r1"}')
    assert seen[2].url.params.get_list("name") == ["x", "m/k"]


def test_time_travel_requests_carry_the_point_and_only_the_given_options() -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    with _client(record) as client:
        client.time_travel("a/b", "r1", {"kind": "BEGINNING"})
        client.time_travel(
            "f",
            "r2",
            {"kind": "EVENT", "eventId": 3},
            reason="why",
            skip_writes_reapply=True,
            fork_to_flow_id="g",
        )
        client.time_travel_all("FlowType = 'X'", {"kind": "BEGINNING"}, dry_run=True)
        client.time_travel_all("q", {"kind": "BEGINNING"}, limit=7)
    assert [(r.method, r.url.raw_path) for r in seen] == [
        ("POST", b"/api/v1/flows/a%2Fb/time-travel"),
        ("POST", b"/api/v1/flows/f/time-travel"),
        ("POST", b"/api/v1/time-travel"),
        ("POST", b"/api/v1/time-travel"),
    ]
    assert [json.loads(r.content) for r in seen] == [
        {"runId": "r1", "to": {"kind": "BEGINNING"}, "reason": "", "skipWritesReapply": False},
        {
            "runId": "r2",
            "to": {"kind": "EVENT", "eventId": 3},
            "reason": "why",
            "skipWritesReapply": True,
            "forkToFlowId": "g",
        },
        {
            "query": "FlowType = 'X'",
            "to": {"kind": "BEGINNING"},
            "reason": "",
            "skipWritesReapply": False,
            "dryRun": True,
        },
        {
            "query": "q",
            "to": {"kind": "BEGINNING"},
            "reason": "",
            "skipWritesReapply": False,
            "dryRun": False,
            "limit": 7,
        },
    ]
