"""SubFlows over HTTP: parent fields in describeFlow and searchFlows, the history events, and
the Request-ID rule across a SIGKILL (the parent keeps its child run; the child has one run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from engine import Registry
from engine.testing import settle
from tests.server import ServerProcess
from tests.support.problems import assert_problem
from tests.support.subflow_app import flows
from tests.support.waiting import eventually

FACTORY = "tests.support.subflow_app:create"


async def start_parent(client: httpx.AsyncClient, flow_id: str, **input: Any) -> str:
    response = await client.post(
        "/api/v1/flows", json={"flowType": "ParentFlow", "flowId": flow_id, "input": input}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


async def search(client: httpx.AsyncClient, query: str) -> list[dict[str, Any]]:
    response = await client.get("/api/v1/flows", params={"query": query, "pageSize": 1000})
    assert response.status_code == 200, response.text
    assert response.json()["nextPageToken"] == ""
    return list(response.json()["flows"])


async def history(client: httpx.AsyncClient, flow_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/flows/{flow_id}/history", params={"pageSize": 1000})
    assert response.status_code == 200, response.text
    return list(response.json()["events"])


async def release(client: httpx.AsyncClient, child: str) -> None:
    response = await client.post(
        f"/api/v1/flows/{child}/channels/release/messages", json={"value": "go"}
    )
    assert response.status_code == 201, response.text


async def test_describe_search_and_history_name_parents_and_children(make_app: Any) -> None:
    async with make_app(Registry(flows())) as served:
        client = served.client
        parent_run = await start_parent(client, "order-7", children=2)
        await settle(served.engine)
        child = (await client.get("/api/v1/flows/SubFlow:order-7-FanOut-1-1")).json()
        assert child["parentFlowId"] == "order-7" and child["parentRunId"] == parent_run
        assert child["flowType"] == "ChildFlow" and child["status"] == "COMPLETED"
        parent = (await client.get("/api/v1/flows/order-7")).json()
        assert (parent["parentFlowId"], parent["parentRunId"]) == (None, None)
        children = await search(client, "ParentFlowId = 'order-7' ORDER BY FlowId ASC")
        assert [c["flowId"] for c in children] == [
            "SubFlow:order-7-FanOut-1-0",
            "SubFlow:order-7-FanOut-1-1",
        ]
        assert {c["parentRunId"] for c in children} == {parent_run}
        assert [f["flowId"] for f in await search(client, "ParentFlowId IS NULL")] == ["order-7"]
        # Ordered by ParentFlowId, runs without a parent come first.
        ordered = await search(client, "ORDER BY ParentFlowId ASC, FlowId ASC")
        assert [f["flowId"] for f in ordered][0] == "order-7"
        events = await history(client, "order-7")
        kinds = [e["eventType"] for e in events]
        assert kinds.count("SUBFLOW_STARTED") == 2 and kinds.count("SUBFLOW_CLOSED") == 2
        first = next(e for e in events if e["eventType"] == "SUBFLOW_STARTED")
        assert first["details"] == {
            "stepType": "FanOut",
            "stepExecutionId": "FanOut-1",
            "index": 0,
            "flowType": "ChildFlow",
            "flowId": "SubFlow:order-7-FanOut-1-0",
            "runId": children[0]["runId"],
        }
        result = (await client.get("/api/v1/flows/order-7/result")).json()
        assert [c["stepExecutionId"] for c in result["completions"]] == ["FanOut-1"]
        assert [s["status"] for s in result["completions"][0]["output"]] == ["COMPLETED"] * 2
        problem = assert_problem(
            await client.get("/api/v1/flows", params={"query": "ParentFlowId = 1"}),
            400,
            "INVALID_QUERY",
        )
        assert "ParentFlowId compares with" in problem["detail"]


PARENTS = 6


async def test_sigkill_while_parents_wait_on_children_keeps_each_child_run(tmp_path: Path) -> None:
    # ALWAYS_RESTART is the policy that would start a second child run if the restarted
    # server started the SubFlows again: it must not, since they started in the commit that
    # began each parent's wait (and a retried start carries the same Request ID).
    server = ServerProcess(tmp_path, factory=FACTORY)
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            for n in range(PARENTS):
                await start_parent(
                    client, f"crash-{n}", children=2, outcome="hold", policy="ALWAYS_RESTART"
                )

            async def children_running() -> list[dict[str, Any]]:
                found = await search(client, "ParentFlowId STARTS_WITH 'crash-'")
                assert len(found) == 2 * PARENTS and {f["status"] for f in found} == {"RUNNING"}
                return found

            before = {c["flowId"]: c["runId"] for c in await eventually(children_running)}
            # Child 0 of each parent closes before the kill; the kill may land before its
            # parent's wait saw it.
            for n in range(PARENTS):
                await release(client, f"SubFlow:crash-{n}-FanOut-1-0")

            async def first_children_closed() -> bool:
                done = await search(
                    client, "ParentFlowId STARTS_WITH 'crash-' AND Status = 'COMPLETED'"
                )
                return len(done) == PARENTS

            await eventually(first_children_closed)
            server.kill()
    finally:
        server.kill()

    restarted = ServerProcess(tmp_path, factory=FACTORY)
    restarted.start()
    try:
        async with httpx.AsyncClient(base_url=restarted.url, timeout=30) as client:
            for n in range(PARENTS):
                await release(client, f"SubFlow:crash-{n}-FanOut-1-1")
            for n in range(PARENTS):
                response = await client.get(
                    f"/api/v1/flows/crash-{n}/result", params={"waitSeconds": 20}
                )
                result = response.json()
                assert result["status"] == "COMPLETED", result
                seen = result["completions"][0]["output"]
                assert [(s["flowId"], s["runId"], s["status"]) for s in seen] == [
                    (
                        f"SubFlow:crash-{n}-FanOut-1-{i}",
                        before[f"SubFlow:crash-{n}-FanOut-1-{i}"],
                        "COMPLETED",
                    )
                    for i in range(2)
                ]
                kinds = [e["eventType"] for e in await history(client, f"crash-{n}")]
                assert kinds.count("SUBFLOW_STARTED") == 2 and "SUBFLOW_ATTACHED" not in kinds
                assert kinds.count("SUBFLOW_CLOSED") == 2
            for child, run_id in before.items():
                runs = await search(client, f"FlowId = '{child}'")
                assert [(r["runId"], r["status"]) for r in runs] == [(run_id, "COMPLETED")]
    finally:
        restarted.stop()
