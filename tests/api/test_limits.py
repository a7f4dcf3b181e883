"""Every limit is a setting, and a request over one gets a 400 naming the field and the setting."""

from __future__ import annotations

from typing import Any

from tests.support.problems import assert_problem

#: The limits on what a request asks for (the limits settings), lowered.
LOW = {
    "max_id_length": 12,
    "max_value_bytes": 64,
    "max_query_length": 40,
    "max_query_depth": 2,
    "max_names_per_read": 2,
    "max_page_size": 5,
    "max_wait_seconds": 1.0,
}


def over(response: Any, field: str, setting: str) -> None:
    """Assert a 400 INVALID_ARGUMENT naming ``field`` and the setting ``setting``."""
    body = assert_problem(response, 400, "INVALID_ARGUMENT", field=field)
    assert body["limit"] == setting, body
    assert setting in body["detail"], body


async def test_each_limit_refuses_what_exceeds_it_and_takes_what_fits(make_client: Any) -> None:
    async with make_client(limits=LOW) as client:
        fits = await client.post("/primitives/rpc/start", params={"flowId": "c" * 12})
        assert fits.status_code == 201, fits.text
        flow = "c" * 12
        over(
            await client.get(f"/api/v1/flows/{'x' * 13}"), "flowId", "DEXLITE_LIMITS__MAX_ID_LENGTH"
        )
        over(
            await client.get(f"/api/v1/flows/{flow}", params={"runId": "r" * 13}),
            "runId",
            "DEXLITE_LIMITS__MAX_ID_LENGTH",
        )
        big = "v" * 80
        over(
            await client.post(f"/api/v1/flows/{flow}/rpcs/increment", json={"input": big}),
            "input",
            "DEXLITE_LIMITS__MAX_VALUE_BYTES",
        )
        over(
            await client.put(f"/api/v1/flows/{flow}/attributes", json={"values": {"counter": big}}),
            "values.counter",
            "DEXLITE_LIMITS__MAX_VALUE_BYTES",
        )
        over(
            await client.post(
                "/api/v1/flows",
                json={"flowType": "CounterFlow", "flowId": "s", "input": [big]},
            ),
            "input",
            "DEXLITE_LIMITS__MAX_VALUE_BYTES",
        )
        over(
            await client.post(
                "/api/v1/flows",
                json={
                    "flowType": "CounterFlow",
                    "flowId": "s",
                    "options": {"initialAttributes": {"counter": big}},
                },
            ),
            "options.initialAttributes.counter",
            "DEXLITE_LIMITS__MAX_VALUE_BYTES",
        )
        over(
            await client.get(
                f"/api/v1/flows/{flow}/attributes", params=[("name", n) for n in "abc"]
            ),
            "name",
            "DEXLITE_LIMITS__MAX_NAMES_PER_READ",
        )
        two = await client.get(f"/api/v1/flows/{flow}/attributes", params=[("name", "counter")] * 2)
        assert two.status_code == 200, two.text
        over(
            await client.get(f"/api/v1/flows/{flow}/history", params={"pageSize": 6}),
            "pageSize",
            "DEXLITE_LIMITS__MAX_PAGE_SIZE",
        )
        over(
            await client.get("/api/v1/flows", params={"pageSize": 6}),
            "pageSize",
            "DEXLITE_LIMITS__MAX_PAGE_SIZE",
        )
        assert (await client.get("/api/v1/flows", params={"pageSize": 5})).status_code == 200
        over(
            await client.get(f"/api/v1/flows/{flow}/result", params={"waitSeconds": 2}),
            "waitSeconds",
            "DEXLITE_LIMITS__MAX_WAIT_SECONDS",
        )
        over(
            await client.post(
                f"/api/v1/flows/{flow}/attribute-matches",
                json={"name": "counter", "value": 1, "waitSeconds": 2},
            ),
            "waitSeconds",
            "DEXLITE_LIMITS__MAX_WAIT_SECONDS",
        )
        long_query = await client.get(
            "/api/v1/flows", params={"query": "FlowId = '" + "q" * 40 + "'"}
        )
        body = assert_problem(long_query, 400, "INVALID_QUERY", field="query")
        assert body["limit"] == "DEXLITE_LIMITS__MAX_QUERY_LENGTH" and body["position"] == 40
        deep = await client.get("/api/v1/flows", params={"query": "(((FlowId = 'a')))"})
        body = assert_problem(deep, 400, "INVALID_QUERY", field="query")
        assert body["limit"] == "DEXLITE_LIMITS__MAX_QUERY_DEPTH" and body["position"] == 2
        quoted = await client.get("/api/v1/flows", params={"query": "FlowId = '((('"})
        assert quoted.status_code == 200, quoted.text  # parentheses inside a string do not nest


async def test_beyond_the_api_bounds_the_api_answers_as_it_defines(make_client: Any) -> None:
    """Settings only lower the API's own bounds: past them, the documented answers stand."""
    async with make_client() as client:
        await client.post("/primitives/rpc/start", params={"flowId": "bounds"})
        result = await client.get("/api/v1/flows/bounds/result", params={"waitSeconds": 61})
        assert_problem(result, 422, "VALIDATION_ERROR")
        page = await client.get("/api/v1/flows/bounds/history", params={"pageSize": 1001})
        body = assert_problem(page, 400, "INVALID_ARGUMENT", field="pageSize")
        assert "limit" not in body
