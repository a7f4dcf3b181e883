"""Every documented error the server can be made to answer, through the generated client.

Each error must come back as the status its operation documents (the client raises on any
other), as application/problem+json parsed into the generated ``Problem`` model, with the code
of DESIGN section 6 and the typed fields that code carries.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract.python_client import (
    COUNTER_FLOW_TYPE,
    MESSAGE_LIMIT_BYTES,
    REQUEST_LIMIT_BYTES,
    GeneratedClient,
    error_locations,
    expect_problem,
    invoke,
    new_id,
    start_counter,
)
from tests.server import ServerProcess
from tests.support.backends import backend_independent
from tests.support.waiting import wait_until

pytestmark = backend_independent("the generated client and the document know no backend")

#: How long the RPC example's Step holds the counter lock; the test stops the Flow long before.
HOLD_SECONDS = 30.0
#: The bearer token of the server that requires one.
API_TOKEN = "contract-test-token"


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Run a server that requires a bearer token and has its Stream Store disabled."""
    env = {
        "DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL",
        "DEXLITE_API_TOKEN": API_TOKEN,
        "DEXLITE_STREAM__BACKEND": "disabled",
    }
    with ServerProcess(tmp_path_factory.mktemp("guarded-server"), env=env) as running:
        yield running


def stop(gen: GeneratedClient, client: Any, flow_id: str) -> None:
    """Cancel ``flow_id`` through stopFlow with an explicit body."""
    body = gen.models.StopFlowBody(type_=gen.models.StopType.CANCEL, reason="test")
    response = gen.api.stop_flow.sync_detailed(flow_id, client=client, body=body)
    assert response.status_code == 202, response.content


def test_describe_unknown_flow(python_client: GeneratedClient, client: Any) -> None:
    """describeFlow of a Flow ID that never ran is 404 FLOW_NOT_FOUND."""
    flow_id = new_id("never")
    response = python_client.api.describe_flow.sync_detailed(flow_id, client=client)
    expect_problem(python_client, response, 404, "FLOW_NOT_FOUND", flow_id=flow_id)


def test_start_unknown_flow_type(python_client: GeneratedClient, client: Any) -> None:
    """startFlow of a Flow type the registry lacks is 404 FLOW_TYPE_NOT_FOUND."""
    body = python_client.models.StartFlowBody(flow_type="NoSuchFlow", flow_id=new_id("nope"))
    response = python_client.api.start_flow.sync_detailed(client=client, body=body)
    expect_problem(python_client, response, 404, "FLOW_TYPE_NOT_FOUND")


def test_start_twice_with_reject_duplicate(python_client: GeneratedClient, client: Any) -> None:
    """A second start under REJECT_DUPLICATE is 409 FLOW_ALREADY_STARTED naming the run."""
    gen = python_client
    flow_id = new_id("duplicate")
    options = gen.models.StartFlowOptionsBody(
        id_reuse_policy=gen.models.IdReusePolicy.REJECT_DUPLICATE
    )
    body = gen.models.StartFlowBody(flow_type=COUNTER_FLOW_TYPE, flow_id=flow_id, options=options)
    first = gen.api.start_flow.sync_detailed(client=client, body=body)
    assert first.status_code == 201, first.content
    again = gen.api.start_flow.sync_detailed(client=client, body=body)
    run_id = first.parsed.run_id
    expect_problem(gen, again, 409, "FLOW_ALREADY_STARTED", flow_id=flow_id, run_id=run_id)


def test_unknown_rpc(python_client: GeneratedClient, client: Any) -> None:
    """invokeRpc of an RPC the Flow type lacks is 404 RPC_NOT_FOUND."""
    flow_id = new_id("counter")
    start_counter(python_client, client, flow_id)
    response = invoke(python_client, client, flow_id, "no_such_rpc")
    expect_problem(python_client, response, 404, "RPC_NOT_FOUND")


def test_rpc_on_a_stopped_flow(python_client: GeneratedClient, client: Any) -> None:
    """A locking RPC on a stopped run is 404 FLOW_NOT_ACTIVE_OR_NOT_FOUND."""
    flow_id = new_id("stopped")
    start_counter(python_client, client, flow_id)
    stop(python_client, client, flow_id)
    response = invoke(python_client, client, flow_id, "increment", 1)
    expect_problem(python_client, response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND", flow_id=flow_id)


def test_invalid_query(python_client: GeneratedClient, client: Any) -> None:
    """searchFlows with a query that ends too early is 400 INVALID_QUERY with its position."""
    query = "FlowType = "
    response = python_client.api.search_flows.sync_detailed(client=client, query=query)
    problem = expect_problem(python_client, response, 400, "INVALID_QUERY")
    position = python_client.typed(problem, "position")
    assert isinstance(position, int) and 0 <= position <= len(query), response.content


def test_invalid_page_tokens(python_client: GeneratedClient, client: Any) -> None:
    """A page token the server never issued is 400 INVALID_PAGE_TOKEN, on search and history."""
    gen = python_client
    response = gen.api.search_flows.sync_detailed(client=client, page_token="not-a-token")
    expect_problem(gen, response, 400, "INVALID_PAGE_TOKEN")
    flow_id = new_id("history")
    start_counter(gen, client, flow_id)
    response = gen.api.get_flow_history.sync_detailed(
        flow_id, client=client, page_token="not-a-token"
    )
    expect_problem(gen, response, 400, "INVALID_PAGE_TOKEN")


def test_invalid_arguments(python_client: GeneratedClient, client: Any) -> None:
    """A history pageSize of 0 and a Flow ID with a control character are 400
    INVALID_ARGUMENT naming the field."""
    gen = python_client
    flow_id = new_id("history")
    start_counter(gen, client, flow_id)
    response = gen.api.get_flow_history.sync_detailed(flow_id, client=client, page_size=0)
    expect_problem(gen, response, 400, "INVALID_ARGUMENT", field="pageSize")
    body = gen.models.StartFlowBody(flow_type=COUNTER_FLOW_TYPE, flow_id="a\u0001b")
    response = gen.api.start_flow.sync_detailed(client=client, body=body)
    expect_problem(gen, response, 400, "INVALID_ARGUMENT", field="flowId")


def test_validation_errors(python_client: GeneratedClient, client: Any) -> None:
    """Requests the schema refuses are 422 VALIDATION_ERROR listing each error's location."""
    gen = python_client
    flow_id = new_id("validation")
    start_counter(gen, client, flow_id)
    response = gen.api.wait_for_flow.sync_detailed(flow_id, client=client, wait_seconds=61)
    problem = expect_problem(gen, response, 422, "VALIDATION_ERROR")
    assert error_locations(gen, problem) == ["query.waitSeconds"]

    # Bodies no typed model can send go through the client's own httpx client.
    http = client.get_httpx_client()
    raw = http.post("/api/v1/flows", json={"flowId": flow_id, "input": 1})
    problem = expect_problem(gen, raw, 422, "VALIDATION_ERROR")
    assert error_locations(gen, problem) == ["body.flowType"]
    raw = http.put(f"/api/v1/flows/{flow_id}/attributes", json={"values": [1, 2]})
    problem = expect_problem(gen, raw, 422, "VALIDATION_ERROR")
    assert error_locations(gen, problem) == ["body.values"]
    raw = http.post(
        "/api/v1/flows", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    problem = expect_problem(gen, raw, 422, "VALIDATION_ERROR")
    locations = error_locations(gen, problem)
    assert len(locations) == 1 and locations[0].startswith("body"), locations


def test_rpc_lock_conflict(python_client: GeneratedClient, client: Any) -> None:
    """While a Step holds the counter lock, increment is 409 RPC_LOCK_CONFLICT with
    Retry-After, on the RPC example's route and through invokeRpc, and so is setAttributes."""
    gen = python_client
    flow_id = new_id("locked")
    started = gen.api.start_counter_flow.sync_detailed(client=client, flow_id=flow_id)
    assert started.status_code == 201, started.content
    try:
        held = gen.api.hold_counter_lock.sync_detailed(
            client=client, body=gen.models.HoldBody(seconds=HOLD_SECONDS), flow_id=flow_id
        )
        assert held.status_code == 200, held.content

        def conflict() -> Any:
            response = gen.api.increment_counter.sync_detailed(
                client=client, body=gen.models.IncrementBody(by=1), flow_id=flow_id
            )
            # Until the Step has the lock the increment succeeds; then it conflicts.
            assert response.status_code in (200, 409), response.content
            return response if response.status_code == 409 else None

        response = wait_until(conflict, interval=0.02, what="the hold to take the counter lock")
        expect_problem(gen, response, 409, "RPC_LOCK_CONFLICT", lock_key="counter", flow_id=flow_id)
        assert int(response.headers["Retry-After"]) >= 1, response.headers

        response = invoke(gen, client, flow_id, "increment", 2)
        expect_problem(gen, response, 409, "RPC_LOCK_CONFLICT", lock_key="counter", flow_id=flow_id)
        assert int(response.headers["Retry-After"]) >= 1, response.headers

        values = gen.models.AttributeValues.from_dict({"counter": 5})
        response = gen.api.set_attributes.sync_detailed(
            flow_id, client=client, body=gen.models.SetAttributesBody(values=values)
        )
        expect_problem(gen, response, 409, "RPC_LOCK_CONFLICT", lock_key="counter", flow_id=flow_id)
        assert int(response.headers["Retry-After"]) >= 1, response.headers
    finally:
        stop(gen, client, flow_id)


def test_rpc_handler_error(python_client: GeneratedClient, client: Any) -> None:
    """get_subscriber_page invoked without loading its chunk raises in the handler: 500
    RPC_HANDLER_ERROR naming the error type."""
    gen = python_client
    flow_id = new_id("handler-error")
    body = gen.models.StartFlowBody(flow_type="ChunkedSubscriberFlow", flow_id=flow_id)
    assert gen.api.start_flow.sync_detailed(client=client, body=body).status_code == 201
    # The pattern's route loads the chunk it reads; invokeRpc without that load does not.
    response = invoke(gen, client, flow_id, "get_subscriber_page", {"pageToken": "current"})
    expect_problem(gen, response, 500, "RPC_HANDLER_ERROR", error_type="AttributeMapNotLoadedError")


def test_payload_too_large(python_client: GeneratedClient, client: Any) -> None:
    """A request body over the server's limit is 413 PAYLOAD_TOO_LARGE."""
    gen = python_client
    body = gen.models.StartFlowBody(
        flow_type=COUNTER_FLOW_TYPE, flow_id=new_id("large"), input_="x" * (REQUEST_LIMIT_BYTES + 1)
    )
    try:
        response = gen.api.start_flow.sync_detailed(client=client, body=body)
    except gen.errors.UnexpectedStatus as exc:
        pytest.fail(f"startFlow does not document the {exc.status_code} the server answered: {exc}")
    expect_problem(gen, response, 413, "PAYLOAD_TOO_LARGE")


def test_stream_errors(python_client: GeneratedClient, client: Any) -> None:
    """A Stream message over the server's message limit is 429 RESOURCE_EXHAUSTED, not
    retryable; an undeclared Stream is 404 STREAM_NOT_FOUND."""
    gen = python_client
    flow_id = new_id("stream")
    body = gen.models.WriteStreamBody(source="test", value="x" * (MESSAGE_LIMIT_BYTES + 1))
    response = gen.api.write_stream.sync_detailed(
        COUNTER_FLOW_TYPE, flow_id, "counter-lock", client=client, body=body
    )
    expect_problem(gen, response, 429, "RESOURCE_EXHAUSTED", retryable=False)
    response = gen.api.list_stream_messages.sync_detailed(
        COUNTER_FLOW_TYPE, flow_id, "no-such-stream", client=client
    )
    expect_problem(gen, response, 404, "STREAM_NOT_FOUND")


def test_channel_message_not_found(python_client: GeneratedClient, client: Any) -> None:
    """Deleting a Channel message that is not pending is 404 CHANNEL_MESSAGE_NOT_FOUND."""
    gen = python_client
    flow_id = new_id("channel")
    started = gen.api.start_channel_flow.sync_detailed(client=client, flow_id=flow_id)
    assert started.status_code == 201, started.content
    message_id = str(uuid.uuid4())  # well formed, and no message has it
    response = gen.api.delete_channel_message.sync_detailed(
        flow_id, "queued-messages", message_id, client=client
    )
    expect_problem(gen, response, 404, "CHANNEL_MESSAGE_NOT_FOUND")


def test_missing_token_is_unauthenticated(
    python_client: GeneratedClient, guarded_server: ServerProcess
) -> None:
    """Without the bearer token, API and pattern routes are 401 UNAUTHENTICATED."""
    gen = python_client
    with gen.client(guarded_server.url) as anonymous:
        response = gen.api.list_flow_types.sync_detailed(client=anonymous)
        expect_problem(gen, response, 401, "UNAUTHENTICATED")
        assert response.headers.get("WWW-Authenticate") == "Bearer"
        response = gen.api.start_chunked_subscriber_flow.sync_detailed(client=anonymous)
        expect_problem(gen, response, 401, "UNAUTHENTICATED")


def test_disabled_stream_store_is_failed_precondition(
    python_client: GeneratedClient, guarded_server: ServerProcess
) -> None:
    """With the Stream Store disabled, Stream reads and writes are 409 FAILED_PRECONDITION
    (through the generated AuthenticatedClient)."""
    gen = python_client
    with gen.package.AuthenticatedClient(
        base_url=guarded_server.url, token=API_TOKEN, raise_on_unexpected_status=True
    ) as authenticated:
        flow_id = new_id("stream")
        body = gen.models.WriteStreamBody(source="test", value="x")
        response = gen.api.write_stream.sync_detailed(
            COUNTER_FLOW_TYPE, flow_id, "counter-lock", client=authenticated, body=body
        )
        expect_problem(gen, response, 409, "FAILED_PRECONDITION")
        response = gen.api.list_stream_messages.sync_detailed(
            COUNTER_FLOW_TYPE, flow_id, "counter-lock", client=authenticated
        )
        expect_problem(gen, response, 409, "FAILED_PRECONDITION")
