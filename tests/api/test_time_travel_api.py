"""Time travel over HTTP: timeTravelFlow and timeTravelFlows as DESIGN §13 states them, and
getAttributes with asOfEventId; every bad input a precise Problem that changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine import Registry
from engine.testing import settle
from tests.support import travel_app
from tests.support.problems import assert_problem
from tests.support.travel_app import flows

FLOWS = "/api/v1/flows"


@pytest.fixture(autouse=True)
def _declining() -> Iterator[None]:
    travel_app.BEHAVIOUR["charge"] = "decline"
    yield
    travel_app.BEHAVIOUR["charge"] = "ok"


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def failed_order(client: httpx.AsyncClient, served: Any, flow_id: str) -> str:
    body = {"flowType": "OrderFlow", "flowId": flow_id, "input": "o-1"}
    run_id = (await ok(await client.post(FLOWS, json=body), 201))["runId"]
    await settle(served.engine)
    message = {"value": "p-1"}
    await ok(await client.post(f"{FLOWS}/{flow_id}/channels/payments/messages", json=message), 201)
    result = await ok(await client.get(f"{FLOWS}/{flow_id}/result", params={"waitSeconds": 10}))
    assert result["status"] == "FAILED"
    return str(run_id)


async def test_a_failed_flow_travels_back_before_its_step_and_completes(make_app: Any) -> None:
    async with make_app(Registry(flows())) as served:
        client = served.client
        old = await failed_order(client, served, "order")
        travel_app.BEHAVIOUR["charge"] = "ok"  # the fix
        body = {
            "runId": old,
            "to": {"kind": "STEP_EXECUTION", "stepExecutionId": "Charge-1", "method": "EXECUTE"},
            "reason": "card gateway fixed",
        }
        traveled = await ok(await client.post(f"{FLOWS}/order/time-travel", json=body), 201)
        assert traveled == {"flowId": "order", "runId": traveled["runId"], "previousRunId": old}
        result = await ok(await client.get(f"{FLOWS}/order/result", params={"waitSeconds": 10}))
        assert (result["runId"], result["status"]) == (traveled["runId"], "COMPLETED")
        assert result["completions"][0]["output"] == {"order": "o-1", "charged": "charged:p-1"}
        page = await ok(await client.get(f"{FLOWS}/order/history", params={"pageSize": 100}))
        event = next(e for e in page["events"] if e["eventType"] == "TIME_TRAVELED")
        assert event["details"] == {
            "previousRunId": old,
            "previousFlowId": "order",
            "to": {"kind": "STEP_EXECUTION", "stepExecutionId": "Charge-1", "method": "EXECUTE"},
            "reason": "card gateway fixed",
            "skipWritesReapply": False,
        }
        # The old run stays readable by its ID.
        info = await ok(await client.get(f"{FLOWS}/order", params={"runId": old}))
        assert info["status"] == "FAILED"


async def test_attributes_read_as_of_an_event(make_app: Any) -> None:
    async with make_app(Registry(flows())) as served:
        client = served.client
        old = await failed_order(client, served, "order")
        url = f"{FLOWS}/order/attributes"
        first = await ok(await client.get(url, params={"runId": old, "asOfEventId": 1}))
        assert first == {"flowId": "order", "runId": old, "values": {}}
        second = await ok(await client.get(url, params={"asOfEventId": 2, "name": "items/o-1"}))
        assert second["values"] == {"items/o-1": 1}
        last = await ok(await client.get(url, params={"asOfEventId": 7}))
        assert last["values"] == {"status": "declined"}
        assert_problem(
            await client.get(url, params={"asOfEventId": 8}),
            400,
            "INVALID_ARGUMENT",
            field="asOfEventId",
        )
        assert_problem(await client.get(url, params={"asOfEventId": 0}), 422, "VALIDATION_ERROR")
        assert_problem(
            await client.get(url, params={"asOfEventId": 1, "name": "no\u0000te"}),
            400,
            "INVALID_ARGUMENT",
            field="name",
        )
        assert_problem(
            await client.get(f"{FLOWS}/nope/attributes", params={"asOfEventId": 1}),
            404,
            "FLOW_NOT_FOUND",
        )


async def test_bad_travels_are_precise_problems_and_change_nothing(make_app: Any) -> None:
    async with make_app(Registry(flows())) as served:
        client = served.client
        old = await failed_order(client, served, "order")
        url = f"{FLOWS}/order/time-travel"
        cases = [
            ({"runId": old, "to": {"kind": "EVENT"}}, 400, "INVALID_ARGUMENT", "to.eventId"),
            (
                {"runId": old, "to": {"kind": "EVENT", "eventId": 42}},
                400,
                "INVALID_ARGUMENT",
                "to.eventId",
            ),
            (
                {"runId": old, "to": {"kind": "STEP_TYPE", "stepType": "Refund"}},
                400,
                "INVALID_ARGUMENT",
                "to.stepType",
            ),
            (
                {"runId": old, "to": {"kind": "TIME", "at": "2001-01-01T00:00:00Z"}},
                400,
                "INVALID_ARGUMENT",
                "to.at",
            ),
            (
                {"runId": old, "to": {"kind": "TIME", "at": "2030-01-01T00:00:00"}},
                400,
                "INVALID_ARGUMENT",
                "to.at",
            ),
            (
                {"runId": old, "to": {"kind": "BEGINNING"}, "forkToFlowId": "order"},
                400,
                "INVALID_ARGUMENT",
                "forkToFlowId",
            ),
            (
                {"runId": old, "to": {"kind": "STEP_EXECUTION", "stepExecutionId": "C\u0000-1"}},
                400,
                "INVALID_ARGUMENT",
                "to.stepExecutionId",
            ),
            (
                {"runId": old, "to": {"kind": "BEGINNING"}, "reason": "nul \u0000 here"},
                400,
                "INVALID_ARGUMENT",
                "reason",
            ),
            (
                {"runId": old, "to": {"kind": "EVENT", "eventId": 2**63}},
                422,
                "VALIDATION_ERROR",
                None,
            ),
            ({"runId": "other", "to": {"kind": "BEGINNING"}}, 404, "FLOW_NOT_FOUND", None),
            ({"to": {"kind": "BEGINNING"}}, 422, "VALIDATION_ERROR", None),
            ({"runId": old, "to": {"kind": "SOMEWHERE"}}, 422, "VALIDATION_ERROR", None),
            ({"runId": old, "to": {"kind": "BEGINNING"}, "typo": 1}, 422, "VALIDATION_ERROR", None),
        ]
        for body, status, code, field in cases:
            assert_problem(await client.post(url, json=body), status, code, field=field)
        missing = {"runId": old, "to": {"kind": "BEGINNING"}}
        assert_problem(
            await client.post(f"{FLOWS}/missing/time-travel", json=missing), 404, "FLOW_NOT_FOUND"
        )
        # Nothing moved: one run, FAILED.
        runs = await ok(await client.get(FLOWS, params={"query": "FlowId = 'order'"}))
        assert [(f["runId"], f["status"]) for f in runs["flows"]] == [(old, "FAILED")]
        # A travel, then the old run is not the latest: 409; a fork onto a running Flow: 409.
        new = await ok(await client.post(url, json=missing), 201)
        assert_problem(
            await client.post(url, json=missing), 409, "FAILED_PRECONDITION", field="runId"
        )
        fork = {"runId": new["runId"], "to": {"kind": "BEGINNING"}, "forkToFlowId": "order"}
        fork["forkToFlowId"] = "busy"
        await ok(
            await client.post(
                FLOWS, json={"flowType": "OrderFlow", "flowId": "busy", "input": "o-2"}
            ),
            201,
        )
        assert_problem(await client.post(url, json=fork), 409, "FLOW_ALREADY_STARTED")


async def test_a_travel_by_query_lists_matched_traveled_and_failed(make_app: Any) -> None:
    async with make_app(Registry(flows())) as served:
        client = served.client
        old = await failed_order(client, served, "order")
        refund = {"flowType": "RefundFlow", "flowId": "refund", "input": "r"}
        await ok(await client.post(FLOWS, json=refund), 201)
        await settle(served.engine)
        body = {
            "query": "Status = 'FAILED' OR FlowType = 'RefundFlow'",
            "to": {"kind": "STEP_TYPE", "stepType": "Charge"},
            "dryRun": True,
        }
        dry = await ok(await client.post("/api/v1/time-travel", json=body))
        matched = sorted(dry["matched"], key=lambda m: m["flowId"])
        assert dry["dryRun"] is True and (dry["traveled"], dry["failed"]) == ([], [])
        assert [m["flowId"] for m in matched] == ["order", "refund"]
        done = await ok(await client.post("/api/v1/time-travel", json={**body, "dryRun": False}))
        [traveled] = done["traveled"]
        assert (traveled["flowId"], traveled["previousRunId"]) == ("order", old)
        assert done["failed"] == [
            {
                "flowId": "refund",
                "runId": matched[1]["runId"],
                "code": "INVALID_ARGUMENT",
                "detail": "to.stepType: Flow type RefundFlow has no Step type Charge",
            }
        ]
        for bad, field in [
            ({**body, "to": {"kind": "EVENT", "eventId": 1}}, "to.kind"),
        ]:
            assert_problem(
                await client.post("/api/v1/time-travel", json=bad),
                400,
                "INVALID_ARGUMENT",
                field=field,
            )
        for bad in [{**body, "limit": 0}, {**body, "query": ""}, {"to": body["to"]}]:
            assert_problem(
                await client.post("/api/v1/time-travel", json=bad), 422, "VALIDATION_ERROR"
            )


def test_the_document_names_both_operations_and_the_as_of_parameter() -> None:
    import json
    from pathlib import Path

    document = json.loads((Path(__file__).parents[2] / "openapi.json").read_text())
    paths = document["paths"]
    assert paths["/api/v1/flows/{flowId}/time-travel"]["post"]["operationId"] == "timeTravelFlow"
    assert paths["/api/v1/time-travel"]["post"]["operationId"] == "timeTravelFlows"
    assert "201" in paths["/api/v1/flows/{flowId}/time-travel"]["post"]["responses"]
    parameters = paths["/api/v1/flows/{flowId}/attributes"]["get"]["parameters"]
    assert "asOfEventId" in [p["name"] for p in parameters]
