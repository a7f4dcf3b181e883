"""The Python client openapi-python-client generates from openapi.json, against a live server.

The client is generated as a user would generate it, and every call goes through it with
``raise_on_unexpected_status``: a status the document does not list fails the test, and every
success is read through the typed model the document promises. The errors are in
``test_python_client_errors``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.python_client import (
    COUNTER_FLOW_TYPE,
    GeneratedClient,
    document_path,
    error_locations,
    expect_problem,
    invoke,
    new_id,
    start_counter,
)
from tests.support.backends import backend_independent

pytestmark = backend_independent("the generated client and the document know no backend")

#: Records per chunk of the Sequentially Chunked AttributeMap pattern (DESIGN section 7).
CHUNK_SIZE = 100


def register(gen: GeneratedClient, client: Any, flow_id: str, email: str, name: str) -> Any:
    """Register a subscriber through the pattern's route; return the typed record."""
    body = gen.models.RegisterBody(email=email, name=name)
    response = gen.api.register_subscriber.sync_detailed(client=client, body=body, flow_id=flow_id)
    assert response.status_code == 201, response.content
    assert isinstance(response.parsed, gen.models.SubscriberResponse), response.content
    return response.parsed


def start_pattern(gen: GeneratedClient, client: Any, flow_id: str) -> None:
    """Start the subscriber Flow through the pattern's route, then check a second start is
    the documented 200 with ``started`` false."""
    operation = gen.api.start_chunked_subscriber_flow
    first = operation.sync_detailed(client=client, flow_id=flow_id)
    assert first.status_code == 201, first.content
    assert first.parsed.started is True and first.parsed.flow_id == flow_id
    again = operation.sync_detailed(client=client, flow_id=flow_id)
    assert again.status_code == 200, again.content
    assert again.parsed.started is False and again.parsed.run_id == first.parsed.run_id


def test_generation_prints_no_warnings(python_client: GeneratedClient) -> None:
    """openapi-python-client generates the client from the document without a warning."""
    output = python_client.generator_output
    assert "Warning" not in output, (
        f"openapi-python-client warned about {document_path()}:\n{output}"
    )


def test_pattern_registers_and_lists_subscribers(
    python_client: GeneratedClient, client: Any
) -> None:
    """Three registrations get sequences 1 to 3 and come back newest first on one page."""
    gen = python_client
    flow_id = new_id("chunked")
    start_pattern(gen, client, flow_id)
    people = [("ada@example.com", "Ada"), ("bo@example.com", "Bo"), ("cy@example.com", "Cy")]
    records = [register(gen, client, flow_id, email, name) for email, name in people]
    assert [(r.sequence, r.email, r.name) for r in records] == [
        (1, "ada@example.com", "Ada"),
        (2, "bo@example.com", "Bo"),
        (3, "cy@example.com", "Cy"),
    ]

    page = gen.api.list_subscribers.sync_detailed(client=client, flow_id=flow_id)
    assert page.status_code == 200, page.content
    assert isinstance(page.parsed, gen.models.SubscribersPageResponse), page.content
    listed = [(s.sequence, s.email, s.name, s.registered_at) for s in page.parsed.subscribers]
    assert listed == [(r.sequence, r.email, r.name, r.registered_at) for r in reversed(records)]
    assert page.parsed.next_page_token == "", "a log with no archived chunk has no older page"


def test_pattern_pages_follow_the_next_page_token(
    python_client: GeneratedClient, client: Any
) -> None:
    """Past one chunk, the pages follow nextPageToken from current to the oldest chunk."""
    gen = python_client
    flow_id = new_id("chunked-pages")
    start_pattern(gen, client, flow_id)
    total = CHUNK_SIZE + 3
    for n in range(1, total + 1):
        register(gen, client, flow_id, f"user{n}@example.com", f"User {n}")

    tokens, pages = ["current"], []
    while tokens[-1]:
        response = gen.api.list_subscribers.sync_detailed(
            client=client, flow_id=flow_id, page_token=tokens[-1]
        )
        assert response.status_code == 200, f"page {tokens[-1]!r}: {response.content!r}"
        pages.append([(s.sequence, s.email) for s in response.parsed.subscribers])
        tokens.append(response.parsed.next_page_token)
        assert len(tokens) <= 3, f"more pages than chunks: {tokens}"

    assert tokens == ["current", "00000000000000000001", ""]
    assert pages == [
        [(n, f"user{n}@example.com") for n in range(total, CHUNK_SIZE, -1)],
        [(n, f"user{n}@example.com") for n in range(CHUNK_SIZE, 0, -1)],
    ]


def test_pattern_errors(python_client: GeneratedClient, client: Any) -> None:
    """The pattern's documented errors arrive as typed Problems with their codes."""
    gen = python_client
    never_started = new_id("chunked-never")
    body = gen.models.RegisterBody(email="ada@example.com", name="Ada")
    response = gen.api.register_subscriber.sync_detailed(
        client=client, body=body, flow_id=never_started
    )
    expect_problem(gen, response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND", flow_id=never_started)
    response = gen.api.list_subscribers.sync_detailed(client=client, flow_id=never_started)
    expect_problem(gen, response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")

    flow_id = new_id("chunked-errors")
    start_pattern(gen, client, flow_id)
    # A typed body the schema refuses: the email has no "@".
    bad = gen.models.RegisterBody(email="not-an-email", name="Ada")
    response = gen.api.register_subscriber.sync_detailed(client=client, body=bad, flow_id=flow_id)
    problem = expect_problem(gen, response, 422, "VALIDATION_ERROR")
    assert error_locations(gen, problem) == ["body.email"]
    # A body no typed model can send: a field missing and an unknown one.
    raw = client.get_httpx_client().post(
        "/patterns/sequentially-chunked-attribute-map/register",
        params={"flowId": flow_id},
        json={"email": "ada@example.com", "nickname": "Ada"},
    )
    problem = expect_problem(gen, raw, 422, "VALIDATION_ERROR")
    assert sorted(error_locations(gen, problem)) == ["body.name", "body.nickname"]

    response = gen.api.list_subscribers.sync_detailed(
        client=client, flow_id=flow_id, page_token="00000000000000000002"
    )
    expect_problem(gen, response, 400, "INVALID_PAGE_TOKEN")
    response = gen.api.list_subscribers.sync_detailed(
        client=client, flow_id=flow_id, page_token="00000000000000000101"
    )
    expect_problem(gen, response, 404, "PAGE_NOT_FOUND")


def history(gen: GeneratedClient, client: Any, flow_id: str, *, page_size: int) -> list[Any]:
    """Return every history event of ``flow_id``, following nextPageToken page by page."""
    events: list[Any] = []
    token = ""
    for _ in range(100):
        page = gen.api.get_flow_history.sync_detailed(
            flow_id, client=client, page_size=page_size, page_token=token
        )
        assert page.status_code == 200, page.content
        assert len(page.parsed.events) <= page_size
        events.extend(page.parsed.events)
        token = page.parsed.next_page_token
        if not token:
            return events
    raise AssertionError(f"the history of {flow_id} did not end within 100 pages")


def test_engine_api_round_trip(python_client: GeneratedClient, client: Any) -> None:
    """A CounterFlow through the engine API: registry, start, describe, RPCs, Attributes,
    history, and its result once an RPC completes it."""
    gen = python_client
    types = gen.api.list_flow_types.sync_detailed(client=client)
    assert types.status_code == 200, types.content
    counter_type = {t.flow_type: t for t in types.parsed.flow_types}.get(COUNTER_FLOW_TYPE)
    assert counter_type is not None, f"{COUNTER_FLOW_TYPE} is not listed: {types.content!r}"
    assert {r.name for r in counter_type.rpcs} == {
        "increment",
        "hold_counter_lock",
        "finish",
        "read_counter",
    }
    assert [a.name for a in counter_type.attributes] == ["counter"]

    flow_id = new_id("counter")
    run_id = start_counter(gen, client, flow_id)
    described = gen.api.describe_flow.sync_detailed(flow_id, client=client)
    assert described.status_code == 200, described.content
    info = described.parsed
    assert (info.flow_id, info.run_id, info.flow_type) == (flow_id, run_id, COUNTER_FLOW_TYPE)
    assert str(info.status) == "RUNNING"
    assert info.closed_at is None and info.parent_flow_id is None

    incremented = invoke(gen, client, flow_id, "increment", 2)
    assert incremented.status_code == 200, incremented.content
    assert incremented.parsed.output == 2
    read = invoke(gen, client, flow_id, "read_counter")
    assert read.status_code == 200 and read.parsed.output == 2, read.content

    values = gen.models.AttributeValues.from_dict({"counter": 40})
    written = gen.api.set_attributes.sync_detailed(
        flow_id, client=client, body=gen.models.SetAttributesBody(values=values)
    )
    assert written.status_code == 200, written.content
    assert (written.parsed.flow_id, written.parsed.run_id) == (flow_id, run_id)
    attributes = gen.api.get_attributes.sync_detailed(flow_id, client=client, name=["counter"])
    assert attributes.status_code == 200, attributes.content
    assert attributes.parsed.run_id == run_id
    assert attributes.parsed.values.to_dict() == {"counter": 40}

    running = gen.api.wait_for_flow.sync_detailed(flow_id, client=client)
    assert running.status_code == 200, running.content
    assert str(running.parsed.status) == "RUNNING" and running.parsed.completions == []

    finished = gen.api.finish_counter_flow.sync_detailed(client=client, flow_id=flow_id)
    assert finished.status_code == 200, finished.content
    assert finished.parsed.run_id == run_id
    result = gen.api.wait_for_flow.sync_detailed(flow_id, client=client, wait_seconds=20)
    assert result.status_code == 200, result.content
    assert str(result.parsed.status) == "COMPLETED", result.content
    assert [c.output for c in result.parsed.completions] == [40]

    events = history(gen, client, flow_id, page_size=2)
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert events[0].event_type == "FLOW_STARTED"
    whole = gen.api.get_flow_history.sync_detailed(flow_id, client=client, page_size=1000)
    assert [e.event_id for e in whole.parsed.events] == [e.event_id for e in events]


def test_search_flows_pages_through_a_query(python_client: GeneratedClient, client: Any) -> None:
    """searchFlows finds exactly the queried runs, newest first, two per page."""
    gen = python_client
    prefix = new_id("search")
    flow_ids = [f"{prefix}-{n}" for n in range(3)]
    for flow_id in flow_ids:
        start_counter(gen, client, flow_id)
    query = " OR ".join(f"FlowId = '{flow_id}'" for flow_id in flow_ids)

    found: list[str] = []
    token = ""
    for _ in range(len(flow_ids) + 1):
        page = gen.api.search_flows.sync_detailed(
            client=client, query=query, page_size=2, page_token=token
        )
        assert page.status_code == 200, page.content
        assert len(page.parsed.flows) <= 2
        found.extend(f.flow_id for f in page.parsed.flows)
        token = page.parsed.next_page_token
        if not token:
            break
    assert found == list(reversed(flow_ids)), f"query {query!r} found {found}"


def test_stop_flow_without_a_body(python_client: GeneratedClient, client: Any) -> None:
    """stopFlow called with no body cancels the run (the body's defaults)."""
    gen = python_client
    flow_id = new_id("stop")
    run_id = start_counter(gen, client, flow_id)
    try:
        stopped = gen.api.stop_flow.sync_detailed(flow_id, client=client)
    except TypeError as exc:
        pytest.fail(
            f"the generated stopFlow cannot send a request without its body ({exc}): the "
            "document makes the optional body nullable, so the client serializes UNSET"
        )
    assert stopped.status_code == 202, stopped.content
    assert (stopped.parsed.flow_id, stopped.parsed.run_id) == (flow_id, run_id)
    described = gen.api.describe_flow.sync_detailed(flow_id, client=client)
    assert str(described.parsed.status) == "CANCELED", described.content
    assert described.parsed.closed_at is not None


def test_health_and_ready(python_client: GeneratedClient, client: Any) -> None:
    """health and ready answer 200 with their typed bodies."""
    gen = python_client
    health = gen.api.health.sync_detailed(client=client)
    assert health.status_code == 200 and health.parsed.status == "ok", health.content
    ready = gen.api.ready.sync_detailed(client=client)
    assert ready.status_code == 200 and ready.parsed.status == "ready", ready.content


def test_schedules_round_trip(python_client: GeneratedClient, client: Any) -> None:
    """createSchedule, describe, list, pause, trigger, backfill and delete through the typed
    client, with their documented errors (409, 404)."""
    gen = python_client
    api, models = gen.api, gen.models
    schedule_id = new_id("sched")
    body = models.ScheduleBody(
        schedule_id=schedule_id, flow_type=COUNTER_FLOW_TYPE, every_seconds=3600
    )
    created = api.create_schedule.sync_detailed(client=client, body=body)
    assert created.status_code == 201, created.content
    assert isinstance(created.parsed, models.ScheduleResponse)
    assert (created.parsed.schedule_id, created.parsed.every_seconds) == (schedule_id, 3600)
    assert len(created.parsed.next_action_times) == 5
    again = api.create_schedule.sync_detailed(client=client, body=body)
    expect_problem(gen, again, 409, "SCHEDULE_ALREADY_EXISTS")
    paused = api.pause_schedule.sync_detailed(
        schedule_id, client=client, body=models.NoteBody(note="quiet")
    )
    assert (paused.parsed.paused, paused.parsed.note) == (True, "quiet")
    unpaused = api.unpause_schedule.sync_detailed(schedule_id, client=client)  # no body
    assert unpaused.parsed.paused is False, unpaused.content
    triggered = api.trigger_schedule.sync_detailed(schedule_id, client=client)
    assert triggered.parsed.started is True and triggered.parsed.flow_id.startswith(schedule_id)
    backfill = api.backfill_schedule.sync_detailed(
        schedule_id,
        client=client,
        body=models.BackfillBody.from_dict(
            {"startAt": "2020-01-01T00:00:00Z", "endAt": "2020-01-01T02:00:00Z"}
        ),
    )
    # SKIP: the triggered run is still open, so both backfilled times are skipped.
    assert (backfill.parsed.started, backfill.parsed.skipped) == ([], 2), backfill.content
    listed = api.list_schedules.sync_detailed(client=client, page_size=1000)
    assert schedule_id in [s.schedule_id for s in listed.parsed.schedules]
    assert api.delete_schedule.sync_detailed(schedule_id, client=client).status_code == 204
    missing = api.describe_schedule.sync_detailed(schedule_id, client=client)
    expect_problem(gen, missing, 404, "SCHEDULE_NOT_FOUND")
