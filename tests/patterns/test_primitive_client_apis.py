"""The client APIs primitive over HTTP: GetAttributes, SearchFlows scoped to the Flow type with
a parenthesized caller filter, and WaitForAttributeMatch answering right after an RPC."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from engine.testing import waiting_calls
from tests.conftest import ServedApp
from tests.support.waiting import eventually, once_step_locks_released, until_step_waiting

BASE = "/primitives/client-apis"


async def start(client: httpx.AsyncClient, flow_id: str) -> httpx.Response:
    response = await client.post(f"{BASE}/start", params={"flowId": flow_id})
    assert response.status_code == 201, response.text
    return response


async def set_stage(client: httpx.AsyncClient, flow_id: str, stage: str) -> httpx.Response:
    return await client.post(f"{BASE}/set-stage", params={"flowId": flow_id}, json={"stage": stage})


async def search(client: httpx.AsyncClient, **params: Any) -> httpx.Response:
    return await client.get(f"{BASE}/search", params=params)


def ids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {f["flowId"] for f in response.json()["flows"]}


async def engine_search(client: httpx.AsyncClient, query: str) -> set[str]:
    return ids(await client.get("/api/v1/flows", params={"query": query}))


def pending_matches(served: ServedApp) -> int:
    """Return how many WaitForAttributeMatch calls are registered and not answered yet."""
    return waiting_calls(served.engine).attribute_matches


async def wait_for(
    client: httpx.AsyncClient, flow_id: str, stage: str, seconds: float
) -> httpx.Response:
    return await client.post(
        f"{BASE}/wait-for-stage",
        params={"flowId": flow_id},
        json={"stage": stage, "waitSeconds": seconds},
    )


async def test_get_attributes_reads_the_stage_the_rpc_committed(make_client: Any) -> None:
    flow_id = "ship-read"
    async with make_client() as client:
        started = await start(client, flow_id)
        created = await client.get(f"{BASE}/attributes", params={"flowId": flow_id})
        moved = await set_stage(client, flow_id, "packed")
        packed = await client.get(f"{BASE}/attributes", params={"flowId": flow_id})
        missing = await client.get(f"{BASE}/attributes", params={"flowId": "ship-missing"})
        blank = await set_stage(client, flow_id, "")
    run_id = started.json()["runId"]
    assert created.json() == {"flowId": flow_id, "runId": run_id, "stage": "created"}
    assert moved.status_code == 200 and moved.json() == {"previous": "created", "stage": "packed"}
    assert packed.json() == {"flowId": flow_id, "runId": run_id, "stage": "packed"}
    assert (missing.status_code, missing.json()["code"]) == (404, "FLOW_NOT_FOUND")
    assert (blank.status_code, blank.json()["code"]) == (422, "VALIDATION_ERROR")


async def test_search_is_scoped_to_shipments_even_when_the_filter_tries_to_widen_it(
    make_client: Any,
) -> None:
    async with make_client() as client:
        for flow_id in ("ship-a", "ship-b", "ship-c"):
            await start(client, flow_id)
        await set_stage(client, "ship-a", "shipped")
        await set_stage(client, "ship-b", "shipped")
        # An AttributeFlow uses the same keyword1 slot for its status.
        await client.post(
            "/primitives/attribute/start",
            params={"flowId": "attr-shipped"},
            json={"waitSeconds": 30},
        )
        await until_step_waiting(client, "attr-shipped")
        updated = await once_step_locks_released(
            lambda: client.post(
                "/primitives/attribute/update-status",
                params={"flowId": "attr-shipped"},
                json={"status": "shipped"},
            )
        )
        assert updated.status_code == 200, updated.text
        default = await search(client)
        unscoped = await engine_search(client, "keyword1 = 'shipped'")
        either = await search(client, filter="keyword1 = 'created' OR keyword1 = 'shipped'")
        escape = "keyword1 = 'none') OR (keyword1 = 'shipped'"
        widened = await search(client, filter=escape)
        escape_as_text = await engine_search(client, f"FlowType = 'ShipmentFlow' AND ({escape})")
        everything = await search(client, filter="")
    assert default.status_code == 200
    body = default.json()
    assert body["query"] == "FlowType = 'ShipmentFlow' AND (keyword1 = 'shipped')"
    # Newest first, each with its stage read from the keyword1 index.
    assert [(f["flowId"], f["stage"], f["status"]) for f in body["flows"]] == [
        ("ship-b", "shipped", "RUNNING"),
        ("ship-a", "shipped", "RUNNING"),
    ]
    assert body["nextPageToken"] == ""
    # Why the scope matters: keyword1 = 'shipped' alone also finds the AttributeFlow.
    assert unscoped == {"ship-a", "ship-b", "attr-shipped"}
    # The parentheses keep the caller's OR inside the scope.
    assert ids(either) == {"ship-a", "ship-b", "ship-c"}
    # Unbalanced parentheses turn the text scope into (scope AND x) OR y, which a plain text
    # query would obey; the route also passes the Flow type, applied after parsing.
    assert escape_as_text == {"ship-a", "ship-b", "attr-shipped"}
    assert ids(widened) == {"ship-a", "ship-b"}
    assert widened.json()["query"] == f"FlowType = 'ShipmentFlow' AND ({escape})"
    assert everything.json()["query"] == "FlowType = 'ShipmentFlow'"
    assert ids(everything) == {"ship-a", "ship-b", "ship-c"}


async def test_search_pages_with_the_same_filter_and_rejects_bad_queries_and_tokens(
    make_client: Any,
) -> None:
    async with make_client() as client:
        for flow_id in ("ship-p1", "ship-p2", "ship-p3"):
            await start(client, flow_id)
        first = await search(client, filter="", pageSize=2)
        token = first.json()["nextPageToken"]
        second = await search(client, filter="", pageSize=2, pageToken=token)
        other_filter = await search(client, filter="keyword1 = 'created'", pageToken=token)
        broken = await search(client, filter="keyword1 =")
        unknown = await search(client, filter="colour = 'blue'")
        too_big = await search(client, pageSize=1001)
    assert [f["flowId"] for f in first.json()["flows"]] == ["ship-p3", "ship-p2"]
    assert token != ""
    assert [f["flowId"] for f in second.json()["flows"]] == ["ship-p1"]
    assert second.json()["nextPageToken"] == ""
    assert (other_filter.status_code, other_filter.json()["code"]) == (400, "INVALID_PAGE_TOKEN")
    assert (broken.status_code, broken.json()["code"]) == (400, "INVALID_QUERY")
    assert (unknown.status_code, unknown.json()["code"]) == (400, "INVALID_QUERY")
    assert (too_big.status_code, too_big.json()["code"]) == (400, "INVALID_ARGUMENT")


async def test_wait_for_attribute_match_answers_soon_after_the_rpc_commits(
    make_app: Any,
) -> None:
    flow_id = "ship-wait"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id)
        waiting = asyncio.create_task(wait_for(client, flow_id, "delivered", 10))
        await eventually(
            lambda: pending_matches(served) == 1 or waiting.done(), what="the wait to register"
        )
        assert not waiting.done(), "the stage is still 'created': the wait must be pending"
        # Registered before the write, it can only answer 'delivered' by being woken by it.
        moved = await set_stage(client, flow_id, "delivered")
        committed_at = time.monotonic()
        matched = await asyncio.wait_for(waiting, 5)
        answered_after = time.monotonic() - committed_at
        already = await wait_for(client, flow_id, "delivered", 0)
        began = time.monotonic()
        expired = await wait_for(client, flow_id, "lost", 0.2)
        waited = time.monotonic() - began
        missing = await wait_for(client, "ship-missing", "delivered", 0)
        too_long = await wait_for(client, flow_id, "delivered", 61)
    assert moved.json() == {"previous": "created", "stage": "delivered"}
    assert matched.status_code == 200
    assert matched.json() == {"matched": True, "stage": "delivered"}
    assert answered_after < 1.0
    assert already.json() == {"matched": True, "stage": "delivered"}
    assert expired.json() == {"matched": False, "stage": None}
    assert waited >= 0.2
    assert (missing.status_code, missing.json()["code"]) == (404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert (too_long.status_code, too_long.json()["code"]) == (422, "VALIDATION_ERROR")
