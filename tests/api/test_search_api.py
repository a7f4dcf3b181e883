"""Indexes and SearchFlows through HTTP (issue 3; seed 002 "Indexes", "Indexed AttributeMap")."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

import httpx

from engine import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Context,
    Flow,
    IndexType,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    graceful_complete,
    rpc,
)
from engine._tokens import seal, unseal
from tests.support.problems import assert_problem

PROBLEM = "application/problem+json"


class AttributeFlow(Flow[None]):
    """The seed's AttributeFlow, RPC-only so that it stays open, with one key of each type."""

    status = Attribute(
        "primitive-attribute-status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1")
    )
    progress = AttributeMap(
        "primitive-attribute-progress", str, index=AttributeIndex(IndexType.KEYWORD, "keyword2")
    )
    tags = Attribute(
        "tags", list[str], index=AttributeIndex(IndexType.KEYWORD_ARRAY, "keywordList1")
    )
    description = Attribute("description", str, index=AttributeIndex(IndexType.FULL_TEXT, "text1"))
    amount = Attribute("amount", int, index=AttributeIndex(IndexType.INT, "int1"))
    score = Attribute("score", float, index=AttributeIndex(IndexType.DOUBLE, "double1"))
    vip = Attribute("vip", bool, index=AttributeIndex(IndexType.BOOL, "bool1"))
    due = Attribute("due", datetime, index=AttributeIndex(IndexType.DATETIME, "datetime1"))
    model_api_key = Attribute("primitive-attribute-model-api-key", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc(lock_attributes=(status.lock(), progress.lock("payment")))
    def update_status(self, context: Context, input: str) -> RPCResult[str]:
        self.status.set(context, input)
        self.progress.set(context, "payment", input)
        return RPCResult(input)

    @rpc
    def set_progress(self, context: Context, input: dict[str, str]) -> RPCResult[None]:
        for instance, value in input.items():
            self.progress.set(context, instance, value)
        return RPCResult(None)


class OrderFlow(Flow[None]):
    """Another Flow type reusing keyword1 (same type, another business meaning)."""

    state = Attribute("order-state", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


class CompleteStep(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        self.flow.status.set(context, "completed")
        return graceful_complete(input)


class CompletingFlow(Flow[str]):
    """A Flow whose start Step writes its indexed status and completes."""

    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(CompleteStep())


def registry() -> Registry:
    return Registry([AttributeFlow(), OrderFlow(), CompletingFlow()])


async def start(
    client: httpx.AsyncClient,
    flow_id: str,
    flow_type: str = "AttributeFlow",
    input: Any = None,
    **initial: Any,
) -> str:
    response = await client.post(
        "/api/v1/flows",
        json={
            "flowType": flow_type,
            "flowId": flow_id,
            "input": input,
            "options": {"initialAttributes": initial},
        },
    )
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


async def search(client: httpx.AsyncClient, query: str, **params: Any) -> dict[str, Any]:
    response = await client.get("/api/v1/flows", params={"query": query, **params})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def ids(client: httpx.AsyncClient, query: str) -> set[str]:
    return {f["flowId"] for f in (await search(client, query))["flows"]}


async def invoke(client: httpx.AsyncClient, flow_id: str, name: str, input: Any) -> Any:
    response = await client.post(f"/api/v1/flows/{flow_id}/rpcs/{name}", json={"input": input})
    assert response.status_code == 200, response.text
    return response.json()["output"]


async def wait_closed(client: httpx.AsyncClient, flow_id: str) -> None:
    """Return once the run has closed: waitForFlow answers as soon as it does."""
    result = await client.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10})
    assert result.status_code == 200, result.text
    assert result.json()["status"] != "RUNNING", f"{flow_id} did not close"


async def set_values(client: httpx.AsyncClient, flow_id: str, **values: Any) -> None:
    response = await client.put(f"/api/v1/flows/{flow_id}/attributes", json={"values": values})
    assert response.status_code == 200, response.text


# -- the seed's examples and read-your-writes ----------------------------------------------------


async def test_seed_query_finds_completed_attribute_flows(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "done")
        await start(client, "pending")
        await start(client, "order", "OrderFlow", **{"order-state": "completed"})
        await invoke(client, "done", "update_status", "completed")
        await invoke(client, "pending", "update_status", "pending")
        page = await search(client, "FlowType = 'AttributeFlow' AND keyword1 = 'completed'")
        assert [f["flowId"] for f in page["flows"]] == ["done"]
        assert page["nextPageToken"] == ""
        info = page["flows"][0]
        assert info["flowType"] == "AttributeFlow" and info["status"] == "RUNNING"
        assert info["closedAt"] is None and info["startedAt"]
        assert info["indexedAttributes"] == {"keyword1": "completed", "keyword2": "completed"}


async def test_flow_type_confines_the_search_and_no_filter_text_widens_it(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "attr", **{"primitive-attribute-status": "x"})
        await start(client, "order", "OrderFlow", **{"order-state": "x"})
        scoped = await search(client, "keyword1 = 'x'", flowType="OrderFlow")
        widened = await search(
            client, "keyword1 = 'y' OR FlowType = 'AttributeFlow'", flowType="OrderFlow"
        )
        # Text that closes a parenthesis the scope would open is no filter of its own.
        hostile = await client.get(
            "/api/v1/flows",
            params={
                "query": "keyword1 = 'y') OR (FlowType = 'AttributeFlow'",
                "flowType": "OrderFlow",
            },
        )
        empty = await client.get("/api/v1/flows", params={"flowType": ""})
        first = await search(client, "", flowType="OrderFlow", pageSize=1)
        unscoped = await client.get(
            "/api/v1/flows",
            params={
                "pageSize": 1,
                "pageToken": (await search(client, "", pageSize=1))["nextPageToken"],
                "flowType": "OrderFlow",
            },
        )
    assert [f["flowId"] for f in scoped["flows"]] == ["order"]
    assert widened["flows"] == []
    assert_problem(hostile, 400, "INVALID_QUERY")
    assert_problem(empty, 400, "INVALID_ARGUMENT", field="flowType")
    assert first["nextPageToken"] == ""
    # A token is bound to its query and its scope.
    assert_problem(unscoped, 400, "INVALID_PAGE_TOKEN")


async def test_search_reads_its_own_writes_right_after_an_rpc_returns(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "f")
        for i in range(15):
            await invoke(client, "f", "update_status", f"state-{i}")
            assert await ids(client, f"keyword1 = 'state-{i}'") == {"f"}
            if i:
                assert await ids(client, f"keyword1 = 'state-{i - 1}'") == set()


async def test_initial_attributes_are_searchable_as_soon_as_the_start_returns(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "f", amount=7)
        assert await ids(client, "int1 = 7") == {"f"}


# -- each index type ------------------------------------------------------------------------------


async def test_keyword_index_matches_exact_strings_and_compares_by_code_point(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "a", **{"primitive-attribute-status": "Apple"})
        await start(client, "b", **{"primitive-attribute-status": "apple"})
        await start(client, "c", **{"primitive-attribute-status": "banana"})
        await start(client, "unset")
        assert await ids(client, "keyword1 = 'apple'") == {"b"}
        assert await ids(client, "keyword1 != 'apple'") == {"a", "c"}
        assert await ids(client, "keyword1 < 'b'") == {"a", "b"}
        assert await ids(client, "keyword1 IN ('Apple', 'banana')") == {"a", "c"}
        assert await ids(client, "keyword1 NOT IN ('Apple', 'banana')") == {"b"}
        assert await ids(client, "keyword1 STARTS_WITH 'app'") == {"b"}
        assert await ids(client, "keyword1 BETWEEN 'apple' AND 'banana'") == {"b", "c"}
        assert await ids(client, "keyword1 IS NULL") == {"unset"}
        assert await ids(client, "keyword1 IS NOT NULL") == {"a", "b", "c"}


async def test_int_index_compares_numbers_not_text(make_client: Any) -> None:
    async with make_client(registry()) as client:
        for flow_id, amount in (("two", 2), ("ten", 10), ("hundred", 100), ("neg", -5)):
            await start(client, flow_id, amount=amount)
        await start(client, "unset")
        assert await ids(client, "int1 > 9") == {"ten", "hundred"}
        assert await ids(client, "int1 <= 2") == {"two", "neg"}
        assert await ids(client, "int1 BETWEEN 2 AND 10") == {"two", "ten"}
        assert await ids(client, "int1 NOT BETWEEN 2 AND 10") == {"hundred", "neg"}
        assert await ids(client, "int1 IN (-5, 100)") == {"neg", "hundred"}
        assert await ids(client, "int1 = 10 OR int1 = 2") == {"two", "ten"}
        assert await ids(client, "int1 >= 3 AND int1 < 101") == {"ten", "hundred"}


async def test_double_index_compares_numbers_and_accepts_integer_literals(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "low", score=-0.5)
        await start(client, "mid", score=1.5)
        await start(client, "high", score=10.25)
        assert await ids(client, "double1 >= 1.5") == {"mid", "high"}
        assert await ids(client, "double1 < 0") == {"low"}
        assert await ids(client, "double1 BETWEEN 1 AND 1e1") == {"mid"}
        assert await ids(client, "double1 = 10.25") == {"high"}


async def test_bool_index_matches_true_and_false(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "yes", vip=True)
        await start(client, "no", vip=False)
        await start(client, "unset")
        assert await ids(client, "bool1 = TRUE") == {"yes"}
        assert await ids(client, "bool1 = false") == {"no"}
        assert await ids(client, "bool1 != true") == {"no"}
        assert await ids(client, "bool1 IS NULL") == {"unset"}


async def test_datetime_index_compares_instants_across_offsets(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "eight-utc", due="2025-01-01T10:00:00+02:00")
        await start(client, "nine-utc", due="2025-01-01T09:00:00Z")
        await start(client, "next-year", due="2026-06-30T00:00:00Z")
        assert await ids(client, "datetime1 < '2025-01-01T08:30:00Z'") == {"eight-utc"}
        assert await ids(client, "datetime1 = '2025-01-01T08:00:00'") == {"eight-utc"}
        assert await ids(client, "datetime1 BETWEEN '2025-01-01' AND '2025-12-31T23:59:59Z'") == {
            "eight-utc",
            "nine-utc",
        }
        assert await ids(client, "datetime1 > '2025-01-01T09:00:00+00:00'") == {"next-year"}
        info = (await search(client, "FlowId = 'nine-utc'"))["flows"][0]
        shown = datetime.fromisoformat(info["indexedAttributes"]["datetime1"])
        assert shown == datetime.fromisoformat("2025-01-01T09:00:00+00:00")


async def test_keyword_array_matches_when_any_element_matches(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "rg", tags=["red", "green"])
        await start(client, "blue", tags=["blue"])
        await start(client, "empty", tags=[])
        await start(client, "unset")
        assert await ids(client, "keywordList1 = 'green'") == {"rg"}
        assert await ids(client, "keywordList1 IN ('blue', 'red')") == {"rg", "blue"}
        assert await ids(client, "keywordList1 != 'red'") == {"blue", "empty"}
        assert await ids(client, "keywordList1 NOT IN ('red', 'blue')") == {"empty"}
        assert await ids(client, "keywordList1 STARTS_WITH 'gr'") == {"rg"}
        assert await ids(client, "keywordList1 = 'red' AND keywordList1 = 'green'") == {"rg"}
        assert await ids(client, "keywordList1 IS NULL") == {"unset"}
        info = (await search(client, "FlowId = 'rg'"))["flows"][0]
        assert info["indexedAttributes"]["keywordList1"] == ["red", "green"]


async def test_full_text_equality_matches_a_token(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "fox", description="The quick brown fox jumps")
        await start(client, "dog", description="A lazy dog, sleeping.")
        await start(client, "unset")
        assert await ids(client, "text1 = 'quick'") == {"fox"}
        assert await ids(client, "text1 = 'QUICK'") == {"fox"}
        assert await ids(client, "text1 = 'dog'") == {"dog"}
        assert await ids(client, "text1 = 'qui'") == set()  # a token, not a substring
        assert await ids(client, "text1 = 'brown fox'") == {"fox"}
        assert await ids(client, "text1 != 'quick'") == {"dog"}
        assert await ids(client, "text1 IS NULL") == {"unset"}
        await set_values(client, "fox", description="now about cats")
        assert await ids(client, "text1 = 'quick'") == set()
        assert await ids(client, "text1 = 'cats'") == {"fox"}


# -- indexed AttributeMap and deletion -------------------------------------------------------------


async def test_indexed_attribute_map_has_one_search_value_that_each_instance_write_replaces(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "f")
        await invoke(client, "f", "update_status", "authorized")
        query = "FlowType = 'AttributeFlow' AND keyword2 = 'authorized'"
        assert await ids(client, query) == {"f"}
        await invoke(client, "f", "set_progress", {"shipping": "packed"})
        # The payment instance still holds 'authorized', but the search value was replaced.
        assert await ids(client, query) == set()
        assert await ids(client, "keyword2 = 'packed'") == {"f"}
        values = (
            await client.get(
                "/api/v1/flows/f/attributes",
                params={
                    "name": [
                        "primitive-attribute-progress/payment",
                        "primitive-attribute-progress/shipping",
                    ],
                },
            )
        ).json()["values"]
        assert values == {
            "primitive-attribute-progress/payment": "authorized",
            "primitive-attribute-progress/shipping": "packed",
        }
        info = (await client.get("/api/v1/flows/f")).json()
        assert info["indexedAttributes"]["keyword2"] == "packed"
        found = (await search(client, "FlowId = 'f'"))["flows"][0]
        assert found["indexedAttributes"]["keyword2"] == "packed"


async def test_deleting_an_attribute_removes_its_index_value(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(
            client,
            "f",
            amount=3,
            tags=["x"],
            description="hello world",
            **{"primitive-attribute-status": "s", "primitive-attribute-progress/a": "p"},
        )
        assert await ids(client, "int1 = 3 AND keywordList1 = 'x' AND text1 = 'hello'") == {"f"}
        await set_values(
            client,
            "f",
            amount=None,
            tags=None,
            description=None,
            **{"primitive-attribute-status": None, "primitive-attribute-progress/a": None},
        )
        for query in (
            "int1 = 3",
            "keywordList1 = 'x'",
            "text1 = 'hello'",
            "keyword1 = 's'",
            "keyword2 = 'p'",
        ):
            assert await ids(client, query) == set(), query
        assert await ids(client, "int1 IS NULL AND keyword1 IS NULL AND keyword2 IS NULL") == {"f"}
        assert (await client.get("/api/v1/flows/f")).json()["indexedAttributes"] == {}


# -- query structure ------------------------------------------------------------------------------


async def test_and_binds_tighter_than_or_and_parentheses_group(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "a1", amount=1, **{"primitive-attribute-status": "a"})
        await start(client, "b2", amount=2, **{"primitive-attribute-status": "b"})
        await start(client, "a2", amount=2, **{"primitive-attribute-status": "a"})
        assert await ids(client, "keyword1 = 'a' AND int1 = 1 OR int1 = 2") == {"a1", "b2", "a2"}
        assert await ids(client, "keyword1 = 'a' AND (int1 = 1 OR int1 = 2)") == {"a1", "a2"}
        assert await ids(client, "(keyword1 = 'b' OR int1 = 1) AND NOT FlowId = 'a1'") == {"b2"}
        assert await ids(client, "NOT (keyword1 = 'a' AND int1 = 2)") == {"a1", "b2"}
        assert await ids(
            client, "keyword1 = 'a' and (int1 = 1 or (int1 = 2 and FlowId = 'a2'))"
        ) == {"a1", "a2"}


async def test_a_caller_filter_ored_inside_parentheses_cannot_escape_the_flow_type_scope(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "attr", **{"primitive-attribute-status": "completed"})
        await start(client, "order", "OrderFlow", **{"order-state": "completed"})
        caller = "keyword1 = 'completed' OR FlowType = 'OrderFlow'"
        assert await ids(client, caller) == {"attr", "order"}
        assert await ids(client, f"FlowType = 'AttributeFlow' AND ({caller})") == {"attr"}
        # Unparenthesized, the OR would escape: the reason the seed says to parenthesize.
        assert await ids(client, f"FlowType = 'AttributeFlow' AND {caller}") == {"attr", "order"}


async def test_closed_runs_appear_with_their_status_and_each_run_of_a_flow_id_is_found(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "done", "CompletingFlow", input="x")
        await wait_closed(client, "done")
        page = await search(client, "FlowType = 'CompletingFlow' AND keyword1 = 'completed'")
        [info] = page["flows"]
        assert info["status"] == "COMPLETED" and info["closedAt"] is not None
        assert await ids(client, "Status = 'COMPLETED' AND CloseTime IS NOT NULL") == {"done"}

        first = await start(client, "again")
        stopped = await client.post("/api/v1/flows/again/stop", json={"type": "CANCEL"})
        assert stopped.status_code == 202
        second = await start(client, "again")
        runs = (await search(client, "FlowId = 'again'"))["flows"]
        assert [(r["runId"], r["status"]) for r in runs] == [
            (second, "RUNNING"),
            (first, "CANCELED"),
        ]
        described = (await client.get("/api/v1/flows/again")).json()
        assert described == runs[0]
        assert await ids(client, "FlowId = 'again' AND Status = 'RUNNING'") == {"again"}
        assert await ids(client, "CloseTime IS NULL") == {"again"}


async def test_system_fields_filter_and_order_by(make_client: Any) -> None:
    async with make_client(registry()) as client:
        runs = {name: await start(client, name) for name in ("c", "a", "b")}
        assert await ids(client, "FlowId IN ('a', 'b')") == {"a", "b"}
        assert await ids(client, f"RunId = '{runs['c']}'") == {"c"}
        assert await ids(client, "FlowType = 'AttributeFlow' AND FlowId STARTS_WITH 'b'") == {"b"}
        newest_first = [f["flowId"] for f in (await search(client, ""))["flows"]]
        assert newest_first == ["b", "a", "c"]
        oldest_first = await search(client, "ORDER BY StartTime ASC")
        assert [f["flowId"] for f in oldest_first["flows"]] == ["c", "a", "b"]
        by_id = await search(client, "FlowType = 'AttributeFlow' ORDER BY FlowId")
        assert [f["flowId"] for f in by_id["flows"]] == ["a", "b", "c"]
        started = oldest_first["flows"][1]["startedAt"]
        assert await ids(client, f"StartTime >= '{started}'") == {"a", "b"}


async def test_values_with_quotes_and_sql_are_matched_literally(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "quote", **{"primitive-attribute-status": "it's"})
        await start(client, "sql", **{"primitive-attribute-status": "x' OR '1'='1"})
        await start(client, "other", **{"primitive-attribute-status": "plain"})
        assert await ids(client, "keyword1 = 'it''s'") == {"quote"}
        assert await ids(client, "keyword1 = 'it\\'s'") == {"quote"}
        assert await ids(client, "keyword1 = \"x' OR '1'='1\"") == {"sql"}
        assert await ids(client, "keyword1 = 'x'' OR ''1''=''1'") == {"sql"}


# -- paging ---------------------------------------------------------------------------------------


async def test_paging_23_results_by_7_returns_every_match_once(make_client: Any) -> None:
    async with make_client(registry()) as client:
        for i in range(23):
            await start(client, f"match-{i:02}", amount=1)
        for i in range(4):
            await start(client, f"other-{i}", amount=2)
        query = "FlowType = 'AttributeFlow' AND int1 = 1"
        everything = [f["runId"] for f in (await search(client, query))["flows"]]
        assert len(everything) == 23
        pages: list[list[str]] = []
        token = ""
        while True:
            page = await search(client, query, pageSize=7, pageToken=token)
            pages.append([f["runId"] for f in page["flows"]])
            # Runs started between pages are newer than the position: they shift nothing.
            await start(client, f"late-{len(pages)}", amount=1)
            token = page["nextPageToken"]
            if not token:
                break
        assert [len(p) for p in pages] == [7, 7, 7, 2]
        assert [run for page in pages for run in page] == everything


async def test_page_size_outside_1_to_1000_is_invalid_argument(make_client: Any) -> None:
    async with make_client(registry()) as client:
        for i in range(3):
            await start(client, f"f{i}")
        for size in (0, -1, 1001):
            response = await client.get("/api/v1/flows", params={"pageSize": size})
            assert_problem(response, 400, "INVALID_ARGUMENT")
        assert len((await search(client, "", pageSize=1000))["flows"]) == 3
        page = await search(client, "", pageSize=1)
        assert len(page["flows"]) == 1 and page["nextPageToken"]


async def test_page_token_from_another_query_or_malformed_is_rejected(make_client: Any) -> None:
    async with make_client(registry()) as client:
        for i in range(3):
            await start(client, f"f{i}", amount=i)
        token = (await search(client, "int1 >= 0", pageSize=1))["nextPageToken"]
        assert token
        # Edited without the digest a token carries: refused by its integrity check.
        forged = base64.urlsafe_b64encode(
            json.dumps({"v": 1, "q": "0" * 24, "p": [1, "x"]}).encode()
        ).decode()
        # Sealed like a real token but holding a value of the wrong type: refused too.
        raw = json.loads(unseal(token))
        raw["p"] = ["not-a-time", raw["p"][1]]
        wrong_type = seal(json.dumps(raw).encode())
        cases = [
            ("int1 >= 1", token),  # another query
            ("int1 >= 0 ", token),  # another query text
            ("int1 >= 0", "not a token!"),
            ("int1 >= 0", token[:-3]),
            ("int1 >= 0", "e30"),  # {}
            ("int1 >= 0", forged),
            ("int1 >= 0", wrong_type),
            ("int1 >= 0", "A" * 5000),
        ]
        for query, bad in cases:
            response = await client.get(
                "/api/v1/flows", params={"query": query, "pageToken": bad, "pageSize": 1}
            )
            assert_problem(response, 400, "INVALID_PAGE_TOKEN")
        second = await search(client, "int1 >= 0", pageSize=1, pageToken=token)
        assert len(second["flows"]) == 1


# -- errors ----------------------------------------------------------------------------------------

HOSTILE_QUERIES = [
    "keyword1 = 'a' OR 1=1",
    "keyword1 = 'a'; DROP TABLE runs",
    "keyword1 = 'a' -- comment",
    "keyword1 = '' OR ''=''",
    "keyword1 = 'a' UNION SELECT run_id FROM runs",
    "keyword1 = 'a') OR ('1'='1",
    "runs.status = 'RUNNING'",
    "keyword1 = 'a' /* x */",
    "FlowType = 'AttributeFlow' AND (",
    "keyword1 == 'a'",
    "keyword1 = 'unterminated",
    "keyword1 IN ()",
    "unknownKey = 'x'",
    "int1 = 'ten'",
    "int1 = 1.5",
    "keyword1 > 5",
    "text1 > 'a'",
    "bool1 = 1",
    "datetime1 > 'yesterday'",
    "Status = 'DONE'",
    "ORDER BY keyword1",
    "int1 = 99999999999999999999",
    "keyword1 = 'a' AND",
    "keyword1 = 'bad \\q escape'",
    "keyword1 = 'a' ORDER BY StartTime ASC, StartTime DESC",
    "(" * 40 + "keyword1 = 'a'" + ")" * 40,
    "NOT " * 40 + "keyword1 = 'a'",
    " OR ".join(["int1 = 1"] * 100),
    "keyword1 = '" + "x" * 5000 + "'",
    "keyword1 = 'a' \x00",
    "FlowType = x'00'",
]


async def test_each_malformed_or_hostile_query_is_invalid_query(make_client: Any) -> None:
    assert len(HOSTILE_QUERIES) >= 10
    wrong: list[tuple[str, int, str]] = []
    async with make_client(registry()) as client:
        await start(client, "f", **{"primitive-attribute-status": "a"})
        for query in HOSTILE_QUERIES:
            response = await client.get("/api/v1/flows", params={"query": query})
            body = response.json()
            position = body.get("position")
            if not (
                response.status_code == 400
                and response.headers["content-type"] == PROBLEM
                and body["code"] == "INVALID_QUERY"
                and isinstance(position, int)
                and 0 <= position <= len(query)
            ):
                wrong.append((query[:80], response.status_code, response.text[:200]))
        # Nothing was executed: the data is intact and searchable.
        assert await ids(client, "keyword1 = 'a'") == {"f"}
    assert wrong == []


async def test_invalid_query_names_the_position_and_what_was_expected(make_client: Any) -> None:
    async with make_client(registry()) as client:
        response = await client.get("/api/v1/flows", params={"query": "keyword1 = 'a' OR 1=1"})
        body = response.json()
        assert body["position"] == 18
        assert "position 18" in body["detail"] and "expected" in body["detail"]
        assert "a field name" in body["detail"]
        response = await client.get("/api/v1/flows", params={"query": "keywrd1 = 'a'"})
        body = response.json()
        assert body["code"] == "INVALID_QUERY" and body["position"] == 0
        assert "unknown field 'keywrd1'" in body["detail"] and "keyword1" in body["detail"]
        response = await client.get("/api/v1/flows", params={"query": "int1 = 'ten'"})
        body = response.json()
        assert body["position"] == 7 and "integer" in body["detail"]


async def test_empty_query_lists_every_run_newest_first(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "first")
        await start(client, "order", "OrderFlow")
        response = await client.get("/api/v1/flows")
        assert response.status_code == 200
        assert [f["flowId"] for f in response.json()["flows"]] == ["order", "first"]
