"""Channels over HTTP: listChannels, listChannelMessages, publishToChannel, deleteChannelMessage,
invokeRpc's loadChannelMapInstances, bad input, and a wait that survives a SIGKILL."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx

from engine import (
    Channel,
    ChannelMap,
    Context,
    Flow,
    Registry,
    Step,
    StepDecision,
    StepList,
    Wait,
    go_to,
    rpc,
)
from engine.testing import settle
from tests.server import ServerProcess
from tests.support.problems import assert_problem
from tests.support.waiting import eventually


class Tally(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.votes.for_n(2))

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Tally)


class PollFlow(Flow[None]):
    votes = Channel("votes", int)
    ballots = ChannelMap("ballots", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Tally())

    @rpc
    def read_ballots(self, context: Context, input: str) -> list[str]:
        return [m.value for m in self.ballots.pending_messages(context, input)]


def registry() -> Registry:
    return Registry([PollFlow()])


BASE = "/api/v1/flows/poll"


async def started(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/v1/flows", json={"flowType": "PollFlow", "flowId": "poll", "input": None}
    )
    assert response.status_code == 201, response.text


async def publish(client: httpx.AsyncClient, channel: str, **body: Any) -> httpx.Response:
    return await client.post(f"{BASE}/channels/{channel}/messages", json=body)


async def test_publish_list_and_consume_over_http(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await started(client)
        first = await publish(client, "votes", value=1)
        assert first.status_code == 201
        message_id = first.json()["messageId"]
        assert uuid.UUID(message_id).version == 7
        for box, text in (("north", "yes"), ("south", "no"), ("north", "maybe")):
            assert (await publish(client, "ballots", value=text, instance=box)).status_code == 201
        listed = (await client.get(f"{BASE}/channels")).json()
        run_id = (await client.get("/api/v1/flows/poll")).json()["runId"]
        assert listed == {
            "flowId": "poll",
            "runId": run_id,
            "channels": [
                {"name": "ballots", "instance": "north", "size": 2},
                {"name": "ballots", "instance": "south", "size": 1},
                {"name": "votes", "instance": None, "size": 1},
            ],
        }
        pending = (await client.get(f"{BASE}/channels/votes/messages")).json()
        assert [(m["messageId"], m["value"]) for m in pending["messages"]] == [(message_id, 1)]
        assert pending["nextPageToken"] == ""
        # A second vote meets the Step's for_n(2): both are consumed in one commit.
        assert (await publish(client, "votes", value=2)).status_code == 201
        await settle(served.engine)
        assert (await client.get(f"{BASE}/channels/votes/messages")).json()["messages"] == []
        north = await client.get(
            f"{BASE}/channels/ballots/messages", params={"instance": "north", "pageSize": 1}
        )
        page = north.json()
        assert [m["value"] for m in page["messages"]] == ["yes"]
        rest = await client.get(
            f"{BASE}/channels/ballots/messages",
            params={"instance": "north", "pageToken": page["nextPageToken"]},
        )
        assert [m["value"] for m in rest.json()["messages"]] == ["maybe"]


async def test_delete_is_204_then_404_for_a_message_no_longer_pending(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await started(client)
        message_id = (await publish(client, "votes", value=7)).json()["messageId"]
        url = f"{BASE}/channels/votes/messages/{message_id}"
        deleted = await client.delete(url)
        assert deleted.status_code == 204 and deleted.content == b""
        assert_problem(await client.delete(url), 404, "CHANNEL_MESSAGE_NOT_FOUND")
        assert (await client.get(f"{BASE}/channels")).json()["channels"][-1]["size"] == 0


async def test_invoke_rpc_loads_channel_map_instances_named_in_its_options(
    make_app: Any,
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await started(client)
        await publish(client, "ballots", value="yes", instance="north")
        url = f"{BASE}/rpcs/read_ballots"
        unloaded = await client.post(url, json={"input": "north"})
        body = assert_problem(unloaded, 500, "RPC_HANDLER_ERROR")
        assert body["errorType"] == "ChannelMessagesNotLoadedError"
        options = {"loadChannelMapInstances": ["ballots/north"]}
        loaded = await client.post(url, json={"input": "north", "options": options})
        assert loaded.json() == {"output": ["yes"]}
        bad = await client.post(
            url, json={"input": "north", "options": {"loadChannelMapInstances": ["votes/x"]}}
        )
        assert "not a ChannelMap" in assert_problem(bad, 400, "INVALID_ARGUMENT")["detail"]
        assert_problem(
            await client.post(
                url, json={"input": "north", "options": {"loadChannelMapInstances": ["ballots"]}}
            ),
            400,
            "INVALID_ARGUMENT",
        )


async def test_bad_channel_input_is_a_problem_naming_the_field_and_changes_nothing(
    make_app: Any,
) -> None:
    async with make_app(registry()) as served:
        client = served.client
        await started(client)
        problem = assert_problem(await publish(client, "ghost", value=1), 400, "INVALID_ARGUMENT")
        assert problem["field"] == "channel"
        wrong = assert_problem(
            await publish(client, "votes", value="many"), 400, "INVALID_ARGUMENT"
        )
        assert wrong["field"] == "value"
        extra = await publish(client, "votes", value=1, instance="x")
        assert assert_problem(extra, 400, "INVALID_ARGUMENT")["field"] == "instance"
        missing = await publish(client, "ballots", value="yes")
        assert assert_problem(missing, 400, "INVALID_ARGUMENT")["field"] == "instance"
        slash = await publish(client, "ballots", value="yes", instance="a/b")
        assert assert_problem(slash, 400, "INVALID_ARGUMENT")["field"] == "instance"
        malformed = await client.delete(f"{BASE}/channels/votes/messages/not-an-id")
        assert assert_problem(malformed, 400, "INVALID_ARGUMENT")["field"] == "messageId"
        assert_problem(
            await client.post(f"{BASE}/channels/votes/messages", json={}), 400, "INVALID_ARGUMENT"
        )
        token = await client.get(f"{BASE}/channels/votes/messages", params={"pageToken": "x"})
        assert_problem(token, 400, "INVALID_PAGE_TOKEN")
        size = await client.get(f"{BASE}/channels/votes/messages", params={"pageSize": 0})
        assert_problem(size, 400, "INVALID_ARGUMENT")  # as on search and Streams (§6)
        listed = (await client.get(f"{BASE}/channels")).json()["channels"]
        assert listed == [{"name": "votes", "instance": None, "size": 0}]


async def test_channels_of_a_missing_or_closed_flow(make_app: Any) -> None:
    async with make_app(registry()) as served:
        client = served.client
        assert_problem(await client.get(f"{BASE}/channels"), 404, "FLOW_NOT_FOUND")
        assert_problem(await publish(client, "votes", value=1), 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
        await started(client)
        await publish(client, "votes", value=1)
        assert (await client.post(f"{BASE}/stop", json={})).status_code == 202
        # A closed run's queues stay readable; it takes no more messages.
        assert (await client.get(f"{BASE}/channels")).json()["channels"][0]["size"] == 1
        assert_problem(await publish(client, "votes", value=2), 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
        pending = (await client.get(f"{BASE}/channels/votes/messages")).json()["messages"]
        gone = await client.delete(f"{BASE}/channels/votes/messages/{pending[0]['messageId']}")
        assert_problem(gone, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


async def test_a_step_waiting_on_a_channel_survives_a_sigkill(tmp_path: Path) -> None:
    factory = "tests.support.channel_app:create"
    server = ServerProcess(tmp_path, factory=factory).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            started = await client.post(
                "/api/v1/flows", json={"flowType": "OrderDeskFlow", "flowId": "desk"}
            )
            assert started.status_code == 201

            async def waiting() -> bool:
                events = (await client.get("/api/v1/flows/desk/history")).json()["events"]
                return any(e["eventType"] == "STEP_WAITING" for e in events)

            await eventually(waiting, what="the Step's wait to commit")
    finally:
        server.kill()
    restarted = ServerProcess(tmp_path, factory=factory).start()
    try:
        async with httpx.AsyncClient(base_url=restarted.url, timeout=30) as client:
            posted = await client.post(
                "/api/v1/flows/desk/channels/orders/messages", json={"value": "espresso"}
            )
            assert posted.status_code == 201
            result = (
                await client.get("/api/v1/flows/desk/result", params={"waitSeconds": 20})
            ).json()
    finally:
        restarted.stop()
    assert result["status"] == "COMPLETED"
    assert result["completions"][0]["output"] == ["espresso"]
