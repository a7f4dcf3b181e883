"""WaitForAttributeMatch through HTTP (issue 3; seed 002 "Attributes", "Hard-delete Attributes")."""

from __future__ import annotations

import asyncio
import time
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
    StepMovement,
    dead_end,
    graceful_complete,
    rpc,
)
from engine.testing import waiting_calls
from tests.conftest import ServedApp
from tests.support.problems import assert_problem
from tests.support.waiting import eventually

PROBLEM = "application/problem+json"


class Gate(Step[None]):
    """Waits until the test opens it, then writes ``count`` in its commit."""

    opened: asyncio.Event

    async def execute(self, context: Context, input: None) -> StepDecision:
        await Gate.opened.wait()
        self.flow.count.set(context, 42)
        return dead_end()


class Finish(Step[None]):
    """Writes the final status and completes the Flow in the same commit (the seed's Step)."""

    def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.status.set(context, "completed")
        return graceful_complete("done")


class MatchFlow(Flow[None]):
    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    count = Attribute("count", int)
    ratio = Attribute("ratio", float)
    flag = Attribute("flag", bool)
    progress = AttributeMap("progress", str)
    details = Attribute("details", dict[str, str])
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Gate(), Finish())

    @rpc
    def set_status(self, context: Context, input: str) -> RPCResult[None]:
        self.status.set(context, input)
        return RPCResult(None)

    @rpc
    def set_count(self, context: Context, input: int) -> RPCResult[None]:
        self.count.set(context, input)
        return RPCResult(None)

    @rpc
    def set_progress(self, context: Context, input: dict[str, str]) -> RPCResult[None]:
        for instance, value in input.items():
            self.progress.set(context, instance, value)
        return RPCResult(None)

    @rpc
    def open_gate(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Gate, None),))

    @rpc
    def finish(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Finish, None),))


def registry() -> Registry:
    return Registry([MatchFlow()])


async def start(client: httpx.AsyncClient, flow_id: str = "f", **initial: Any) -> None:
    response = await client.post(
        "/api/v1/flows",
        json={
            "flowType": "MatchFlow",
            "flowId": flow_id,
            "options": {"initialAttributes": initial},
        },
    )
    assert response.status_code == 201, response.text


async def match(client: httpx.AsyncClient, flow_id: str = "f", **body: Any) -> httpx.Response:
    return await client.post(f"/api/v1/flows/{flow_id}/attribute-matches", json=body)


async def invoke(
    client: httpx.AsyncClient, name: str, input: Any = None, flow_id: str = "f"
) -> None:
    response = await client.post(f"/api/v1/flows/{flow_id}/rpcs/{name}", json={"input": input})
    assert response.status_code == 200, response.text


def pending_matches(served: ServedApp) -> int:
    """Return how many match calls are registered and not answered yet.

    A commit offers its writes to them before the call that made it returns, so right after a
    write this count says whether the write answered a waiter.
    """
    return waiting_calls(served.engine).attribute_matches


async def waiting(served: ServedApp, **body: Any) -> asyncio.Task[httpx.Response]:
    """Start a match call; return once it has registered, so every later commit reaches it."""
    task = asyncio.create_task(match(served.client, **body))
    await eventually(
        lambda: pending_matches(served) == 1 or task.done(), what="the match call to register"
    )
    assert not task.done(), task.result().text
    return task


async def test_match_returns_at_once_when_the_current_value_already_matches(
    make_client: Any,
) -> None:
    async with make_client(registry()) as client:
        await start(client, status="ready")
        began = time.monotonic()
        response = await match(client, name="status", operator="EQ", value="ready", waitSeconds=30)
        assert response.status_code == 200
        assert response.json() == {"matched": True, "value": "ready"}
        assert time.monotonic() - began < 5


async def test_match_wakes_when_an_rpc_commits_a_matching_value(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client, status="new")
        task = await waiting(served, name="status", operator="EQ", value="paid", waitSeconds=30)
        await invoke(client, "set_status", "shipped")
        assert pending_matches(served) == 1  # that commit did not answer the call
        began = time.monotonic()
        await invoke(client, "set_status", "paid")
        response = await asyncio.wait_for(task, 5)
        assert response.json() == {"matched": True, "value": "paid"}
        assert time.monotonic() - began < 5


async def test_match_wakes_when_a_step_commits_a_matching_value(make_app: Any) -> None:
    Gate.opened = asyncio.Event()
    async with make_app(registry()) as served:
        client = served.client
        await start(client)
        await invoke(client, "open_gate")
        task = await waiting(served, name="count", operator="GE", value=40, waitSeconds=30)
        Gate.opened.set()
        response = await asyncio.wait_for(task, 5)
        assert response.json() == {"matched": True, "value": 42}


async def test_match_wakes_when_set_attributes_commits_a_matching_value(
    make_app: Any,
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client)
        task = await waiting(served, name="flag", operator="EQ", value=True, waitSeconds=30)
        response = await client.put("/api/v1/flows/f/attributes", json={"values": {"flag": True}})
        assert response.status_code == 200
        assert (await asyncio.wait_for(task, 5)).json() == {"matched": True, "value": True}


async def test_match_on_a_map_instance_ignores_other_instances(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client)
        task = await waiting(
            served,
            name="progress",
            instance="payment",
            operator="EQ",
            value="authorized",
            waitSeconds=30,
        )
        await invoke(client, "set_progress", {"shipping": "authorized"})
        assert pending_matches(served) == 1  # that commit did not answer the call
        await invoke(client, "set_progress", {"payment": "authorized"})
        assert (await asyncio.wait_for(task, 5)).json() == {"matched": True, "value": "authorized"}


async def test_ordered_operators_compare_int_and_double_values(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client, count=10, ratio=0.5)
        cases = [
            ("count", "GT", 9, True),
            ("count", "GT", 10, False),
            ("count", "GE", 10, True),
            ("count", "LT", 11, True),
            ("count", "LT", 10, False),
            ("count", "LE", 10, True),
            ("count", "GT", 9.5, True),
            ("ratio", "LT", 1, True),
            ("ratio", "GE", 0.75, False),
            ("count", "EQ", 10, True),
            ("count", "NE", 10, False),
            ("ratio", "EQ", 0.5, True),
        ]
        for name, operator, value, matched in cases:
            response = await match(client, name=name, operator=operator, value=value)
            assert response.status_code == 200, response.text
            assert response.json()["matched"] is matched, (name, operator, value)
        task = await waiting(served, name="count", operator="GT", value=100, waitSeconds=30)
        await invoke(client, "set_count", 50)
        assert pending_matches(served) == 1  # that commit did not answer the call
        await invoke(client, "set_count", 101)
        assert (await asyncio.wait_for(task, 5)).json() == {"matched": True, "value": 101}


async def test_ne_matches_another_value_but_a_missing_value_never_matches(
    make_app: Any,
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client, status="a")
        response = await match(client, name="count", operator="NE", value=1, waitSeconds=0.2)
        assert response.json() == {"matched": False, "value": None}
        response = await match(client, name="progress", instance="x", operator="NE", value="y")
        assert response.json() == {"matched": False, "value": None}
        task = await waiting(served, name="status", operator="NE", value="a", waitSeconds=30)
        await invoke(client, "set_status", "b")
        assert (await asyncio.wait_for(task, 5)).json() == {"matched": True, "value": "b"}


async def test_match_ends_with_matched_false_when_wait_seconds_run_out(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, status="a")
        began = time.monotonic()
        response = await match(client, name="status", operator="EQ", value="b", waitSeconds=0.3)
        elapsed = time.monotonic() - began
        assert response.status_code == 200
        assert response.json() == {"matched": False, "value": None}
        assert 0.25 <= elapsed < 5
        response = await match(client, name="status", operator="EQ", value="b")  # default 0
        assert response.json() == {"matched": False, "value": None}


async def test_match_on_a_closed_or_missing_flow_is_not_found(make_client: Any) -> None:
    async with make_client(registry()) as client:
        response = await match(client, "missing", name="status", operator="EQ", value="a")
        assert_problem(response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
        await start(client, status="a")
        assert (await client.post("/api/v1/flows/f/stop", json={})).status_code == 202
        response = await match(client, name="status", operator="EQ", value="a")
        assert_problem(response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


async def test_a_match_committed_with_the_flow_completion_is_returned(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client, status="working")
        task = await waiting(
            served, name="status", operator="EQ", value="completed", waitSeconds=30
        )
        await invoke(client, "finish")
        assert (await asyncio.wait_for(task, 5)).json() == {"matched": True, "value": "completed"}


async def test_a_flow_closing_without_a_match_ends_the_wait_as_not_found(
    make_app: Any,
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await start(client, status="working")
        task = await waiting(served, name="status", operator="EQ", value="never", waitSeconds=30)
        assert (await client.post("/api/v1/flows/f/stop", json={})).status_code == 202
        response = await asyncio.wait_for(task, 5)
        assert_problem(response, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


async def test_invalid_match_requests_are_invalid_argument(make_client: Any) -> None:
    async with make_client(registry()) as client:
        await start(client, status="a", count=1, secret="s3cr3t", details={"a": "b"})
        bad_bodies: list[dict[str, Any]] = [
            {"name": "secret", "operator": "EQ", "value": "s3cr3t"},  # hard-delete
            {"name": "details", "operator": "EQ", "value": {"a": "b"}},  # object value
            {"name": "status", "operator": "EQ", "value": ["a"]},  # list value
            {"name": "status", "operator": "GT", "value": "a"},  # GT on a string
            {"name": "count", "operator": "GT", "value": "1"},  # GT with a string value
            {"name": "flag", "operator": "LE", "value": True},  # LE on a bool
            {"name": "count", "operator": "EQ", "value": "abc"},  # not an int
            {"name": "count", "operator": "EQ", "value": None},  # null never matches
            {"name": "nope", "operator": "EQ", "value": 1},  # unknown Attribute
            {"name": "progress", "operator": "EQ", "value": "x"},  # map without instance
            {"name": "status", "instance": "x", "operator": "EQ", "value": "a"},
            {"name": "status", "operator": "EQ", "value": "a", "waitSeconds": 61},
            {"name": "status", "operator": "EQ", "value": "a", "waitSeconds": -1},
        ]
        for body in bad_bodies:
            response = await match(client, **body)
            assert_problem(response, 400, "INVALID_ARGUMENT")
        for raw in (
            '{"name": "count", "operator": "EQ", "value": NaN}',
            '{"name": "count", "operator": "GT", "value": Infinity}',
            '{"name": "ratio", "operator": "LT", "value": -Infinity}',
        ):
            response = await client.post(
                "/api/v1/flows/f/attribute-matches",
                content=raw,
                headers={"content-type": "application/json"},
            )
            assert_problem(response, 400, "INVALID_ARGUMENT")
        response = await match(client, name="status", operator="LIKE", value="a")
        assert_problem(response, 422, "VALIDATION_ERROR")
