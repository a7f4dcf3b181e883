"""``dexlite flows ...`` against a live server: start, describe, result, search, stop and
history, as tables and as ``--json``."""

from __future__ import annotations

import json
import re

import httpx

from tests.cli.running import Dexlite, parsed, record, table
from tests.support.backends import backend_independent

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")

ISO_MILLIS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def test_start_prints_the_new_run_and_describe_shows_it_running(
    dexlite: Dexlite, flow_id: str
) -> None:
    started = record(dexlite.ok("flows", "start", "CounterFlow", flow_id))
    assert started.keys() == {"Flow ID", "Run ID", "Started"}
    assert (started["Flow ID"], started["Started"]) == (flow_id, "yes")

    described = record(dexlite.ok("flows", "describe", flow_id))
    assert described == {
        "Flow ID": flow_id,
        "Run ID": started["Run ID"],
        "Flow type": "CounterFlow",
        "Status": "RUNNING",
        "Started": described["Started"],
        "Closed": "-",
        "Parent flow ID": "-",
        "Parent run ID": "-",
        "Indexed attributes": "-",
        "Input": "null",
        "Pending Steps": "none",
    }
    assert re.fullmatch(ISO_MILLIS, described["Started"])


def test_start_and_describe_print_the_raw_json_with_json(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    started = parsed(dexlite("flows", "start", "CounterFlow", flow_id, "--json"))
    assert started == {"flowId": flow_id, "runId": started["runId"], "started": True}

    described = parsed(dexlite("flows", "describe", flow_id, "--json"))
    assert described == {
        **api.get(f"/api/v1/flows/{flow_id}").json(),
        "input": None,
        "pendingSteps": [],
    }
    assert (described["runId"], described["status"]) == (started["runId"], "RUNNING")


def test_start_sends_input_and_options_and_result_waits_for_the_completion(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok(
        "flows", "start", "ProgressFlow", flow_id,
        "--input", '{"sections": 2, "delaySeconds": 0}',
        "--request-id", "cli-request-1",
        "--timeout-seconds", "600",
    )  # fmt: skip

    shown = dexlite.ok("flows", "result", flow_id, "--wait", "30")
    assert record(shown) == {
        "Flow ID": flow_id,
        "Run ID": record(shown)["Run ID"],
        "Status": "COMPLETED",
        "Error type": "-",
        "Error message": "-",
    }
    assert table(shown) == [
        {
            "STEP TYPE": "WriteProgress",
            "STEP EXECUTION ID": "WriteProgress-1",
            "OUTPUT": '"2 sections done"',
        }
    ]
    as_json = parsed(dexlite("flows", "result", flow_id, "--json"))
    assert as_json["completions"] == [
        {
            "stepType": "WriteProgress",
            "stepExecutionId": "WriteProgress-1",
            "output": "2 sections done",
        }
    ]
    first = api.get(f"/api/v1/flows/{flow_id}/history").json()["events"][0]
    assert first["details"]["requestId"] == "cli-request-1"


def test_start_with_ignore_already_started_reports_the_running_run(
    dexlite: Dexlite, flow_id: str
) -> None:
    args = ("flows", "start", "CounterFlow", flow_id, "--request-id", "same")
    first = record(dexlite.ok(*args))
    again = record(dexlite.ok(*args, "--ignore-already-started"))
    assert again == {
        "Flow ID": flow_id,
        "Run ID": first["Run ID"],
        "Started": "no (already started by this request ID)",
    }


def test_result_of_a_running_flow_is_running_when_the_wait_ends(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    done = dexlite("flows", "result", flow_id, "--wait", "0.2", "--json")
    # Not completed: exit status 6, what it shows the same.
    assert (done.returncode, done.stderr) == (6, ""), done
    shown = json.loads(done.stdout)
    assert (shown["status"], shown["completions"]) == ("RUNNING", [])
    assert record(dexlite("flows", "result", flow_id).stdout)["Status"] == "RUNNING"


def test_stop_terminates_with_the_reason_and_cancel_is_the_default(
    dexlite: Dexlite, flow_id: str
) -> None:
    run_id = record(dexlite.ok("flows", "start", "CounterFlow", flow_id))["Run ID"]
    stopped = dexlite.ok("flows", "stop", flow_id, "--type", "TERMINATE", "--reason", "by hand")
    assert record(stopped) == {"Flow ID": flow_id, "Run ID": run_id, "Stop": "TERMINATE"}
    done = dexlite("flows", "result", flow_id, "--json")
    assert done.returncode == 6, done
    closed = json.loads(done.stdout)
    assert (closed["status"], closed["errorMessage"]) == ("TERMINATED", "by hand")
    assert re.fullmatch(ISO_MILLIS, record(dexlite.ok("flows", "describe", flow_id))["Closed"])

    other = f"{flow_id}-cancel"
    dexlite.ok("flows", "start", "CounterFlow", other)
    stopped_json = parsed(dexlite("flows", "stop", other, "--json"))
    assert stopped_json["flowId"] == other
    assert parsed(dexlite("flows", "describe", other, "--json"))["status"] == "CANCELED"


def test_search_prints_one_page_with_its_token_or_every_page_with_all(
    dexlite: Dexlite, flow_id: str
) -> None:
    for n in (1, 2, 3):
        dexlite.ok("flows", "start", "CounterFlow", f"{flow_id}-{n}")
    query = f"FlowId STARTS_WITH '{flow_id}-' ORDER BY FlowId ASC"

    first = dexlite("flows", "search", query, "--page-size", "2")
    assert first.returncode == 0, first
    rows = table(first.stdout)
    assert [(r["FLOW ID"], r["TYPE"], r["STATUS"], r["CLOSED"]) for r in rows] == [
        (f"{flow_id}-1", "CounterFlow", "RUNNING", "-"),
        (f"{flow_id}-2", "CounterFlow", "RUNNING", "-"),
    ]
    assert all(re.fullmatch(ISO_MILLIS, r["STARTED"]) for r in rows)
    hint = first.stderr.strip()
    assert hint.startswith("more results: add --page-token ")
    token = hint.rsplit(" ", 1)[1]

    rest = dexlite.ok("flows", "search", query, "--page-size", "2", "--page-token", token)
    assert [r["FLOW ID"] for r in table(rest)] == [f"{flow_id}-3"]

    every = parsed(dexlite("flows", "search", query, "--page-size", "2", "--all", "--json"))
    assert [f["flowId"] for f in every["flows"]] == [f"{flow_id}-{n}" for n in (1, 2, 3)]
    assert every["nextPageToken"] == ""


def test_history_prints_every_page_oldest_first(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    increments = 105  # more than the server's page of 100 events
    for _ in range(increments):
        api.post(f"/api/v1/flows/{flow_id}/rpcs/increment", json={"input": 1}).raise_for_status()

    rows = table(dexlite.ok("flows", "history", flow_id))
    assert [r["EVENT ID"] for r in rows] == [str(n) for n in range(1, increments + 2)]
    assert rows[0]["TYPE"] == "FLOW_STARTED"
    assert (
        rows[0]["DETAILS"]
        == '{"flowType":"CounterFlow","requestId":null,"input":null,"initialAttributes":[]}'
    )
    assert {r["TYPE"] for r in rows[1:]} == {"RPC_COMMITTED"}
    assert rows[1]["DETAILS"].startswith('{"rpc":"increment","attributes":["counter"]')
    assert re.fullmatch(ISO_MILLIS, rows[1]["AT"])

    events = parsed(dexlite("flows", "history", flow_id, "--json"))["events"]
    assert [e["eventId"] for e in events] == list(range(1, increments + 2))


def test_history_with_page_size_prints_one_page_and_the_next_token(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    for _ in range(2):
        api.post(f"/api/v1/flows/{flow_id}/rpcs/increment", json={"input": 1}).raise_for_status()

    page = dexlite("flows", "history", flow_id, "--page-size", "2")
    assert [r["TYPE"] for r in table(page.stdout)] == ["FLOW_STARTED", "RPC_COMMITTED"]
    token = page.stderr.strip().rsplit(" ", 1)[1]
    last = parsed(
        dexlite("flows", "history", flow_id, "--page-size", "2", "--page-token", token, "--json")
    )
    assert ([e["eventId"] for e in last["events"]], last["nextPageToken"]) == ([3], "")


def test_flow_types_lists_the_served_types_and_shows_one_with_its_input_schema(
    dexlite: Dexlite,
) -> None:
    listed = dexlite.ok("flow-types")
    rows = {row["FLOW TYPE"]: row for row in table(listed)}
    assert rows["ProgressFlow"]["START STEP"] == "WriteProgress"
    shown = dexlite.ok("flow-types", "ProgressFlow")
    assert record(shown.split("\n\n")[0]) == {
        "Flow type": "ProgressFlow",
        "Start Step": "WriteProgress",
        "Steps": "WriteProgress",
    }
    schema = json.loads(shown.split("Input (JSON Schema):\n", 1)[1].split("\n\n")[0])
    assert "sections" in schema["properties"], schema
    as_json = parsed(dexlite("flow-types", "ProgressFlow", "--json"))
    assert (as_json["flowType"], as_json["inputSchema"]) == ("ProgressFlow", schema)
    missing = dexlite("flow-types", "NoSuchFlow")
    assert (missing.returncode, missing.stdout) == (3, ""), missing
    assert missing.stderr.startswith(
        "error: FLOW_TYPE_NOT_FOUND: Flow type 'NoSuchFlow' is not served here (served: "
    ), missing.stderr


def test_list_is_search_under_temporal_s_name_with_the_same_options_and_output(
    dexlite: Dexlite, flow_id: str
) -> None:
    for n in (1, 2, 3):
        dexlite.ok("flows", "start", "CounterFlow", f"{flow_id}-{n}")
    query = f"FlowId STARTS_WITH '{flow_id}-' ORDER BY FlowId ASC"

    listed = dexlite("flows", "list", query, "--page-size", "2")
    searched = dexlite("flows", "search", query, "--page-size", "2")
    assert (listed.returncode, listed.stdout) == (0, searched.stdout), listed
    assert [r["FLOW ID"] for r in table(listed.stdout)] == [f"{flow_id}-1", f"{flow_id}-2"]
    # The page token is per query and page, not per request: both name the same next page.
    assert listed.stderr == searched.stderr
    assert listed.stderr.startswith("more results: add --page-token ")

    every = parsed(dexlite("flows", "list", query, "--page-size", "2", "--all", "--json"))
    assert [f["flowId"] for f in every["flows"]] == [f"{flow_id}-{n}" for n in (1, 2, 3)]
    assert every == parsed(dexlite("flows", "search", query, "--page-size", "2", "--all", "--json"))


def test_list_without_a_query_lists_every_flow(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "ProgressFlow", flow_id, "--input", '{"sections": 1}')
    every = parsed(dexlite("flows", "list", "--all", "--page-size", "1000", "--json"))
    everything = parsed(dexlite("flows", "search", "--all", "--page-size", "1000", "--json"))
    ids = [f["flowId"] for f in every["flows"]]
    assert flow_id in ids
    assert ids == [f["flowId"] for f in everything["flows"]]
