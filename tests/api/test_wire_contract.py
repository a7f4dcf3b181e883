"""What the server accepts is what the document says, and every problem's type is a page.

- Request bodies are strict: a boolean is not an integer, a string not a number, ``null`` is
  not an (optional) body; enum values and ISO times still arrive as JSON strings.
- Values checked against declared types (RPC and Flow inputs, Attributes) are strict the same
  way.
- Each problem ``type`` is a path of this server that answers with a page naming its code.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.main import create_app
from app.problems import catalog
from app.settings import Settings
from tests.support.problems import assert_problem


async def test_request_bodies_refuse_values_their_schema_forbids(make_client: Any) -> None:
    async with make_client() as client:
        started = await client.post("/primitives/rpc/start", params={"flowId": "strict-rpc"})
        assert started.status_code == 201, started.text
        for body in ({"by": True}, {"by": "2"}, {"by": 2.5}):
            refused = await client.post(
                "/primitives/rpc/increment", params={"flowId": "strict-rpc"}, json=body
            )
            problem = assert_problem(refused, 422, "VALIDATION_ERROR")
            assert problem["errors"][0]["location"] == "body.by", problem
        counted = await client.post(
            "/primitives/rpc/increment", params={"flowId": "strict-rpc"}, json={"by": 2}
        )
        assert counted.json() == {"counter": 2}

        timeout = await client.post(
            "/api/v1/flows",
            json={
                "flowType": "CounterFlow",
                "flowId": "strict-timeout",
                "options": {"timeoutSeconds": True},
            },
        )
        problem = assert_problem(timeout, 422, "VALIDATION_ERROR")
        assert problem["errors"][0]["location"] == "body.options.timeoutSeconds", problem
        match = await client.post(
            "/api/v1/flows/strict-rpc/attribute-matches",
            json={"name": "counter", "value": 2, "waitSeconds": True},
        )
        assert_problem(match, 422, "VALIDATION_ERROR")
        # An enum still arrives as its string value.
        stopped = await client.post(
            "/api/v1/flows/strict-rpc/stop", json={"type": "TERMINATE", "reason": "done"}
        )
        assert stopped.status_code == 202, stopped.text


async def test_rpc_inputs_are_checked_strictly_against_their_declared_type(
    make_client: Any,
) -> None:
    async with make_client() as client:
        await client.post("/primitives/rpc/start", params={"flowId": "strict-input"})
        for wrong in ("7", True, 1.5):
            refused = await client.post(
                "/api/v1/flows/strict-input/rpcs/increment", json={"input": wrong}
            )
            assert_problem(refused, 400, "INVALID_ARGUMENT", field="input of RPC increment")
        counted = await client.post("/api/v1/flows/strict-input/rpcs/increment", json={"input": 7})
        assert counted.json() == {"output": 7}
        values = await client.put(
            "/api/v1/flows/strict-input/attributes", json={"values": {"counter": "8"}}
        )
        assert_problem(values, 400, "INVALID_ARGUMENT", field="values.counter")
        read = await client.get("/api/v1/flows/strict-input/attributes", params={"name": "counter"})
        assert read.json()["values"] == {"counter": 7}


async def test_an_optional_body_may_be_left_out_but_not_sent_as_null(make_client: Any) -> None:
    async with make_client() as client:
        for flow_id in ("no-body", "null-body"):
            started = await client.post("/primitives/rpc/start", params={"flowId": flow_id})
            assert started.status_code == 201
        null = await client.post(
            "/api/v1/flows/null-body/stop",
            content=b"null",
            headers={"content-type": "application/json"},
        )
        assert_problem(null, 422, "VALIDATION_ERROR")
        described = await client.get("/api/v1/flows/null-body")
        assert described.json()["status"] == "RUNNING"
        stopped = await client.post("/api/v1/flows/no-body/stop")
        assert stopped.status_code == 202, stopped.text
        described = await client.get("/api/v1/flows/no-body")
        assert described.json()["status"] == "CANCELED"


async def test_every_problem_type_is_a_page_naming_its_code(make_client: Any) -> None:
    async with make_client() as client:
        missing = await client.get("/api/v1/flows/nobody-here")
        problem = assert_problem(missing, 404, "FLOW_NOT_FOUND")
        assert problem["type"] == "/problems/flow-not-found"
        page = await client.get(problem["type"])
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "FLOW_NOT_FOUND" in page.text
        for code in catalog().values():
            described = await client.get(code.type_uri)
            assert described.status_code == 200, code
            assert code.code in described.text and str(code.status) in described.text
        index = await client.get("/problems/")
        assert all(code in index.text for code in catalog())
        unknown = await client.get("/problems/no-such-code")
        assert_problem(unknown, 404, "NOT_FOUND")


async def test_readyz_is_a_503_problem_until_the_engine_has_started() -> None:
    app = create_app(Settings())
    # No lifespan runs over a bare ASGI transport: the engine never starts.
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/readyz")
        assert_problem(response, 503, "UNAVAILABLE")
        assert (await client.get("/healthz")).status_code == 200


async def test_the_flow_started_event_carries_the_run_input(make_client: Any) -> None:
    async with make_client() as client:
        started = await client.post(
            "/primitives/timer/start", params={"flowId": "with-input"}, json={"seconds": 0.25}
        )
        assert started.status_code == 201, started.text
        history = await client.get("/api/v1/flows/with-input/history", params={"pageSize": 1})
        first = history.json()["events"][0]
    assert first["eventType"] == "FLOW_STARTED"
    assert first["details"]["input"] == {"seconds": 0.25}


async def test_a_body_sent_without_a_json_content_type_is_told_what_to_send(
    make_client: Any,
) -> None:
    body = b'{"flowType": "CounterFlow", "flowId": "typed"}'
    async with make_client() as client:
        bare = await client.post("/api/v1/flows", content=body)
        plain = await client.post(
            "/api/v1/flows", content=body, headers={"content-type": "text/plain"}
        )
        sent_right = await client.post(
            "/api/v1/flows", content=body, headers={"content-type": "application/json"}
        )
    expected = (
        "the body must be a JSON object sent with 'Content-Type: application/json' "
        "(this request's Content-Type {})"
    )
    for answer, sent in [(bare, "is missing"), (plain, "is 'text/plain'")]:
        problem = assert_problem(answer, 422, "VALIDATION_ERROR")
        message = expected.format(sent)
        assert problem["detail"] == f"body: {message}"
        assert problem["errors"] == [
            {"location": "body", "message": message, "type": "model_attributes_type"}
        ]
    assert sent_right.status_code == 201, sent_right.text


async def test_a_snake_case_field_is_refused_with_its_camel_case_name(make_client: Any) -> None:
    async with make_client() as client:
        alone = await client.post("/api/v1/flows", json={"flow_type": "CounterFlow", "flowId": "s"})
        beside = await client.post(
            "/api/v1/flows",
            json={"flowType": "CounterFlow", "flowId": "s", "flow_type": "CounterFlow"},
        )
        nested = await client.post(
            "/api/v1/flows",
            json={"flowType": "CounterFlow", "flowId": "s", "options": {"request_id": "r"}},
        )
        described = await client.get("/api/v1/flows/s")
    hint = "Extra inputs are not permitted: field names are camelCase, write {!r} instead"
    assert assert_problem(alone, 422, "VALIDATION_ERROR")["detail"] == (
        f"body.flow_type: {hint.format('flowType')}"
    )
    assert assert_problem(beside, 422, "VALIDATION_ERROR")["errors"] == [
        {
            "location": "body.flow_type",
            "message": hint.format("flowType"),
            "type": "extra_forbidden",
        }
    ]
    assert assert_problem(nested, 422, "VALIDATION_ERROR")["errors"] == [
        {
            "location": "body.options.request_id",
            "message": hint.format("requestId"),
            "type": "extra_forbidden",
        }
    ]
    assert_problem(described, 404, "FLOW_NOT_FOUND")  # nothing was started
