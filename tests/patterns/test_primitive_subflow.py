"""The SubFlow primitive over HTTP: a FanOutFlow parent starts N SquareFlow children in the commit
that begins its all_of wait, completes with their squares in index order (a child asked to fail
is read as FAILED, not hidden), lists its children through SearchFlows on ParentRunId, meets
fresh children on every run, and refuses bad input naming the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from engine.testing import settle
from patterns.primitives.subflow.flow import child_flow_id
from tests.support.backends import backend_independent
from tests.support.problems import assert_problem

#: Request validation answers before the database is read: the same on every backend.
REFUSED_EARLY = backend_independent("the request is refused before the database is read")

BASE = "/primitives/subflow"


async def start(client: httpx.AsyncClient, flow_id: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"{BASE}/start", params={"flowId": flow_id}, json=body)
    assert response.status_code == 201, response.text
    started: dict[str, Any] = response.json()
    assert started["flowId"] == flow_id and started["started"] is True
    return started


async def get(client: httpx.AsyncClient, route: str, flow_id: str) -> dict[str, Any]:
    response = await client.get(f"{BASE}/{route}", params={"flowId": flow_id})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def search(client: httpx.AsyncClient, query: str) -> list[dict[str, Any]]:
    response = await client.get("/api/v1/flows", params={"query": query, "pageSize": 1000})
    assert response.status_code == 200, response.text
    flows: list[dict[str, Any]] = response.json()["flows"]
    return flows


async def history_types(client: httpx.AsyncClient, flow_id: str) -> list[str]:
    response = await client.get(f"/api/v1/flows/{flow_id}/history", params={"pageSize": 1000})
    assert response.status_code == 200, response.text
    return [e["eventType"] for e in response.json()["events"]]


def squares(count: int, *, failed: int | None = None) -> list[int | None]:
    """The squares a parent of ``count`` children completes with: child i squares i + 1."""
    return [None if i == failed else (i + 1) ** 2 for i in range(count)]


async def test_a_parent_completes_with_its_childrens_squares_in_index_order(
    make_app: Any,
) -> None:
    flow_id = "subflow-fan-out"
    async with make_app() as served:
        client = served.client
        started = await start(client, flow_id, children=5)
        await settle(served.engine)
        result = await get(client, "result", flow_id)
        listed = await get(client, "children", flow_id)
        child = await client.get(f"/api/v1/flows/{child_flow_id(flow_id, 3)}")
        attributes = await client.get(f"/api/v1/flows/{child_flow_id(flow_id, 3)}/attributes")
        parent_attributes = await client.get(f"/api/v1/flows/{flow_id}/attributes")
        events = await history_types(client, flow_id)
    run_id = started["runId"]
    assert (result["flowId"], result["runId"], result["status"]) == (flow_id, run_id, "COMPLETED")
    assert (result["errorType"], result["errorMessage"]) == (None, None)
    output = result["output"]
    assert output["squares"] == [1, 4, 9, 16, 25] == squares(5)
    assert (output["total"], output["failed"]) == (55, 0)
    ids = [child_flow_id(flow_id, i) for i in range(5)]
    assert ids[0] == "SubFlow:subflow-fan-out-FanOut-1-0"
    assert [c["index"] for c in output["children"]] == list(range(5))
    assert [c["flowId"] for c in output["children"]] == ids
    assert [c["square"] for c in output["children"]] == squares(5)
    assert {c["status"] for c in output["children"]} == {"COMPLETED"}
    assert {(c["errorType"], c["errorMessage"]) for c in output["children"]} == {(None, None)}

    # The children route finds the same runs through SearchFlows on ParentRunId.
    assert (listed["flowId"], listed["runId"]) == (flow_id, run_id)
    assert listed["query"] == f"ParentRunId = '{run_id}'"
    assert [c["flowId"] for c in listed["children"]] == ids
    assert [c["runId"] for c in listed["children"]] == [c["runId"] for c in output["children"]]
    assert [c["output"] for c in listed["children"]] == [
        {"index": i, "number": i + 1, "square": (i + 1) ** 2} for i in range(5)
    ]
    for i, entry in enumerate(listed["children"]):
        assert entry["index"] == i
        assert (entry["flowType"], entry["status"]) == ("SquareFlow", "COMPLETED")
        assert (entry["parentFlowId"], entry["parentRunId"]) == (flow_id, run_id)
        assert (entry["errorType"], entry["errorMessage"]) == (None, None)

    # Each child names its parent, and keeps its square in its own Attribute.
    assert child.status_code == 200, child.text
    assert (child.json()["parentFlowId"], child.json()["parentRunId"]) == (flow_id, run_id)
    assert attributes.json()["values"] == {"primitive-subflow-square": 16}
    assert parent_attributes.json()["values"] == {"primitive-subflow-status": "completed"}
    assert events.count("SUBFLOW_STARTED") == 5 and events.count("SUBFLOW_CLOSED") == 5
    assert "SUBFLOW_ATTACHED" not in events


async def test_fifty_children_the_most_a_start_may_ask_for_all_complete(make_app: Any) -> None:
    flow_id = "subflow-fifty"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id, children=50)
        await settle(served.engine)
        result = await get(client, "result", flow_id)
        listed = await get(client, "children", flow_id)
    assert result["status"] == "COMPLETED"
    assert result["output"]["squares"] == squares(50)
    assert [c["index"] for c in listed["children"]] == list(range(50))
    assert [c["output"]["square"] for c in listed["children"]] == squares(50)


async def test_a_failed_child_is_read_as_failed_and_the_parent_still_completes(
    make_app: Any,
) -> None:
    flow_id = "subflow-fail"
    async with make_app() as served:
        client = served.client
        started = await start(client, flow_id, children=4, failIndex=2)
        await settle(served.engine)
        result = await get(client, "result", flow_id)
        listed = await get(client, "children", flow_id)
        failed = await client.get(f"/api/v1/flows/{child_flow_id(flow_id, 2)}/result")
    assert result["status"] == "COMPLETED" and result["runId"] == started["runId"]
    output = result["output"]
    assert output["squares"] == [1, 4, None, 16] == squares(4, failed=2)
    assert (output["total"], output["failed"]) == (21, 1)
    outcome = output["children"][2]
    assert (outcome["status"], outcome["square"]) == ("FAILED", None)
    assert outcome["errorType"] == "SquareRefused"
    assert outcome["errorMessage"] == "child 2 was asked to fail"
    assert [c["status"] for c in output["children"]] == ["COMPLETED"] * 2 + ["FAILED", "COMPLETED"]
    entry = listed["children"][2]
    assert (entry["status"], entry["output"], entry["errorType"]) == (
        "FAILED",
        None,
        "SquareRefused",
    )
    assert [c["status"] for c in listed["children"]] == [c["status"] for c in output["children"]]
    assert failed.json()["status"] == "FAILED" and failed.json()["completions"] == []


async def test_every_parent_run_gets_fresh_children_and_lists_only_its_own(
    make_app: Any,
) -> None:
    # A new run of the parent's Flow ID enters FanOut-1 again and so meets the same child Flow
    # IDs. ALWAYS_RESTART starts them again: a child that completed for the first run fails
    # for the second when its input says so, instead of handing back the earlier square.
    flow_id = "subflow-again"
    async with make_app() as served:
        client = served.client
        first = await start(client, flow_id, children=3)
        await settle(served.engine)
        first_result = await get(client, "result", flow_id)
        second = await start(client, flow_id, children=2, failIndex=1)
        await settle(served.engine)
        second_result = await get(client, "result", flow_id)
        listed = await get(client, "children", flow_id)
        every_child_run = await search(client, f"ParentFlowId = '{flow_id}'")
        child_one_runs = await search(client, f"FlowId = '{child_flow_id(flow_id, 1)}'")
    assert first["runId"] != second["runId"]
    assert first_result["output"]["squares"] == squares(3)
    assert second_result["runId"] == second["runId"]
    assert second_result["output"]["squares"] == [1, None]
    first_runs = {c["runId"] for c in first_result["output"]["children"]}
    second_runs = [c["runId"] for c in second_result["output"]["children"]]
    assert first_runs.isdisjoint(second_runs)
    # The children of the latest run only: two, not the first run's three.
    assert [c["runId"] for c in listed["children"]] == second_runs
    assert {c["parentRunId"] for c in listed["children"]} == {second["runId"]}
    assert [c["status"] for c in listed["children"]] == ["COMPLETED", "FAILED"]
    # SearchFlows itself returns every child run of the Flow ID, whichever parent run.
    assert len(every_child_run) == 5
    assert {c["parentRunId"] for c in every_child_run} == {first["runId"], second["runId"]}
    assert sorted(r["status"] for r in child_one_runs) == ["COMPLETED", "FAILED"]


async def test_the_defaults_start_three_children_under_the_default_flow_id(
    make_app: Any,
) -> None:
    async with make_app() as served:
        client = served.client
        response = await client.post(f"{BASE}/start")
        await settle(served.engine)
        result = await client.get(f"{BASE}/result", params={"waitSeconds": 5})
        listed = await client.get(f"{BASE}/children")
    assert response.status_code == 201, response.text
    assert response.json()["flowId"] == "primitive-subflow"
    assert result.json()["flowId"] == "primitive-subflow"
    assert result.json()["output"]["squares"] == [1, 4, 9]
    assert [c["flowId"] for c in listed.json()["children"]] == [
        f"SubFlow:primitive-subflow-FanOut-1-{i}" for i in range(3)
    ]


@REFUSED_EARLY
@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({"children": 0}, "body.children"),
        ({"children": 51}, "body.children"),
        ({"children": "many"}, "body.children"),
        ({"children": 2.5}, "body.children"),
        ({"children": None}, "body.children"),
        ({"children": 3, "failIndex": 3}, "body.failIndex"),
        ({"failIndex": -1}, "body.failIndex"),
        ({"failIndex": 50}, "body.failIndex"),
        ({"failIndex": "first"}, "body.failIndex"),
        ({"children": 2, "extra": True}, "body.extra"),
    ],
)
async def test_a_bad_start_body_is_a_422_naming_the_field(
    make_client: Any, body: dict[str, Any], location: str
) -> None:
    async with make_client() as client:
        response = await client.post(f"{BASE}/start", params={"flowId": "subflow-bad"}, json=body)
        described = await client.get("/api/v1/flows/subflow-bad")
    problem = assert_problem(response, 422, "VALIDATION_ERROR")
    assert [e["location"] for e in problem["errors"]] == [location], problem
    assert problem["detail"].startswith(f"{location}: ")
    # Nothing started.
    assert_problem(described, 404, "FLOW_NOT_FOUND")


async def test_a_fail_index_beyond_the_children_says_which_indexes_exist(
    make_client: Any,
) -> None:
    async with make_client() as client:
        response = await client.post(f"{BASE}/start", json={"children": 3, "failIndex": 5})
    problem = assert_problem(response, 422, "VALIDATION_ERROR")
    assert "must name one of the 3 children: 0 to 2" in problem["detail"], problem


async def test_unknown_flows_other_flow_types_and_bad_queries_answer_with_their_codes(
    make_client: Any,
) -> None:
    async with make_client() as client:
        missing = {"flowId": "subflow-missing"}
        result_missing = await client.get(f"{BASE}/result", params=missing)
        children_missing = await client.get(f"{BASE}/children", params=missing)
        timer = await client.post("/primitives/timer/start", params={"flowId": "not-a-fan-out"})
        other = {"flowId": "not-a-fan-out"}
        result_other = await client.get(f"{BASE}/result", params=other)
        children_other = await client.get(f"{BASE}/children", params=other)
        empty_flow_id = await client.post(f"{BASE}/start", params={"flowId": ""})
        long_wait = await client.get(f"{BASE}/result", params={"waitSeconds": 61})
        negative_wait = await client.get(f"{BASE}/result", params={"waitSeconds": -1})
        not_an_object = await client.post(f"{BASE}/start", json=[3])
    assert timer.status_code == 201, timer.text
    for response in (result_missing, children_missing):
        assert_problem(response, 404, "FLOW_NOT_FOUND")
    for response in (result_other, children_other):
        problem = assert_problem(response, 404, "FLOW_NOT_FOUND")
        assert problem["detail"] == "Flow not-a-fan-out is a TimerFlow, not a FanOutFlow"
        assert problem["flowId"] == "not-a-fan-out"
    for response, location in (
        (empty_flow_id, "query.flowId"),
        (long_wait, "query.waitSeconds"),
        (negative_wait, "query.waitSeconds"),
        (not_an_object, "body"),
    ):
        problem = assert_problem(response, 422, "VALIDATION_ERROR")
        assert [e["location"] for e in problem["errors"]] == [location], problem


async def test_a_flow_id_with_quotes_is_searched_as_one_literal(make_app: Any) -> None:
    # The children route builds a SearchFlows query from the Flow ID: quotes and backslashes
    # in it must stay inside the string literal.
    flow_id = "it's a \\ fan-out"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id, children=2)
        await settle(served.engine)
        listed = await get(client, "children", flow_id)
    assert [c["flowId"] for c in listed["children"]] == [child_flow_id(flow_id, i) for i in (0, 1)]
    assert [c["output"]["square"] for c in listed["children"]] == [1, 4]
