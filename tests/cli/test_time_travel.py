"""``dexlite flows time-travel`` and ``flows time-travel-all`` against a live server: what they
refuse before sending anything, the new run they print (as a table and as ``--json``), and the
answers of the API they report with their exit codes.

The bundled CounterFlow (RPC writes, no Step) and ProgressFlow (one Step, WriteProgress, that
completes the run) are the runs traveled.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx

from tests.cli.running import Dexlite, parsed, record, table
from tests.server import free_port
from tests.support.backends import backend_independent

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")

#: How long a test waits for a run to close (waitForFlow's long poll; no sleeping).
WAIT_SECONDS = 20


def _nowhere() -> Dexlite:
    """Return the command pointed at a port nothing listens on: a request there would exit 1."""
    return Dexlite({"DEXLITE_URL": f"http://127.0.0.1:{free_port()}"})


def _fails(done: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    """Assert ``done`` exited with ``status``, printed nothing, and ``line`` on stderr."""
    assert (done.returncode, done.stdout, done.stderr) == (status, "", line + "\n"), done


def _counter(api: httpx.Client, flow_id: str, *increments: int) -> str:
    """Start a CounterFlow, send it ``increments``, and return its run ID."""
    run_id: str = api.post(
        "/api/v1/flows", json={"flowType": "CounterFlow", "flowId": flow_id}
    ).json()["runId"]
    for amount in increments:
        api.post(
            f"/api/v1/flows/{flow_id}/rpcs/increment", json={"input": amount}
        ).raise_for_status()
    return run_id


def _progress(api: httpx.Client, flow_id: str) -> str:
    """Start a one-section ProgressFlow, wait for it to complete, and return its run ID."""
    body = {
        "flowType": "ProgressFlow",
        "flowId": flow_id,
        "input": {"sections": 1, "delaySeconds": 0},
    }
    run_id: str = api.post("/api/v1/flows", json=body).json()["runId"]
    assert _closed(api, flow_id, run_id) == "COMPLETED"
    return run_id


def _closed(api: httpx.Client, flow_id: str, run_id: str) -> str:
    """Return the status of the run once it has closed (waitForFlow with waitSeconds)."""
    params = {"runId": run_id, "waitSeconds": WAIT_SECONDS}
    answer = api.get(f"/api/v1/flows/{flow_id}/result", params=params, timeout=WAIT_SECONDS + 10)
    status: str = answer.json()["status"]
    return status


def _described(api: httpx.Client, flow_id: str, run_id: str | None = None) -> dict[str, Any]:
    params = {"runId": run_id} if run_id else {}
    body: dict[str, Any] = api.get(f"/api/v1/flows/{flow_id}", params=params).json()
    return body


def _events(api: httpx.Client, flow_id: str, run_id: str | None = None) -> list[dict[str, Any]]:
    params = {"runId": run_id} if run_id else {}
    events: list[dict[str, Any]] = api.get(
        f"/api/v1/flows/{flow_id}/history", params=params
    ).json()["events"]
    return events


def _values(api: httpx.Client, flow_id: str, **params: Any) -> dict[str, Any]:
    values: dict[str, Any] = api.get(f"/api/v1/flows/{flow_id}/attributes", params=params).json()[
        "values"
    ]
    return values


def test_time_travel_refuses_without_run_id_reason_or_yes_and_travels_nothing(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    run_id = _counter(api, flow_id, 2)
    before = (_described(api, flow_id), _events(api, flow_id))
    travel = ("flows", "time-travel", flow_id, "--to", "beginning")

    no_run = (
        "error: INVALID_ARGUMENT: --run-id is required: name the run to travel, the Flow's "
        f"latest ('dexlite flows describe {flow_id}' shows it)"
    )
    no_yes = (
        f"error: CONFIRMATION_REQUIRED: time travel closes run {run_id} of Flow {flow_id} if "
        "still open and starts a new run from BEGINNING; add --yes to confirm"
    )
    no_reason = "error: INVALID_ARGUMENT: --reason is required: say why, for the new run's history"
    # The same refusals with nothing listening: no request is sent (one would exit 1).
    for command in (dexlite, _nowhere()):
        _fails(command(*travel, "--reason", "retry", "--yes"), 2, no_run)
        _fails(command(*travel, "--run-id", run_id, "--reason", "retry"), 2, no_yes)
        _fails(command(*travel, "--run-id", run_id, "--reason", "  ", "--yes"), 2, no_reason)
    fork_yes = dexlite(*travel, "--run-id", run_id, "--reason", "x", "--fork-to", f"{flow_id}-f")
    _fails(
        fork_yes,
        2,
        f"error: CONFIRMATION_REQUIRED: time travel closes run {run_id} of Flow {flow_id} if "
        f"still open and starts a new run of Flow {flow_id}-f from BEGINNING; add --yes to "
        "confirm",
    )

    assert (_described(api, flow_id), _events(api, flow_id)) == before
    assert before[0]["runId"] == run_id and before[0]["status"] == "RUNNING"
    assert api.get(f"/api/v1/flows/{flow_id}-f").status_code == 404


def test_time_travel_to_the_beginning_prints_the_new_run_that_describe_and_history_show(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    run_id = _counter(api, flow_id, 2, 3)

    shown = record(
        dexlite.ok(
            "flows", "time-travel", flow_id,
            "--run-id", run_id, "--to", "beginning", "--reason", "start over", "--yes",
        )
    )  # fmt: skip
    new_run = shown["Run ID"]
    assert shown == {"Flow ID": flow_id, "Run ID": new_run, "Previous run ID": run_id}
    assert new_run != run_id

    described = record(dexlite.ok("flows", "describe", flow_id))
    assert (described["Run ID"], described["Status"]) == (new_run, "RUNNING")
    old = record(dexlite.ok("flows", "describe", flow_id, "--run-id", run_id))
    assert old["Status"] == "TERMINATED"

    rows = table(dexlite.ok("flows", "history", flow_id, "--run-id", new_run))
    assert [(r["EVENT ID"], r["TYPE"]) for r in rows] == [
        ("1", "FLOW_STARTED"),
        ("2", "TIME_TRAVELED"),
        ("3", "WRITES_REAPPLIED"),  # one per commit of an increment, in commit order
        ("4", "WRITES_REAPPLIED"),
    ]
    assert rows[1]["DETAILS"] == (
        f'{{"previousRunId":"{run_id}","previousFlowId":"{flow_id}","to":{{"kind":"BEGINNING"}},'
        '"reason":"start over","skipWritesReapply":false}'
    )
    # The increments' write came from outside the run: applied again to the new run.
    assert _values(api, flow_id) == {"counter": 5}
    assert dexlite.ok("rpc", flow_id, "increment", "--input", "1") == "6\n"


def test_time_travel_to_an_event_with_json_prints_the_apis_answer(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    run_id = _counter(api, flow_id, 2, 3)  # events 2 and 3: counter 2, then 5

    answer = parsed(
        dexlite(
            "flows", "time-travel", flow_id,
            "--run-id", run_id, "--to", "EVENT", "--event-id", "2",
            "--reason", "undo the second increment", "--skip-writes-reapply", "--yes", "--json",
        )
    )  # fmt: skip
    latest = parsed(dexlite("flows", "describe", flow_id, "--json"))
    assert answer == {"flowId": flow_id, "runId": latest["runId"], "previousRunId": run_id}
    assert latest["status"] == "RUNNING"

    history = parsed(dexlite("flows", "history", flow_id, "--json"))
    assert history["runId"] == answer["runId"]
    assert [(e["eventId"], e["eventType"]) for e in history["events"]] == [
        (1, "FLOW_STARTED"),
        (2, "RPC_COMMITTED"),
        (3, "TIME_TRAVELED"),
    ]
    assert history["events"][2]["details"] == {
        "previousRunId": run_id,
        "previousFlowId": flow_id,
        "to": {"kind": "EVENT", "eventId": 2},
        "reason": "undo the second increment",
        "skipWritesReapply": True,
    }
    # The new run holds what the old one held as of event 2, and nothing written later.
    assert _values(api, flow_id) == {"counter": 2}
    assert _values(api, flow_id, runId=run_id, asOfEventId=2) == {"counter": 2}


def test_time_travel_to_a_step_execution_forks_and_to_a_time_travels_in_place(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    run_id = _progress(api, flow_id)
    started_at = _events(api, flow_id)[0]["at"]
    fork = f"{flow_id}-fork"

    forked = parsed(
        dexlite(
            "flows", "time-travel", flow_id,
            "--run-id", run_id, "--to", "step-execution",
            "--step-execution-id", "WriteProgress-1", "--method", "execute",
            "--reason", "try it elsewhere", "--fork-to", fork, "--yes", "--json",
        )
    )  # fmt: skip
    assert forked == {"flowId": fork, "runId": forked["runId"], "previousRunId": run_id}
    assert _closed(api, fork, forked["runId"]) == "COMPLETED"
    assert _events(api, fork)[1]["details"]["to"] == {
        "kind": "STEP_EXECUTION",
        "stepExecutionId": "WriteProgress-1",
        "method": "EXECUTE",
    }
    assert _described(api, flow_id)["runId"] == run_id  # the original is left as it was

    again = record(
        dexlite.ok(
            "flows", "time-travel", flow_id,
            "--run-id", run_id, "--to", "time", "--at", started_at, "--reason", "rerun", "--yes",
        )
    )  # fmt: skip
    assert again == {"Flow ID": flow_id, "Run ID": again["Run ID"], "Previous run ID": run_id}
    assert _closed(api, flow_id, again["Run ID"]) == "COMPLETED"
    traveled = _events(api, flow_id, again["Run ID"])
    assert [e["eventType"] for e in traveled] == [
        "FLOW_STARTED",
        "TIME_TRAVELED",
        "STEP_CLOSED",
        "FLOW_CLOSED",
    ]
    assert traveled[1]["details"]["to"] == {
        "kind": "TIME",
        "at": started_at.replace("Z", "+00:00"),
    }


def test_a_run_that_is_not_the_latest_exits_4_and_travels_nothing(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    run_id = _counter(api, flow_id, 1)
    latest = api.post(
        f"/api/v1/flows/{flow_id}/time-travel", json={"runId": run_id, "to": {"kind": "BEGINNING"}}
    ).json()["runId"]
    events = _events(api, flow_id)

    _fails(
        dexlite(
            "flows", "time-travel", flow_id,
            "--run-id", run_id, "--to", "beginning", "--reason", "again", "--yes",
        ),
        4,
        f"error: FAILED_PRECONDITION: run {run_id} is not the latest run of Flow {flow_id} (the "
        f"latest is {latest}): only the latest run can travel (--run-id)",
    )  # fmt: skip
    assert _described(api, flow_id)["runId"] == latest
    assert _events(api, flow_id) == events


def test_a_point_the_run_does_not_have_exits_2_naming_the_field(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    run_id = _counter(api, flow_id, 1)
    events = _events(api, flow_id)
    travel = ("flows", "time-travel", flow_id, "--run-id", run_id, "--reason", "r", "--yes")

    _fails(
        dexlite(*travel, "--to", "event", "--event-id", "999"),
        2,
        f"error: INVALID_ARGUMENT: to.eventId: run {run_id} has no event 999 (--event-id)",
    )
    _fails(
        dexlite(*travel, "--to", "step-type", "--step-type", "WriteProgress"),
        2,
        "error: INVALID_ARGUMENT: to.stepType: Flow type CounterFlow has no Step type "
        "WriteProgress (--step-type)",
    )
    assert (_described(api, flow_id)["runId"], _events(api, flow_id)) == (run_id, events)


def test_point_options_that_are_missing_or_do_not_apply_exit_2_before_any_request() -> None:
    nowhere = _nowhere()
    travel = ("flows", "time-travel", "f", "--run-id", "r", "--reason", "r", "--yes")
    refused = {
        ("--to", "event"): "--to event needs --event-id",
        ("--to", "time"): "--to time needs --at",
        ("--to", "step-type"): "--to step-type needs --step-type",
        ("--to", "step-execution"): "--to step-execution needs --step-execution-id",
        ("--to", "beginning", "--event-id", "3"): (
            "--event-id applies only to --to event, not --to beginning"
        ),
        ("--to", "event", "--event-id", "3", "--method", "execute"): (
            "--method applies only to --to step-execution, not --to event"
        ),
        ("--to", "time", "--at", "2026-01-31T09:30:00"): (
            "--at '2026-01-31T09:30:00' needs a time zone, e.g. 2026-01-31T09:30:00Z or "
            "2026-01-31T09:30:00+02:00"
        ),
        ("--to", "time", "--at", "yesterday"): (
            "--at 'yesterday' is not an ISO 8601 date and time (e.g. 2026-01-31T09:30:00Z)"
        ),
    }
    for args, detail in refused.items():
        _fails(nowhere(*travel, *args), 2, f"error: INVALID_ARGUMENT: {detail}")
    bulk = nowhere(
        "flows", "time-travel-all", "FlowId = 'x'", "--to", "beginning", "--step-type", "S"
    )
    _fails(
        bulk, 2, "error: INVALID_ARGUMENT: --step-type applies only to --to step-type, not --to "
        "beginning"
    )  # fmt: skip
    _fails(
        nowhere("flows", "time-travel-all", " ", "--to", "beginning", "--yes"),
        2,
        "error: INVALID_ARGUMENT: QUERY must not be empty: time-travel-all travels every run it "
        "matches",
    )
    usage = nowhere(
        "flows", "time-travel", "f", "--run-id", "r", "--to", "event", "--event-id", "0"
    )
    assert (usage.returncode, usage.stdout) == (2, ""), usage
    assert "Usage: dexlite flows time-travel" in usage.stderr


def test_time_travel_all_lists_with_dry_run_refuses_without_yes_and_travels_with_it(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    runs = {f"{flow_id}-{n}": _progress(api, f"{flow_id}-{n}") for n in (1, 2)}
    query = f"FlowId STARTS_WITH '{flow_id}-' ORDER BY FlowId ASC"
    bulk = ("flows", "time-travel-all", query, "--to", "step-type", "--step-type", "WriteProgress")
    before = {f: (_described(api, f), _events(api, f)) for f in runs}

    _fails(
        dexlite(*bulk, "--reason", "rerun"),
        2,
        "error: CONFIRMATION_REQUIRED: this travels the latest run of every Flow the query "
        "matches (at most 100) back to STEP_TYPE stepType=WriteProgress; list them with "
        "--dry-run, then add --yes to confirm",
    )
    dry = dexlite(*bulk, "--dry-run")
    assert (dry.returncode, dry.stderr) == (0, "dry run: 2 runs matched; nothing traveled\n"), dry
    assert table(dry.stdout) == [{"FLOW ID": f, "RUN ID": r} for f, r in runs.items()]
    limited = dexlite(*bulk, "--dry-run", "--limit", "1", "--json")
    assert (limited.returncode, limited.stderr) == (
        0,
        "the limit of 1 run was reached: more may match (raise --limit)\n"
        "dry run: 1 run matched; nothing traveled\n",
    ), limited
    assert json.loads(limited.stdout) == {
        "dryRun": True,
        "matched": [{"flowId": f"{flow_id}-1", "runId": runs[f"{flow_id}-1"]}],
        "traveled": [],
        "failed": [],
    }
    assert {f: (_described(api, f), _events(api, f)) for f in runs} == before

    done = dexlite.ok(*bulk, "--reason", "rerun the step", "--yes")
    rows = table(done)
    latest = {f: _described(api, f)["runId"] for f in runs}
    assert rows == [
        {"FLOW ID": f, "RUN ID": latest[f], "PREVIOUS RUN ID": r} for f, r in runs.items()
    ]
    for flow, new_run in latest.items():
        assert new_run != runs[flow]
        assert _closed(api, flow, new_run) == "COMPLETED"
        traveled = _events(api, flow, new_run)[1]
        assert (traveled["eventType"], traveled["details"]["reason"]) == (
            "TIME_TRAVELED",
            "rerun the step",
        )


def test_time_travel_all_exits_1_when_a_matched_run_cannot_travel(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    counter_run = _counter(api, f"{flow_id}-a")
    progress_run = _progress(api, f"{flow_id}-b")
    query = f"FlowId STARTS_WITH '{flow_id}-' ORDER BY FlowId ASC"
    bulk = ("flows", "time-travel-all", query, "--to", "step-type", "--step-type", "WriteProgress")

    done = dexlite(*bulk, "--yes")
    assert done.returncode == 1, done
    assert done.stderr == (
        "error: TIME_TRAVEL_FAILED: 1 of 2 matched runs could not travel (1 traveled)\n"
    )
    traveled, failed = done.stdout.rstrip("\n").split("\n\n")
    new_run = _described(api, f"{flow_id}-b")["runId"]
    assert table(traveled) == [
        {"FLOW ID": f"{flow_id}-b", "RUN ID": new_run, "PREVIOUS RUN ID": progress_run}
    ]
    assert table(failed) == [
        {
            "FLOW ID": f"{flow_id}-a",
            "RUN ID": counter_run,
            "CODE": "INVALID_ARGUMENT",
            "DETAIL": "to.stepType: Flow type CounterFlow has no Step type WriteProgress",
        }
    ]
    assert _described(api, f"{flow_id}-a")["runId"] == counter_run

    again = dexlite(*bulk, "--yes", "--json")
    assert again.returncode == 1, again
    assert again.stderr == done.stderr
    body = json.loads(again.stdout)
    newest = _described(api, f"{flow_id}-b")["runId"]
    assert body == {
        "dryRun": False,
        "matched": [
            {"flowId": f"{flow_id}-a", "runId": counter_run},
            {"flowId": f"{flow_id}-b", "runId": new_run},
        ],
        "traveled": [{"flowId": f"{flow_id}-b", "runId": newest, "previousRunId": new_run}],
        "failed": [
            {
                "flowId": f"{flow_id}-a",
                "runId": counter_run,
                "code": "INVALID_ARGUMENT",
                "detail": "to.stepType: Flow type CounterFlow has no Step type WriteProgress",
            }
        ],
    }
