"""The Channel primitive over HTTP: messages queued in FIFO order with increasing UUIDv7 IDs, the
seed's transactional move by ID that HandlePrioritizedMessage then consumes, and a concurrent
consumer that makes the move commit neither its deletion nor its publication."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from engine import ChannelMessage, Context
from engine.testing import settle
from patterns.primitives.channel.flow import ChannelFlow
from tests.support.problems import assert_problem

BASE = "/primitives/channel"
QUEUED = "queued-messages"
PRIORITIZED = "prioritized-messages"
HANDLED = "primitive-channel-handled"


async def start(client: httpx.AsyncClient, flow_id: str) -> httpx.Response:
    response = await client.post(f"{BASE}/start", params={"flowId": flow_id})
    assert response.status_code == 201, response.text
    return response


async def queue(client: httpx.AsyncClient, flow_id: str, value: str) -> str:
    """Queue ``value`` and return its message ID."""
    response = await client.post(f"{BASE}/queue", params={"flowId": flow_id}, json={"value": value})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["value"] == value
    message_id: str = body["messageId"]
    return message_id


async def move(client: httpx.AsyncClient, flow_id: str, message_id: str) -> httpx.Response:
    return await client.post(
        f"{BASE}/move", params={"flowId": flow_id}, json={"messageId": message_id}
    )


async def queues(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"{BASE}/queues", params={"flowId": flow_id})
    assert response.status_code == 200, response.text
    return response.json()


async def handled(client: httpx.AsyncClient, flow_id: str) -> list[str]:
    response = await client.get(f"{BASE}/handled", params={"flowId": flow_id})
    assert response.status_code == 200, response.text
    values: list[str] = response.json()["handled"]
    return values


async def engine_view(client: httpx.AsyncClient, flow_id: str) -> dict[str, Any]:
    """Return the engine API's view of both Channels: sizes and pending values and IDs."""
    listed = await client.get(f"/api/v1/flows/{flow_id}/channels")
    assert listed.status_code == 200, listed.text
    view: dict[str, Any] = {"sizes": {c["name"]: c["size"] for c in listed.json()["channels"]}}
    for name in (QUEUED, PRIORITIZED):
        page = await client.get(f"/api/v1/flows/{flow_id}/channels/{name}/messages")
        assert page.status_code == 200, page.text
        view[name] = [(m["messageId"], m["value"]) for m in page.json()["messages"]]
    return view


def pending(queue_info: Any) -> list[tuple[str, str]]:
    return [(m["messageId"], m["value"]) for m in queue_info["messages"]]


async def history_types(client: httpx.AsyncClient, flow_id: str) -> list[str]:
    response = await client.get(f"/api/v1/flows/{flow_id}/history")
    assert response.status_code == 200, response.text
    return [e["eventType"] for e in response.json()["events"]]


async def test_queued_messages_stay_pending_in_fifo_order_with_increasing_ids(
    make_app: Any,
) -> None:
    flow_id = "channel-fifo"
    async with make_app() as served:
        client = served.client
        started = await start(client, flow_id)
        again = await client.post(f"{BASE}/start", params={"flowId": flow_id})
        empty = await queues(client, flow_id)
        first = [await queue(client, flow_id, value) for value in ("a", "b", "c")]
        # Concurrent callers too: the queue's order is the order the engine accepted them in.
        rest = await asyncio.gather(*(queue(client, flow_id, f"m{n}") for n in range(8)))
        default = await client.post(f"{BASE}/queue", params={"flowId": flow_id})
        await settle(served.engine)
        seen = await queues(client, flow_id)
        view = await engine_view(client, flow_id)
        nothing_handled = await handled(client, flow_id)
    run_id = started.json()["runId"]
    assert again.status_code == 200
    assert again.json() == {"flowId": flow_id, "runId": run_id, "started": False}
    assert empty == {
        "flowId": flow_id,
        "runId": run_id,
        "queued": {"size": 0, "messages": []},
        "prioritized": {"size": 0, "messages": []},
    }
    assert default.status_code == 201 and default.json()["value"] == "hello"
    listed = pending(seen["queued"])
    assert seen["queued"]["size"] == len(listed) == 12
    ids = [message_id for message_id, _ in listed]
    # FIFO: sequential publications keep their order, and IDs increase along the queue.
    assert listed[:3] == list(zip(first, "abc", strict=True))
    assert sorted(ids[3:11]) == sorted(rest) and listed[-1][0] == default.json()["messageId"]
    assert ids == sorted(ids) and len(set(ids)) == 12
    assert all(m["publishedAt"] for m in seen["queued"]["messages"])
    # Nothing waits on queued-messages: the Step left every message pending.
    assert seen["prioritized"] == {"size": 0, "messages": []}
    assert view == {"sizes": {QUEUED: 12, PRIORITIZED: 0}, QUEUED: listed, PRIORITIZED: []}
    assert nothing_handled == []


async def test_a_moved_message_is_consumed_by_the_step_and_the_others_stay_queued(
    make_app: Any,
) -> None:
    flow_id = "channel-move"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id)
        a, b, c = [await queue(client, flow_id, value) for value in ("a", "b", "c")]
        moved = await move(client, flow_id, b)
        # The move committed; HandlePrioritizedMessage consumes it in its own commit.
        await settle(served.engine)
        after_one = await queues(client, flow_id)
        handled_one = await handled(client, flow_id)
        # Upper case is the same UUID; the route normalizes it.
        moved_again = await move(client, flow_id, c.upper())
        await settle(served.engine)
        after_two = await queues(client, flow_id)
        handled_two = await handled(client, flow_id)
        view = await engine_view(client, flow_id)
        events = await history_types(client, flow_id)
        info = await client.get(f"/api/v1/flows/{flow_id}")
    assert moved.status_code == 200 and moved.json() == {"messageId": b}
    assert pending(after_one["queued"]) == [(a, "a"), (c, "c")]
    assert after_one["queued"]["size"] == 2
    assert after_one["prioritized"] == {"size": 0, "messages": []}
    assert handled_one == ["b"]
    assert moved_again.status_code == 200 and moved_again.json() == {"messageId": c}
    assert pending(after_two["queued"]) == [(a, "a")]
    assert handled_two == ["b", "c"]
    assert view == {"sizes": {QUEUED: 1, PRIORITIZED: 0}, QUEUED: [(a, "a")], PRIORITIZED: []}
    # Each move deleted, published and committed; the Step consumed and went back to waiting.
    assert events.count("RPC_COMMITTED") == 2
    assert events.count("CHANNEL_MESSAGE_DELETED") == 2
    assert events.count("CHANNEL_CONSUMED") == 2
    assert events[-1] == "STEP_WAITING"
    assert info.json()["status"] == "RUNNING"


async def test_a_message_a_concurrent_consumer_deleted_first_is_404_and_nothing_changes(
    make_app: Any,
) -> None:
    flow_id = "channel-taken"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id)
        taken = await queue(client, flow_id, "taken")
        kept = await queue(client, flow_id, "kept")
        deleted = await client.delete(f"/api/v1/flows/{flow_id}/channels/{QUEUED}/messages/{taken}")
        await settle(served.engine)
        before = await queues(client, flow_id)
        events_before = await history_types(client, flow_id)
        refused = await move(client, flow_id, taken)
        never_queued = await move(client, flow_id, "01234567-89ab-7cde-8f01-23456789abcd")
        await settle(served.engine)
        after = await queues(client, flow_id)
        events_after = await history_types(client, flow_id)
        nothing_handled = await handled(client, flow_id)
    assert deleted.status_code == 204
    assert pending(before["queued"]) == [(kept, "kept")]
    problem = assert_problem(refused, 404, "CHANNEL_MESSAGE_NOT_FOUND", field="messageId")
    assert taken in problem["detail"] and problem["flowId"] == flow_id
    assert_problem(never_queued, 404, "CHANNEL_MESSAGE_NOT_FOUND", field="messageId")
    # The transactional RPCs committed nothing: same queues, no new history, nothing handled.
    assert after == before
    assert events_after == events_before
    assert nothing_handled == []


async def test_a_message_deleted_while_the_move_runs_commits_neither_effect(
    make_app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The move reads the message from its snapshot, and a concurrent consumer deletes it
    # before the move commits: the RPC has staged both the deletion and the publication, and
    # the commit's deletion check must refuse both.
    flow_id = "channel-race"
    channel = ChannelFlow.queued_messages
    original = channel.find_pending_message
    found: list[ChannelMessage[str] | None] = []
    entered, release = threading.Event(), threading.Event()

    def gated(context: Context, message_id: str) -> ChannelMessage[str] | None:
        found.append(original(context, message_id))
        entered.set()
        assert release.wait(10), "the test never released the move"
        return found[-1]

    async with make_app() as served:
        client = served.client
        await start(client, flow_id)
        contested = await queue(client, flow_id, "contested")
        monkeypatch.setattr(channel, "find_pending_message", gated)
        moving = asyncio.create_task(move(client, flow_id, contested))
        try:
            assert await asyncio.to_thread(entered.wait, 10), "the move never ran"
            deleted = await client.delete(
                f"/api/v1/flows/{flow_id}/channels/{QUEUED}/messages/{contested}"
            )
        finally:
            release.set()
        refused = await moving
        monkeypatch.undo()
        await settle(served.engine)
        after = await queues(client, flow_id)
        events = await history_types(client, flow_id)
        nothing_handled = await handled(client, flow_id)
    assert [m.value if m else None for m in found] == ["contested"]
    assert deleted.status_code == 204
    assert_problem(refused, 404, "CHANNEL_MESSAGE_NOT_FOUND", field="messageId")
    assert after["queued"] == {"size": 0, "messages": []}
    assert after["prioritized"] == {"size": 0, "messages": []}
    assert nothing_handled == []
    # The only deletion is the concurrent consumer's; nothing was published to prioritized.
    assert events.count("CHANNEL_MESSAGE_DELETED") == 1
    assert events.count("CHANNEL_PUBLISHED") == 1  # the queued message itself
    assert "RPC_COMMITTED" not in events and "CHANNEL_CONSUMED" not in events


async def test_a_closed_flow_still_lists_its_queues_but_refuses_queue_and_move(
    make_client: Any,
) -> None:
    flow_id = "channel-closed"
    async with make_client() as client:
        await start(client, flow_id)
        left = await queue(client, flow_id, "left behind")
        stopped = await client.post(f"/api/v1/flows/{flow_id}/stop", json={"type": "CANCEL"})
        late_queue = await client.post(f"{BASE}/queue", params={"flowId": flow_id})
        late_move = await move(client, flow_id, left)
        seen = await queues(client, flow_id)
        read = await handled(client, flow_id)
    assert stopped.status_code == 202
    for late in (late_queue, late_move):
        assert_problem(late, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    # peek_queues takes no lock and commits nothing, so it reads the closed run.
    assert pending(seen["queued"]) == [(left, "left behind")]
    assert read == []


async def test_unknown_flows_other_flow_types_and_bad_bodies_answer_with_their_codes(
    make_client: Any,
) -> None:
    valid_id = "01234567-89ab-7cde-8f01-23456789abcd"
    async with make_client() as client:
        missing = "channel-missing"
        queue_missing = await client.post(f"{BASE}/queue", params={"flowId": missing})
        move_missing = await move(client, missing, valid_id)
        queues_missing = await client.get(f"{BASE}/queues", params={"flowId": missing})
        handled_missing = await client.get(f"{BASE}/handled", params={"flowId": missing})
        await client.post("/primitives/rpc/start", params={"flowId": "not-a-channel-flow"})
        other = {"flowId": "not-a-channel-flow"}
        queue_other = await client.post(f"{BASE}/queue", params=other)
        move_other = await move(client, "not-a-channel-flow", valid_id)
        queues_other = await client.get(f"{BASE}/queues", params=other)
        handled_other = await client.get(f"{BASE}/handled", params=other)
        await start(client, "channel-bad-input")
        malformed = await move(client, "channel-bad-input", "not-a-message-id")
        no_id = await client.post(f"{BASE}/move", params={"flowId": "channel-bad-input"}, json={})
        extra = await client.post(
            f"{BASE}/move",
            params={"flowId": "channel-bad-input"},
            json={"messageId": valid_id, "value": "x"},
        )
        blank = await client.post(
            f"{BASE}/queue", params={"flowId": "channel-bad-input"}, json={"value": ""}
        )
        empty_flow_id = await client.get(f"{BASE}/queues", params={"flowId": ""})
        direct_malformed = await client.delete(
            f"/api/v1/flows/channel-bad-input/channels/{QUEUED}/messages/not-a-message-id"
        )
    for response in (queue_missing, move_missing, queues_missing, move_other, queues_other):
        assert_problem(response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert_problem(handled_missing, 404, "FLOW_NOT_FOUND")
    assert_problem(queue_other, 400, "INVALID_ARGUMENT", field="channel")
    assert_problem(handled_other, 400, "INVALID_ARGUMENT", field="name")
    for response, location in (
        (malformed, "body.messageId"),
        (no_id, "body.messageId"),
        (extra, "body.value"),
        (blank, "body.value"),
        (empty_flow_id, "query.flowId"),
    ):
        body = assert_problem(response, 422, "VALIDATION_ERROR")
        assert [e["location"] for e in body["errors"]] == [location], body
    assert_problem(direct_malformed, 400, "INVALID_ARGUMENT", field="messageId")
