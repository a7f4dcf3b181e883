"""The Streams REST contract (DESIGN.md §5): writeStream, listStreamMessages, readStream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
from pydantic import BaseModel

from engine import (
    Context,
    Flow,
    Registry,
    Step,
    StepDecision,
    StepList,
    Stream,
    graceful_complete,
    rpc,
)
from engine.testing import settle, waiting_calls
from tests.support.problems import assert_problem
from tests.support.waiting import eventually

PROBLEM = "application/problem+json"


class Point(BaseModel):
    x: int
    at: datetime


class Report(Step[str]):
    async def execute(self, context: Context, input: str) -> StepDecision:
        self.flow.progress.write(context, f"working on {input}")
        return graceful_complete("reported")


class NewsFlow(Flow[str]):
    progress = Stream("progress", str)
    points = Stream("points", Point)
    tiny = Stream("tiny", str, stream_capacity_bytes=1000)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Report())

    @rpc
    def shout(self, context: Context) -> None:
        self.progress.write(context, "from an RPC")


def registry() -> Registry:
    return Registry([NewsFlow()])


BASE = "/api/v1/streams/NewsFlow"


def url(flow_id: str = "f1", stream: str = "progress", what: str = "messages") -> str:
    return f"{BASE}/{flow_id}/{stream}/{what}"


async def post(
    client: httpx.AsyncClient,
    value: Any,
    *,
    flow_id: str = "f1",
    stream: str = "progress",
    source: str = "tester",
) -> httpx.Response:
    return await client.post(url(flow_id, stream), json={"source": source, "value": value})


async def test_write_returns_201_with_a_resume_token_read_back_by_read_stream(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        written = await post(client, "hello", source="cli#1")
        assert written.status_code == 201
        token = written.json()["resumeToken"]
        read = await client.get(url(what="next"))
        assert read.status_code == 200
        message = read.json()["message"]
        assert message["value"] == "hello"
        assert message["resumeToken"] == token
        assert message["source"] == "cli#1"
        assert datetime.fromisoformat(message["createdAt"]).tzinfo is not None


async def test_clients_write_when_the_flow_is_missing_or_closed(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        assert (await post(client, "to nobody", flow_id="missing")).status_code == 201
        started = await client.post(
            "/api/v1/flows", json={"flowType": "NewsFlow", "flowId": "closed", "input": "x"}
        )
        assert started.status_code == 201
        result = await client.get("/api/v1/flows/closed/result", params={"waitSeconds": 10})
        assert result.json()["status"] == "COMPLETED"
        assert (await post(client, "after close", flow_id="closed")).status_code == 201
        listed = (await client.get(url("closed"))).json()["messages"]
        assert [m["value"] for m in listed] == ["after close", "working on x"]
        # Step messages carry the source #<stepExecutionId>.
        step_id = result.json()["completions"][0]["stepExecutionId"]
        assert listed[1]["source"] == f"#{step_id}"


async def test_write_needs_a_non_empty_source(make_client: Callable[..., Any]) -> None:
    async with make_client(registry()) as client:
        body = assert_problem(await post(client, "x", source=""), 400, "INVALID_ARGUMENT")
        assert body["field"] == "source"
        missing = await client.post(url(), json={"value": "x"})
        assert_problem(missing, 422, "VALIDATION_ERROR")
        # A source may repeat and contain '#': each call appends.
        for _ in range(2):
            assert (await post(client, "x", source="#same#")).status_code == 201
        assert len((await client.get(url())).json()["messages"]) == 2


async def test_unknown_flow_type_or_stream_is_404(make_client: Callable[..., Any]) -> None:
    async with make_client(registry()) as client:
        for method, what in [
            ("POST", "messages"),
            ("GET", "messages"),
            ("GET", "next"),
            ("GET", "events"),
        ]:
            body = {"source": "s", "value": "v"} if method == "POST" else None
            nope_type = await client.request(
                method, f"/api/v1/streams/Nope/f1/progress/{what}", json=body
            )
            assert_problem(nope_type, 404, "FLOW_TYPE_NOT_FOUND")
            nope_stream = await client.request(method, url(stream="nope", what=what), json=body)
            assert_problem(nope_stream, 404, "STREAM_NOT_FOUND")


async def test_values_are_validated_against_the_stream_type_and_returned_as_json(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        bad = await post(client, {"x": "not a number"}, stream="points")
        assert_problem(bad, 400, "INVALID_ARGUMENT")
        assert_problem(await post(client, 42), 400, "INVALID_ARGUMENT")
        ok = await post(client, {"x": 3, "at": "2030-01-02T03:04:05Z"}, stream="points")
        assert ok.status_code == 201
        message = (await client.get(url(stream="points", what="next"))).json()["message"]
        assert message["value"] == {"x": 3, "at": "2030-01-02T03:04:05Z"}


async def test_list_pages_newest_first_until_an_empty_next_token(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        for i in range(5):
            await post(client, f"m{i}")
        pages, token = [], ""
        while True:
            response = await client.get(url(), params={"pageSize": 2, "beforePageToken": token})
            assert response.status_code == 200
            page = response.json()
            pages.append([m["value"] for m in page["messages"]])
            token = page["nextPageToken"]
            if not token:
                break
        assert pages == [["m4", "m3"], ["m2", "m1"], ["m0"]]


async def test_page_size_outside_range_is_400_never_reduced(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry(), stream={"max_read_messages": 5}) as client:
        await post(client, "m")
        for size in (0, -1, 6, 1000):
            response = await client.get(url(), params={"pageSize": size})
            assert assert_problem(response, 400, "INVALID_ARGUMENT")["field"] == "pageSize"
        assert (await client.get(url(), params={"pageSize": 5})).status_code == 200
        assert_problem(
            await client.get(url(), params={"pageSize": "many"}), 422, "VALIDATION_ERROR"
        )
    async with make_client(registry()) as client:
        assert (await client.get(url(), params={"pageSize": 1000})).status_code == 200
        assert_problem(await client.get(url(), params={"pageSize": 1001}), 400, "INVALID_ARGUMENT")


async def test_page_token_is_bound_to_its_flow_id_and_stream(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        for i in range(3):
            await post(client, f"m{i}")
        token = (await client.get(url(), params={"pageSize": 1})).json()["nextPageToken"]
        for other in (url("f2"), url(stream="tiny")):
            response = await client.get(other, params={"pageSize": 1, "beforePageToken": token})
            assert_problem(response, 400, "INVALID_PAGE_TOKEN")
        garbage = await client.get(url(), params={"beforePageToken": "%%%"})
        assert_problem(garbage, 400, "INVALID_PAGE_TOKEN")


async def test_read_stream_resumes_with_tokens_and_answers_null_when_the_wait_ends(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        empty = await client.get(url(what="next"), params={"waitSeconds": 0.1})
        assert empty.status_code == 200 and empty.json() == {"message": None}
        await post(client, "a")
        await post(client, "b")
        first = (await client.get(url(what="next"))).json()["message"]
        second = (
            await client.get(url(what="next"), params={"resumeToken": first["resumeToken"]})
        ).json()
        assert second["message"]["value"] == "b"
        last = await client.get(
            url(what="next"),
            params={"resumeToken": second["message"]["resumeToken"], "waitSeconds": 0.1},
        )
        assert last.json() == {"message": None}
        for wait in (-1, 61):
            bad = await client.get(url(what="next"), params={"waitSeconds": wait})
            assert_problem(bad, 400, "INVALID_ARGUMENT")
        wrong = await client.get(
            url("f2", what="next"), params={"resumeToken": first["resumeToken"]}
        )
        assert_problem(wrong, 400, "INVALID_ARGUMENT")


async def test_long_poll_returns_soon_after_a_write_not_when_the_wait_ends(
    make_app: Callable[..., Any],
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        started = time.monotonic()
        reader = asyncio.create_task(
            client.get(url(what="next"), params={"waitSeconds": 30}, timeout=60)
        )
        await eventually(
            lambda: waiting_calls(served.engine).stream_reads == 1 or reader.done(),
            what="the reader to wait",
        )
        assert not reader.done()  # it is waiting: the Stream is empty
        # It can only answer with this message by being woken: it was written after the wait.
        assert (await post(client, "wake up")).status_code == 201
        response = await asyncio.wait_for(reader, 25)
        assert response.json()["message"]["value"] == "wake up"
        assert time.monotonic() - started < 25  # returned long before its 30 s wait ended


async def test_at_capacity_a_write_gets_429_and_a_retry_succeeds(
    make_app: Callable[..., Any],
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        # tiny holds 1000 bytes: 800 stays under the 900-byte trim trigger.
        filler = "x" * (800 - 2 - len("f1") - len("tester") - 96)
        assert (await post(client, filler, stream="tiny")).status_code == 201
        big = "y" * 200
        rejected = await post(client, big, stream="tiny")
        body = assert_problem(rejected, 429, "RESOURCE_EXHAUSTED")
        assert body["retryable"] is True
        # The rejection asked trimming for room: once the trim job is done, a retry fits.
        await settle(served.engine)
        retried = await post(client, big, stream="tiny")
        assert retried.status_code == 201, retried.text
        never = await post(client, "z" * 1000, stream="tiny")
        assert assert_problem(never, 429, "RESOURCE_EXHAUSTED")["retryable"] is False


async def test_disabled_store_answers_409_failed_precondition(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry(), stream={"backend": "disabled"}) as client:
        assert_problem(await post(client, "x"), 409, "FAILED_PRECONDITION")
        assert_problem(await client.get(url()), 409, "FAILED_PRECONDITION")
        assert_problem(await client.get(url(what="next")), 409, "FAILED_PRECONDITION")
        assert_problem(await client.get(url(what="events")), 409, "FAILED_PRECONDITION")
        # Step writes are dropped without failing the Step.
        await client.post(
            "/api/v1/flows", json={"flowType": "NewsFlow", "flowId": "f1", "input": "x"}
        )
        result = await client.get("/api/v1/flows/f1/result", params={"waitSeconds": 10})
        assert result.json()["status"] == "COMPLETED"


async def test_rpc_writing_through_its_context_is_a_handler_error(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        await client.post(
            "/api/v1/flows", json={"flowType": "NewsFlow", "flowId": "f1", "input": "x"}
        )
        response = await client.post("/api/v1/flows/f1/rpcs/shout", json={})
        body = assert_problem(response, 500, "RPC_HANDLER_ERROR")
        assert "RPC handlers cannot write Streams" in body["detail"]


async def test_stream_operations_are_documented_in_openapi(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry()) as client:
        spec = (await client.get("/openapi.json")).json()
        flow_types = (await client.get("/api/v1/flow-types")).json()["flowTypes"]
    prefix = "/api/v1/streams/{flowType}/{flowId}/{stream}"
    expected = {
        ("post", "/messages"): ("writeStream", "201", {"400", "404", "409", "422", "429"}),
        ("get", "/messages"): ("listStreamMessages", "200", {"400", "404", "409", "422"}),
        ("get", "/next"): ("readStream", "200", {"400", "404", "409", "422"}),
        ("get", "/events"): ("followStream", "200", {"400", "404", "409", "422"}),
    }
    for (method, suffix), (operation_id, success, problems) in expected.items():
        operation = spec["paths"][prefix + suffix][method]
        assert operation["operationId"] == operation_id
        assert operation["summary"] and operation["description"]
        assert success in operation["responses"]
        for status in problems:
            assert PROBLEM in operation["responses"][status]["content"]
    events = spec["paths"][prefix + "/events"]["get"]["responses"]["200"]["content"]
    assert "text/event-stream" in events
    streams = {s["name"] for s in flow_types[0]["streams"]}
    assert streams == {"progress", "points", "tiny"}


async def test_a_whitespace_source_is_accepted_and_a_list_without_page_size_fits_a_small_max(
    make_client: Callable[..., Any],
) -> None:
    async with make_client(registry(), stream={"max_read_messages": 2}) as client:
        written = [await post(client, f"m{i}", source=" ") for i in range(3)]
        listed = await client.get(url())
        empty = await client.post(url(), json={"source": "", "value": "x"})
    assert [w.status_code for w in written] == [201, 201, 201]
    assert listed.status_code == 200
    assert [(m["value"], m["source"]) for m in listed.json()["messages"]] == [
        ("m2", " "),
        ("m1", " "),
    ]
    assert_problem(empty, 400, "INVALID_ARGUMENT")
