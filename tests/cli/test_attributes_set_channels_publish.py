"""``dexlite attributes set`` and ``dexlite channels publish`` against a live server, and the
groups they joined: ``attributes get`` and ``channels list``, with the old forms
``attributes ID [NAME]...`` and ``channels ID`` still working."""

from __future__ import annotations

import subprocess

import httpx

from tests.cli.running import Dexlite, parsed, record, table
from tests.support.backends import backend_independent
from tests.support.waiting import wait_until

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")

STATUS = "primitive-attribute-status"
PAYMENT = "primitive-attribute-progress/payment"
API_KEY = "primitive-attribute-model-api-key"


def _fails(done: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    """Assert ``done`` exited with ``status``, printed nothing, and ``line`` on stderr."""
    assert (done.returncode, done.stdout, done.stderr) == (status, "", line + "\n"), done


def test_attributes_set_writes_values_and_prints_the_run_and_what_it_wrote(
    dexlite: Dexlite, flow_id: str
) -> None:
    run_id = parsed(dexlite("flows", "start", "CounterFlow", flow_id, "--json"))["runId"]
    shown = dexlite.ok("attributes", "set", flow_id, "counter=41")
    assert record(shown) == {"Flow ID": flow_id, "Run ID": run_id}
    assert table(shown) == [{"NAME": "counter", "VALUE": "41"}]
    # The RPC reads what the CLI wrote.
    assert dexlite.ok("rpc", flow_id, "increment", "--input", "1") == "42\n"

    assert parsed(dexlite("attributes", "set", flow_id, "counter=7", "--json")) == {
        "flowId": flow_id,
        "runId": run_id,
    }
    assert table(dexlite.ok("attributes", "get", flow_id, "counter")) == [
        {"NAME": "counter", "VALUE": "7"}
    ]


def _past_its_wait_for(api: httpx.Client, flow_id: str) -> None:
    """Wait until the Flow's Step has begun its Timer wait: its ``wait_for`` holds the locks of
    ``status`` and ``progress/payment`` until then, and a write of them meanwhile is a lock
    conflict (what a loaded machine showed)."""

    def waiting() -> bool:
        steps = api.get(f"/api/v1/flows/{flow_id}/pending-steps").json()["steps"]
        return [s["phase"] for s in steps] == ["EXECUTE"]

    wait_until(waiting, what=f"the Step of {flow_id} to begin its Timer wait")


def test_attributes_set_writes_several_names_and_map_instances_and_null_erases(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "AttributeFlow", flow_id, "--input", '{"waitSeconds": 600}')
    _past_its_wait_for(api, flow_id)
    written = dexlite.ok(
        "attributes", "set", flow_id, f'{STATUS}="paid"', f'{PAYMENT}="half"', f'{API_KEY}="sk-1"'
    )
    assert table(written) == [
        {"NAME": STATUS, "VALUE": '"paid"'},
        {"NAME": PAYMENT, "VALUE": '"half"'},
        {"NAME": API_KEY, "VALUE": '"sk-1"'},
    ]
    assert table(dexlite.ok("attributes", flow_id, STATUS, PAYMENT, API_KEY)) == [
        {"NAME": STATUS, "VALUE": '"paid"'},
        {"NAME": PAYMENT, "VALUE": '"half"'},
        {"NAME": API_KEY, "VALUE": '"sk-1"'},
    ]

    erased = dexlite.ok("attributes", "set", flow_id, f"{API_KEY}=null", f"{PAYMENT}=null")
    assert table(erased) == [
        {"NAME": API_KEY, "VALUE": "(erased)"},
        {"NAME": PAYMENT, "VALUE": "(erased)"},
    ]
    assert table(dexlite.ok("attributes", "get", flow_id, STATUS, PAYMENT, API_KEY)) == [
        {"NAME": STATUS, "VALUE": '"paid"'},
        {"NAME": PAYMENT, "VALUE": "(unset)"},
        {"NAME": API_KEY, "VALUE": "(unset)"},
    ]


def test_attributes_set_sends_the_run_id_it_is_given(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    run_id = api.get(f"/api/v1/flows/{flow_id}").json()["runId"]
    assert record(dexlite.ok("attributes", "set", flow_id, "counter=3", "--run-id", run_id)) == {
        "Flow ID": flow_id,
        "Run ID": run_id,
    }
    other = dexlite("attributes", "set", flow_id, "counter=1", "--run-id", "no-such-run")
    assert (other.returncode, other.stdout) == (3, ""), other
    assert other.stderr.startswith("error: FLOW_NOT_ACTIVE_OR_NOT_FOUND: ")


def test_attributes_set_on_a_closed_run_exits_3_naming_what_is_still_allowed(
    dexlite: Dexlite, flow_id: str
) -> None:
    args = ("AttributeFlow", flow_id, "--input", '{"waitSeconds": 0}', "--json")
    assert dexlite("flows", "execute", *args).returncode == 0
    run_id = parsed(dexlite("flows", "describe", flow_id, "--json"))["runId"]
    _fails(
        dexlite("attributes", "set", flow_id, f'{STATUS}="late"'),
        3,
        f"error: FLOW_NOT_ACTIVE_OR_NOT_FOUND: Flow {flow_id} run {run_id} is closed; only the"
        " erase (null) of stored hard-delete values is allowed",
    )


def test_attributes_set_refuses_bad_arguments_before_any_request(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    _fails(
        dexlite("attributes", "set", flow_id, "counter=hello"),
        2,
        "error: INVALID_ARGUMENT: the value of counter must be JSON; a string is written"
        " counter='\"hello\"'",
    )
    _fails(
        dexlite("attributes", "set", flow_id, "counter"),
        2,
        "error: INVALID_ARGUMENT: 'counter' is not NAME=JSON (e.g. counter=5, or"
        " status='\"done\"'; null erases)",
    )
    _fails(
        dexlite("attributes", "set", flow_id, "=5"),
        2,
        "error: INVALID_ARGUMENT: '=5' is not NAME=JSON (e.g. counter=5, or"
        " status='\"done\"'; null erases)",
    )
    # One bad argument and nothing is written, not even the good ones before it.
    assert dexlite("attributes", "set", flow_id, "counter=9", "counter={").returncode == 2
    assert table(dexlite.ok("attributes", flow_id)) == []
    missing = dexlite("attributes", "set", flow_id)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "Usage: dexlite attributes set" in missing.stderr


def test_attributes_set_of_an_undeclared_name_exits_2(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    _fails(
        dexlite("attributes", "set", flow_id, "nope=1"),
        2,
        "error: INVALID_ARGUMENT: values: Flow type CounterFlow declares no Attribute or"
        " AttributeMap named 'nope'",
    )


def test_attributes_get_is_the_old_form_under_its_own_name(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    dexlite.ok("rpc", flow_id, "increment", "--input", "4")
    old = dexlite("attributes", flow_id, "counter", "--json")
    new = dexlite("attributes", "get", flow_id, "counter", "--json")
    assert (old.returncode, old.stdout) == (0, new.stdout)
    assert parsed(new)["values"] == {"counter": 4}
    # Options may come first: the Flow ID is still the old form's.
    assert dexlite.ok("attributes", "--json", flow_id) == dexlite.ok(
        "attributes", "get", flow_id, "--json"
    )


def test_channels_publish_prints_the_message_id_the_channel_then_holds(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    shown = dexlite.ok("channels", "publish", flow_id, "queued-messages", "--value", '"hello"')
    messages = api.get(f"/api/v1/flows/{flow_id}/channels/queued-messages/messages").json()
    [message] = messages["messages"]
    assert shown == f"{message['messageId']}\n"
    assert message["value"] == "hello"

    as_json = parsed(
        dexlite("channels", "publish", flow_id, "queued-messages", "--value", '"two"', "--json")
    )
    assert list(as_json) == ["messageId"]
    assert table(dexlite.ok("channels", flow_id)) == [
        {"NAME": "prioritized-messages", "INSTANCE": "-", "SIZE": "0"},
        {"NAME": "queued-messages", "INSTANCE": "-", "SIZE": "2"},
    ]


def test_a_message_published_to_a_waited_on_channel_is_consumed(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    dexlite.ok("channels", "publish", flow_id, "prioritized-messages", "--value", '"urgent"')
    handled = "primitive-channel-handled"

    def consumed() -> bool:
        values: dict[str, object] = parsed(dexlite("attributes", flow_id, handled, "--json"))[
            "values"
        ]
        return values != {}

    wait_until(consumed, what="the Step to consume the published message")
    assert parsed(dexlite("attributes", flow_id, handled, "--json"))["values"] == {
        handled: ["urgent"]
    }


def test_channels_publish_errors_exit_2_or_3_with_one_line(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    _fails(
        dexlite("channels", "publish", flow_id, "queued-messages", "--value", "hello"),
        2,
        "error: INVALID_ARGUMENT: --value must be JSON; a string is written --value '\"hello\"'",
    )
    _fails(
        dexlite("channels", "publish", flow_id, "nope", "--value", "1"),
        2,
        "error: INVALID_ARGUMENT: Flow type ChannelFlow declares no Channel or ChannelMap named"
        " 'nope'",
    )
    _fails(
        dexlite("channels", "publish", f"{flow_id}-absent", "queued-messages", "--value", "1"),
        3,
        f"error: FLOW_NOT_ACTIVE_OR_NOT_FOUND: Flow {flow_id}-absent has no active run",
    )
    missing = dexlite("channels", "publish", flow_id, "queued-messages")
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "Usage: dexlite channels publish" in missing.stderr
    assert "--value" in missing.stderr


def test_channels_list_is_the_old_form_under_its_own_name(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    listed = dexlite.ok("channels", "list", flow_id)
    assert listed == dexlite.ok("channels", flow_id)
    assert [r["NAME"] for r in table(listed)] == ["prioritized-messages", "queued-messages"]
    assert dexlite.ok("channels", "--json", flow_id) == dexlite.ok(
        "channels", "list", flow_id, "--json"
    )


def test_a_flow_id_spelled_like_a_subcommand_needs_the_explicit_form(dexlite: Dexlite) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", "publish", "--id-reuse-policy", "ALLOW_DUPLICATE")
    try:
        listed = table(dexlite.ok("channels", "list", "publish"))
        assert [r["NAME"] for r in listed] == ["prioritized-messages", "queued-messages"]
        # The bare form reads it as the subcommand, which then lacks its arguments.
        bare = dexlite("channels", "publish")
        assert (bare.returncode, bare.stdout) == (2, "")
        assert "Usage: dexlite channels publish" in bare.stderr
    finally:
        dexlite.ok("flows", "stop", "publish", "--type", "TERMINATE")
