"""``dexlite rpc``, ``attributes`` and ``channels`` against a live server, as tables and as
``--json``."""

from __future__ import annotations

import json

import httpx

from tests.cli.running import Dexlite, parsed, table
from tests.support.backends import backend_independent

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")


def test_rpc_prints_each_output_and_the_counter_after_two_increments(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    assert dexlite.ok("rpc", flow_id, "increment", "--input", "2") == "2\n"
    assert dexlite.ok("rpc", flow_id, "increment", "--input", "3") == "5\n"
    assert dexlite.ok("rpc", flow_id, "read_counter") == "5\n"
    assert parsed(dexlite("rpc", flow_id, "read_counter", "--json")) == {"output": 5}


def test_rpc_prints_an_object_output_as_indented_json(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    published = api.post(
        f"/api/v1/flows/{flow_id}/channels/queued-messages/messages", json={"value": "hello"}
    ).json()

    shown = dexlite.ok("rpc", flow_id, "peek_queues")
    assert shown.startswith("{\n  ")
    snapshot = json.loads(shown)
    assert snapshot["queued"]["size"] == 1
    assert snapshot["queued"]["messages"][0]["messageId"] == published["messageId"]
    assert snapshot["queued"]["messages"][0]["value"] == "hello"
    assert snapshot["prioritized"] == {"size": 0, "messages": []}


def test_attributes_prints_named_values_in_order_and_marks_unset_ones(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    rows = table(dexlite.ok("attributes", flow_id, "primitive-channel-handled"))
    assert rows == [{"NAME": "primitive-channel-handled", "VALUE": "(unset)"}]
    assert parsed(dexlite("attributes", flow_id, "primitive-channel-handled", "--json")) == {
        "flowId": flow_id,
        "runId": parsed(dexlite("flows", "describe", flow_id, "--json"))["runId"],
        "values": {},
    }


def test_attributes_reads_the_counter_and_every_value_without_names(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    dexlite.ok("rpc", flow_id, "increment", "--input", "4")
    dexlite.ok("rpc", flow_id, "increment", "--input", "3")
    assert table(dexlite.ok("attributes", flow_id, "counter")) == [
        {"NAME": "counter", "VALUE": "7"}
    ]
    assert table(dexlite.ok("attributes", flow_id)) == [{"NAME": "counter", "VALUE": "7"}]
    assert parsed(dexlite("attributes", flow_id, "counter", "--json"))["values"] == {"counter": 7}


def test_channels_lists_every_channel_with_its_size(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    for value in ("a", "b"):
        api.post(
            f"/api/v1/flows/{flow_id}/channels/queued-messages/messages", json={"value": value}
        ).raise_for_status()

    assert table(dexlite.ok("channels", flow_id)) == [
        {"NAME": "prioritized-messages", "INSTANCE": "-", "SIZE": "0"},
        {"NAME": "queued-messages", "INSTANCE": "-", "SIZE": "2"},
    ]
    body = parsed(dexlite("channels", flow_id, "--json"))
    assert body["channels"] == [
        {"name": "prioritized-messages", "instance": None, "size": 0},
        {"name": "queued-messages", "instance": None, "size": 2},
    ]
