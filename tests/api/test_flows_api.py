"""The REST contract of DESIGN.md §5 for Flows, RPCs and Attributes, through HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

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
    StepMovement,
    StepOptions,
    dead_end,
    graceful_complete,
    rpc,
)
from tests.support.backends import backend_independent
from tests.support.problems import assert_problem

#: Refused before the database is read: the same on every backend.
REFUSED_EARLY = backend_independent("the request is refused before the database is read")

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"


class Hold(Step[None]):
    holding: asyncio.Event  # set once execute runs, i.e. the Step holds the status lock
    release: asyncio.Event

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.status.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        Hold.holding.set()
        await Hold.release.wait()
        return dead_end()


class Greet(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        name = self.flow.nickname.get(context) or input
        self.flow.status.set(context, "greeted")
        return graceful_complete(f"hello {name}")


class ShopFlow(Flow[str]):
    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    nickname = Attribute("nickname", str)
    progress = AttributeMap("progress", str)
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Greet())


class LedgerFlow(Flow[None]):
    status = Attribute("status", str)
    progress = AttributeMap("progress", str)
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Hold())

    @rpc(lock_attributes=(status.lock(), progress.lock("payment")))
    def update_status(self, context: Context, input: str) -> RPCResult[str]:
        self.status.set(context, input)
        self.progress.set(context, "payment", input)
        return RPCResult(input)

    @rpc
    def hold(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Hold, None),))

    @rpc
    def read_progress(self, context: Context, input: str) -> str | None:
        return self.progress.get(context, input)

    @rpc
    def status_now(self, context: Context) -> str | None:
        return self.status.get(context)

    @rpc
    def explode(self, context: Context) -> None:
        raise ZeroDivisionError("nope")


def registry() -> Registry:
    return Registry([ShopFlow(), LedgerFlow()])


@pytest.fixture(autouse=True)
def _fresh_events() -> None:
    Hold.holding, Hold.release = asyncio.Event(), asyncio.Event()


async def start(client: httpx.AsyncClient, flow_type: str, flow_id: str, **body: Any) -> Any:
    return await client.post(
        "/api/v1/flows", json={"flowType": flow_type, "flowId": flow_id, **body}
    )


async def test_start_describe_and_wait_for_a_flow(make_client: Any) -> None:
    async with make_client(registry()) as client:
        created = await start(
            client,
            "ShopFlow",
            "order-1",
            input="ada",
            options={"initialAttributes": {"nickname": "Ada L."}},
        )
        assert created.status_code == 201
        body = created.json()
        assert body["flowId"] == "order-1" and body["started"] is True
        result = await client.get("/api/v1/flows/order-1/result", params={"waitSeconds": 10})
        assert result.status_code == 200
        assert result.json() == {
            "flowId": "order-1",
            "runId": body["runId"],
            "status": "COMPLETED",
            "completions": [
                {
                    "stepType": "Greet",
                    "stepExecutionId": result.json()["completions"][0]["stepExecutionId"],
                    "output": "hello Ada L.",
                }
            ],
            "errorType": None,
            "errorMessage": None,
        }
        info = (await client.get("/api/v1/flows/order-1")).json()
        assert info["status"] == "COMPLETED" and info["flowType"] == "ShopFlow"
        assert info["runId"] == body["runId"] and info["closedAt"] is not None
        assert info["indexedAttributes"] == {"keyword1": "greeted"}


async def test_start_with_request_id_and_ignore_already_started_answers_200(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        options = {"requestId": "r-1", "ignoreAlreadyStarted": True}
        first = await start(client, "LedgerFlow", "ledger", options=options)
        again = await start(client, "LedgerFlow", "ledger", options=options)
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json() == {**first.json(), "started": False}
        conflict = await start(client, "LedgerFlow", "ledger")
        assert (
            assert_problem(conflict, 409, "FLOW_ALREADY_STARTED")["runId"] == first.json()["runId"]
        )


async def test_start_errors_are_problems_naming_the_field(make_client: Any) -> None:
    async with make_client(registry()) as client:
        assert_problem(await start(client, "Nope", "x"), 404, "FLOW_TYPE_NOT_FOUND")
        bad_input = assert_problem(
            await start(client, "ShopFlow", "x", input=5), 400, "INVALID_ARGUMENT"
        )
        assert bad_input["field"] == "input"
        unknown = assert_problem(
            await start(
                client, "ShopFlow", "x", input="a", options={"initialAttributes": {"ghost": 1}}
            ),
            400,
            "INVALID_ARGUMENT",
        )
        assert "ghost" in unknown["detail"]
        slash = assert_problem(
            await start(client, "ShopFlow", "a/b", input="a"), 400, "INVALID_ARGUMENT"
        )
        assert slash["field"] == "flowId"
        schema = assert_problem(
            await client.post("/api/v1/flows", json={"flowType": "ShopFlow"}),
            422,
            "VALIDATION_ERROR",
        )
        assert any(e["location"] == "body.flowId" for e in schema["errors"])
        extra = assert_problem(
            await start(client, "ShopFlow", "x", input="a", bogus=True), 422, "VALIDATION_ERROR"
        )
        assert extra["errors"][0]["location"] == "body.bogus"
        not_json = await client.post(
            "/api/v1/flows", content=b"{", headers={"content-type": "application/json"}
        )
        assert_problem(not_json, 422, "VALIDATION_ERROR")


async def test_describe_and_result_of_an_unknown_flow_are_flow_not_found(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        assert_problem(await client.get("/api/v1/flows/ghost"), 404, "FLOW_NOT_FOUND")
        assert_problem(await client.get("/api/v1/flows/ghost/result"), 404, "FLOW_NOT_FOUND")
        assert_problem(await client.get("/api/v1/flows/ghost/history"), 404, "FLOW_NOT_FOUND")
        too_long = await client.get("/api/v1/flows/ghost/result", params={"waitSeconds": 61})
        assert_problem(too_long, 422, "VALIDATION_ERROR")


async def test_invoke_rpc_returns_output_and_writes_attributes(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "LedgerFlow", "l1")
        called = await client.post("/api/v1/flows/l1/rpcs/update_status", json={"input": "paid"})
        assert called.status_code == 200 and called.json() == {"output": "paid"}
        values = await client.get(
            "/api/v1/flows/l1/attributes",
            params=[("name", "status"), ("name", "progress/payment"), ("name", "progress/refund")],
        )
        assert values.status_code == 200
        assert values.json()["values"] == {"status": "paid", "progress/payment": "paid"}


async def test_invoke_rpc_options_load_exact_instances(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "LedgerFlow", "l2")
        await client.post("/api/v1/flows/l2/rpcs/update_status", json={"input": "paid"})
        unloaded = await client.post(
            "/api/v1/flows/l2/rpcs/read_progress", json={"input": "payment"}
        )
        body = assert_problem(unloaded, 500, "RPC_HANDLER_ERROR")
        assert body["errorType"] == "AttributeMapNotLoadedError"
        loaded = await client.post(
            "/api/v1/flows/l2/rpcs/read_progress",
            json={
                "input": "payment",
                "options": {"loadAttributeMapInstances": ["progress/payment"]},
            },
        )
        assert loaded.json() == {"output": "paid"}
        bad = await client.post(
            "/api/v1/flows/l2/rpcs/read_progress",
            json={"input": "payment", "options": {"loadAttributeMapInstances": ["progress"]}},
        )
        assert_problem(bad, 400, "INVALID_ARGUMENT")
        wrong_kind = await client.post(
            "/api/v1/flows/l2/rpcs/read_progress",
            json={"input": "payment", "options": {"lockAttributeMapInstances": ["status/x"]}},
        )
        assert (
            "not an AttributeMap" in assert_problem(wrong_kind, 400, "INVALID_ARGUMENT")["detail"]
        )


async def test_rpc_errors_map_to_their_codes(make_client: Any) -> None:
    async with make_client(registry()) as client:
        assert_problem(
            await client.post("/api/v1/flows/none/rpcs/hold"), 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND"
        )
        await start(client, "LedgerFlow", "l3")
        assert_problem(await client.post("/api/v1/flows/l3/rpcs/missing"), 404, "RPC_NOT_FOUND")
        boom = assert_problem(
            await client.post("/api/v1/flows/l3/rpcs/explode"), 500, "RPC_HANDLER_ERROR"
        )
        assert boom["errorType"] == "ZeroDivisionError"
        bad_input = await client.post("/api/v1/flows/l3/rpcs/update_status", json={"input": 3})
        assert_problem(bad_input, 400, "INVALID_ARGUMENT")
        null_only = await client.post("/api/v1/flows/l3/rpcs/hold", json={"input": "x"})
        assert_problem(null_only, 400, "INVALID_ARGUMENT")


async def test_lock_conflict_is_409_with_retry_after(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "LedgerFlow", "l4")
        assert (await client.post("/api/v1/flows/l4/rpcs/hold")).status_code == 200
        await asyncio.wait_for(Hold.holding.wait(), 10)  # execute runs once the lock is granted
        conflict = await client.post("/api/v1/flows/l4/rpcs/update_status", json={"input": "x"})
        body = assert_problem(conflict, 409, "RPC_LOCK_CONFLICT")
        assert body["detail"] == "RPC lock conflict: attribute key status is locked by a Step"
        assert conflict.headers["retry-after"] == "1"
        # A client write does not slip under the Step's lock either.
        write = await client.put("/api/v1/flows/l4/attributes", json={"values": {"status": "y"}})
        body = assert_problem(write, 409, "RPC_LOCK_CONFLICT")
        assert body["detail"] == "RPC lock conflict: attribute key status is locked by a Step"
        Hold.release.set()


async def test_stop_flow_is_202_and_closed_runs_reject_mutations(make_client: Any) -> None:
    async with make_client(registry()) as client:
        run_id = (await start(client, "LedgerFlow", "l5")).json()["runId"]
        await client.post("/api/v1/flows/l5/rpcs/update_status", json={"input": "open"})
        stopped = await client.post(
            "/api/v1/flows/l5/stop", json={"type": "TERMINATE", "reason": "done"}
        )
        assert stopped.status_code == 202 and stopped.json() == {"flowId": "l5", "runId": run_id}
        result = (await client.get("/api/v1/flows/l5/result")).json()
        assert (result["status"], result["errorMessage"]) == ("TERMINATED", "done")
        assert_problem(
            await client.post("/api/v1/flows/l5/stop"), 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND"
        )
        # A read-only RPC still answers on the closed run; a writing one does not.
        read = await client.post("/api/v1/flows/l5/rpcs/status_now")
        assert read.json() == {"output": "open"}
        write = await client.post("/api/v1/flows/l5/rpcs/update_status", json={"input": "x"})
        assert_problem(write, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
        bad_type = await client.post("/api/v1/flows/l5/stop", json={"type": "EXPLODE"})
        assert_problem(bad_type, 422, "VALIDATION_ERROR")


async def test_get_attributes_reads_one_snapshot_of_the_latest_run(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(
            client,
            "LedgerFlow",
            "l6",
            options={"initialAttributes": {"status": "new", "progress/a": "1"}},
        )
        everything = (await client.get("/api/v1/flows/l6/attributes")).json()
        assert everything["values"] == {"status": "new"}
        unknown = await client.get("/api/v1/flows/l6/attributes", params={"name": "ghost"})
        assert "ghost" in assert_problem(unknown, 400, "INVALID_ARGUMENT")["detail"]
        whole_map = await client.get("/api/v1/flows/l6/attributes", params={"name": "progress"})
        assert_problem(whole_map, 400, "INVALID_ARGUMENT")
        assert_problem(
            await client.get("/api/v1/flows/none/attributes", params={"name": "status"}),
            404,
            "FLOW_NOT_FOUND",
        )
        await client.post("/api/v1/flows/l6/stop")
        closed = await client.get(
            "/api/v1/flows/l6/attributes", params=[("name", "status"), ("name", "progress/a")]
        )
        assert closed.json()["values"] == {"status": "new", "progress/a": "1"}


async def test_set_attributes_writes_active_runs_and_only_erases_on_closed_ones(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, "LedgerFlow", "l7", options={"initialAttributes": {"secret": "s3cr3t"}})
        written = await client.put(
            "/api/v1/flows/l7/attributes", json={"values": {"status": "set", "progress/x": "y"}}
        )
        assert written.status_code == 200 and written.json()["flowId"] == "l7"
        values = (
            await client.get(
                "/api/v1/flows/l7/attributes",
                params=[("name", "status"), ("name", "progress/x"), ("name", "secret")],
            )
        ).json()["values"]
        assert values == {"status": "set", "progress/x": "y", "secret": "s3cr3t"}
        wrong_type = await client.put(
            "/api/v1/flows/l7/attributes", json={"values": {"status": 12}}
        )
        assert_problem(wrong_type, 400, "INVALID_ARGUMENT")
        await client.post("/api/v1/flows/l7/stop")
        refused = await client.put("/api/v1/flows/l7/attributes", json={"values": {"status": None}})
        assert_problem(refused, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
        erased = await client.put("/api/v1/flows/l7/attributes", json={"values": {"secret": None}})
        assert erased.status_code == 200
        after = (
            await client.get(
                "/api/v1/flows/l7/attributes", params=[("name", "secret"), ("name", "status")]
            )
        ).json()
        assert after["values"] == {"status": "set"}
        assert (await client.get("/api/v1/flows/l7")).json()["status"] == "CANCELED"
        again = await client.put("/api/v1/flows/l7/attributes", json={"values": {"secret": None}})
        assert_problem(again, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


async def test_history_pages_oldest_first_with_an_opaque_token(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, "LedgerFlow", "l8")
        for n in range(4):
            await client.post("/api/v1/flows/l8/rpcs/update_status", json={"input": str(n)})
        first = (await client.get("/api/v1/flows/l8/history", params={"pageSize": 2})).json()
        assert [e["eventType"] for e in first["events"]] == ["FLOW_STARTED", "RPC_COMMITTED"]
        rest = (
            await client.get(
                "/api/v1/flows/l8/history",
                params={"pageSize": 10, "pageToken": first["nextPageToken"]},
            )
        ).json()
        assert [e["eventType"] for e in rest["events"]] == ["RPC_COMMITTED"] * 3
        numbers = [e["eventId"] for e in first["events"] + rest["events"]]
        assert numbers == [1, 2, 3, 4, 5]
        assert rest["nextPageToken"] == ""
        bad = await client.get("/api/v1/flows/l8/history", params={"pageToken": "garbage"})
        assert_problem(bad, 400, "INVALID_PAGE_TOKEN")


async def test_list_flow_types_describes_the_registry(make_client: Any) -> None:
    async with make_client(registry()) as client:
        types = (await client.get("/api/v1/flow-types")).json()["flowTypes"]
    ledger = next(t for t in types if t["flowType"] == "LedgerFlow")
    update = next(r for r in ledger["rpcs"] if r["name"] == "update_status")
    assert update["inputSchema"] == {"type": "string"}
    assert update["lockAttributes"] == ["progress/payment", "status"] or sorted(
        update["lockAttributes"]
    ) == ["progress/payment", "status"]
    assert {a["name"]: a["kind"] for a in ledger["attributes"]} == {
        "progress": "AttributeMap",
        "secret": "Attribute",
        "status": "Attribute",
    }
    shop = next(t for t in types if t["flowType"] == "ShopFlow")
    assert shop["startStep"] == "Greet"
    status = next(a for a in shop["attributes"] if a["name"] == "status")
    assert status["index"] == {"type": "KEYWORD", "key": "keyword1"}


async def test_health_ready_and_root_redirect(make_client: Any) -> None:
    async with make_client(registry()) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        root = await client.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/playground/"
        missing = await client.get("/api/v1/nothing-here")
        assert_problem(missing, 404, "NOT_FOUND")


async def test_bodies_over_the_limit_are_refused_from_content_length(make_client: Any) -> None:
    async with make_client(registry(), limits={"max_request_bytes": 2048}) as client:
        big = json.dumps({"flowType": "ShopFlow", "flowId": "big", "input": "x" * 4096})
        response = await client.post(
            "/api/v1/flows", content=big, headers={"content-type": "application/json"}
        )
        assert_problem(response, 413, "PAYLOAD_TOO_LARGE")
        assert_problem(await client.get("/api/v1/flows/big"), 404, "FLOW_NOT_FOUND")

        async def chunks() -> Any:
            for _ in range(8):
                yield b" " * 1024

        streamed = await client.post(
            "/api/v1/flows", content=chunks(), headers={"content-type": "application/json"}
        )
        assert_problem(streamed, 413, "PAYLOAD_TOO_LARGE")


async def test_bearer_token_is_required_when_configured(make_client: Any) -> None:
    async with make_client(registry(), api_token="t0ken") as client:
        denied = await client.get("/api/v1/flow-types")
        assert_problem(denied, 401, "UNAUTHENTICATED")
        allowed = await client.get("/api/v1/flow-types", headers={"Authorization": "Bearer t0ken"})
        assert allowed.status_code == 200
        assert (await client.get("/healthz")).status_code == 200


@REFUSED_EARLY
@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"[" * 50_000 + b"]" * 50_000, id="nested-too-deeply"),
        pytest.param(b'{"flowType": "\xff\xfe"}', id="not-utf-8"),
        pytest.param(b'{"flowType": ', id="malformed"),
    ],
)
async def test_a_body_that_cannot_be_read_as_json_is_one_422_validation_error(
    make_client: Any, content: bytes
) -> None:
    """One rule for every unreadable body, as documented: 422 VALIDATION_ERROR at ``body``."""
    async with make_client(registry()) as client:
        response = await client.post(
            "/api/v1/flows", content=content, headers={"content-type": "application/json"}
        )
    body = assert_problem(response, 422, "VALIDATION_ERROR")
    assert body["errors"][0]["location"].startswith("body"), body
    assert body["errors"][0]["type"] == "json_invalid", body


async def test_text_no_database_can_store_and_absurd_timeouts_are_refused(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        # JSON escapes can carry lone surrogates, which no database can store.
        raw = {"content-type": "application/json"}
        lone = await client.post(
            "/api/v1/flows",
            content=b'{"flowType": "LedgerFlow", "flowId": "bad\\ud800id"}',
            headers=raw,
        )
        body = assert_problem(lone, 422, "VALIDATION_ERROR")
        assert body["errors"][0]["location"] == "body.flowId"
        await start(client, "LedgerFlow", "ok-id")
        instance = await client.put(
            "/api/v1/flows/ok-id/attributes",
            content=b'{"values": {"progress/x\\udc00": "v"}}',
            headers=raw,
        )
        assert assert_problem(instance, 400, "INVALID_ARGUMENT")["field"] == "values"
        value = await client.put(
            "/api/v1/flows/ok-id/attributes",
            content=b'{"values": {"status": "fine \\udc00 text"}}',
            headers=raw,
        )
        # JSON can spell a lone surrogate, but no reader could take it back: refused.
        assert assert_problem(value, 400, "INVALID_ARGUMENT")
        huge = await start(client, "LedgerFlow", "later", options={"timeoutSeconds": 9.7e15})
        assert_problem(huge, 422, "VALIDATION_ERROR")


@REFUSED_EARLY
@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/api/v1/flows", "GET, POST"),
        ("DELETE", "/api/v1/flows/f/attributes", "GET, PUT"),
        ("PUT", "/api/v1/streams/F/f/s/messages", "GET, POST"),
    ],
)
async def test_a_405_names_every_method_of_the_path(
    make_client: Any, method: str, path: str, allowed: str
) -> None:
    async with make_client() as client:
        response = await client.request(method, path)
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == allowed


@REFUSED_EARLY
@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"pageSize": 0}, 400, "INVALID_ARGUMENT"),
        ({"pageSize": 1001}, 400, "INVALID_ARGUMENT"),
        ({"pageToken": "x" * 100}, 400, "INVALID_PAGE_TOKEN"),
        ({"pageToken": "x" * 5000}, 400, "INVALID_PAGE_TOKEN"),
    ],
)
async def test_history_and_channel_pages_refuse_bad_sizes_and_tokens_with_400(
    make_client: Any, params: dict[str, Any], status: int, code: str
) -> None:
    async with make_client() as client:
        started = await client.post(
            "/api/v1/flows", json={"flowType": "ChannelFlow", "flowId": "pages"}
        )
        history = await client.get("/api/v1/flows/pages/history", params=params)
        channel = await client.get(
            "/api/v1/flows/pages/channels/queued-messages/messages", params=params
        )
    assert started.status_code == 201, started.text
    assert_problem(history, status, code)
    assert_problem(channel, status, code)
