"""The CLI on answers a live server does not give on demand: server errors, a proxy's
non-problem answers, a body that is not JSON, a timeout; and the requests it sends. A stub
HTTP server answers; the CLI runs in process, on ``app.client.Client`` as always."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app.cli import common, main
from app.cli.errors import ExitCode
from tests.support.backends import backend_independent

pytestmark = backend_independent("no database")


@dataclass
class Seen:
    """A request the stub server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    """What the stub answers: status, content type and body."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0


@dataclass
class Stub:
    """A stub server's URL, the requests it received and how it answers them."""

    url: str
    seen: list[Seen] = field(default_factory=list)
    answer: Callable[[Seen], Answer] = lambda _: Answer(200, b"{}")


@pytest.fixture
def stub() -> Iterator[Stub]:
    """Serve canned answers on a free port of 127.0.0.1."""
    holder: list[Stub] = []

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            seen = Seen(self.command, self.path, dict(self.headers), self.rfile.read(length))
            holder[0].seen.append(seen)
            answer = holder[0].answer(seen)
            time.sleep(answer.delay)
            self.send_response(answer.status)
            self.send_header("content-type", answer.content_type)
            self.send_header("content-length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = do_POST = do_PUT = do_DELETE = _any

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(Stub(f"http://127.0.0.1:{server.server_address[1]}/"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()


def _problem(status: int, code: str) -> Answer:
    body = {"type": "/problems/x", "title": "T", "status": status, "detail": "why", "code": code}
    return Answer(status, json.dumps(body).encode(), "application/problem+json")


def _dexlite(stub: Stub, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main([*args, "--url", stub.url, "--token", "t0ken"])
    printed = capsys.readouterr()
    return status, printed.out, printed.err


@pytest.mark.parametrize(
    ("status", "code", "exit_code"),
    [
        (400, "INVALID_ARGUMENT", ExitCode.BAD_INPUT),
        (401, "UNAUTHENTICATED", ExitCode.UNAUTHENTICATED),
        (404, "FLOW_NOT_FOUND", ExitCode.NOT_FOUND),
        (404, "NOT_FOUND", ExitCode.NOT_FOUND),
        (405, "METHOD_NOT_ALLOWED", ExitCode.ERROR),
        (409, "RPC_LOCK_CONFLICT", ExitCode.CONFLICT),
        (409, "FAILED_PRECONDITION", ExitCode.CONFLICT),
        (413, "PAYLOAD_TOO_LARGE", ExitCode.BAD_INPUT),
        (422, "VALIDATION_ERROR", ExitCode.BAD_INPUT),
        (429, "RESOURCE_EXHAUSTED", ExitCode.ERROR),
        (500, "RPC_HANDLER_ERROR", ExitCode.ERROR),
        (500, "INTERNAL", ExitCode.ERROR),
        (503, "UNAVAILABLE", ExitCode.ERROR),
        (504, "RPC_TIMEOUT", ExitCode.ERROR),
    ],
)
def test_a_problem_answer_prints_its_code_and_detail_and_exits_with_the_code_of_its_status(
    stub: Stub, capsys: pytest.CaptureFixture[str], status: int, code: str, exit_code: ExitCode
) -> None:
    stub.answer = lambda _: _problem(status, code)
    done = _dexlite(stub, capsys, "rpc", "f", "r")
    assert done == (exit_code, "", f"error: {code}: why\n")


def test_an_answer_that_is_not_a_problem_names_its_status_and_exits_1(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.answer = lambda _: Answer(502, b"<html>bad gateway</html>", "text/html")
    status, out, err = _dexlite(stub, capsys, "flows", "describe", "f")
    assert (status, out) == (ExitCode.ERROR, "")
    assert err == "error: UNAVAILABLE: HTTP 502: <html>bad gateway</html>\n"


def test_a_success_that_is_not_json_exits_1(stub: Stub, capsys: pytest.CaptureFixture[str]) -> None:
    stub.answer = lambda _: Answer(200, b"<html>", "text/html")
    status, out, err = _dexlite(stub, capsys, "flows", "describe", "f")
    assert (status, out) == (ExitCode.ERROR, "")
    assert err.startswith("error: INVALID_RESPONSE: ")


def test_a_server_that_does_not_answer_in_time_exits_1(
    stub: Stub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "TIMEOUT_SECONDS", 0.2)
    stub.answer = lambda _: Answer(200, b"{}", delay=1.0)
    status, out, err = _dexlite(stub, capsys, "flows", "describe", "f")
    assert (status, out) == (ExitCode.ERROR, "")
    assert err.startswith(f"error: TIMEOUT: {stub.url.rstrip('/')} did not answer in time (")


def test_requests_carry_the_token_escaped_ids_and_only_the_given_fields(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.answer = lambda seen: Answer(
        200,
        b'{"flowId": "f", "runId": "r", "values": {}}'
        if seen.method == "GET"
        else b'{"output": null}',
    )
    assert _dexlite(stub, capsys, "rpc", "a b?", "read")[0] == 0
    assert _dexlite(stub, capsys, "rpc", "f", "set", "--input", "7", "--run-id", "r1")[0] == 0
    assert _dexlite(stub, capsys, "attributes", "f", "x", "m/k")[0] == 0
    assert [s.headers["Authorization"] for s in stub.seen] == ["Bearer t0ken"] * 3
    assert stub.seen[0].path == "/api/v1/flows/a%20b%3F/rpcs/read"
    assert [json.loads(s.body) for s in stub.seen[:2]] == [{}, {"input": 7, "runId": "r1"}]
    assert stub.seen[2].path == "/api/v1/flows/f/attributes?name=x&name=m%2Fk"


def test_time_travel_requests_carry_the_point_and_the_given_options(
    stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer(seen: Seen) -> Answer:
        if seen.path == "/api/v1/time-travel":
            return Answer(200, b'{"dryRun": true, "matched": [], "traveled": [], "failed": []}')
        return Answer(200, b'{"flowId": "f", "runId": "r3", "previousRunId": "r2"}')

    stub.answer = answer
    travel = ("flows", "time-travel", "--yes", "--reason", "why")
    assert _dexlite(stub, capsys, *travel, "a/b", "--run-id", "r1", "--to", "beginning")[0] == 0
    forked = ("--skip-writes-reapply", "--fork-to", "g")
    event = ("--to", "event", "--event-id", "3", *forked)
    assert _dexlite(stub, capsys, *travel, "f", "--run-id", "r2", *event)[0] == 0
    bulk = ("flows", "time-travel-all", "FlowType = 'X'", "--to", "beginning", "--dry-run")
    assert _dexlite(stub, capsys, *bulk, "--limit", "7")[0] == 0
    assert [(s.method, s.path) for s in stub.seen] == [
        ("POST", "/api/v1/flows/a%2Fb/time-travel"),
        ("POST", "/api/v1/flows/f/time-travel"),
        ("POST", "/api/v1/time-travel"),
    ]
    point = {"kind": "BEGINNING", "method": "WAIT_FOR"}
    assert [json.loads(s.body) for s in stub.seen] == [
        {"runId": "r1", "to": point, "reason": "why", "skipWritesReapply": False},
        {
            "runId": "r2",
            "to": {"kind": "EVENT", "eventId": 3, "method": "WAIT_FOR"},
            "reason": "why",
            "skipWritesReapply": True,
            "forkToFlowId": "g",
        },
        {
            "query": "FlowType = 'X'",
            "to": point,
            "reason": "",
            "skipWritesReapply": False,
            "dryRun": True,
            "limit": 7,
        },
    ]
