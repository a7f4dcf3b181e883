"""``dexlite schedules ...`` and ``dexlite flows skip-timer`` against a live server: a
Schedule's life from create to delete, the exit codes of its failures, and a Timer skipped."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.cli.running import Dexlite, parsed, record, table
from tests.support.backends import backend_independent
from tests.support.waiting import wait_until

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")

#: A Flow ID a Schedule gives the action of one time.
ACTION_ID = r"{}-\d{{8}}T\d{{6}}Z"
ISO_MILLIS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
#: The input of each action: a TimerFlow that waits an hour, so its actions keep running.
HOUR_LONG = '{"seconds": 3600}'


def _create(dexlite: Dexlite, schedule_id: str, *options: str) -> str:
    return dexlite.ok(
        "schedules", "create", schedule_id, "TimerFlow", "--input", HOUR_LONG, *options
    )


def test_a_schedule_from_create_to_delete(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    schedule_id = f"sched-{flow_id}"
    created = _create(
        dexlite,
        schedule_id,
        "--every",
        "3600",
        "--overlap",
        "ALLOW_ALL",
        "--catchup-window",
        "120",
        "--start-delay",
        "5",
        "--note",
        "hourly",
    )
    assert record(created)["Schedule ID"] == schedule_id

    described = dexlite.ok("schedules", "describe", schedule_id)
    rows = record(described)
    assert {k: rows[k] for k in ("Flow type", "Input", "When", "Overlap", "Paused")} == {
        "Flow type": "TimerFlow",
        "Input": '{"seconds":3600.0}',
        "When": "every 3600s",
        "Overlap": "ALLOW_ALL",
        "Paused": "no",
    }
    assert (rows["Catch-up window"], rows["Start delay"], rows["Note"]) == ("120s", "5s", "hourly")
    upcoming = described.split("\n\n")[1].splitlines()
    assert upcoming[0] == "NEXT ACTION TIMES"
    assert len(upcoming[1:]) == 5
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00\.000Z", at) for at in upcoming[1:])
    spec = parsed(dexlite("schedules", "describe", schedule_id, "--json"))
    assert spec == api.get(f"/api/v1/schedules/{schedule_id}").json()
    assert spec["startOptions"]["startDelaySeconds"] == 5

    listed = table(dexlite.ok("schedules", "list", "--all"))
    [mine] = [row for row in listed if row["SCHEDULE ID"] == schedule_id]
    assert (mine["FLOW TYPE"], mine["WHEN"], mine["PAUSED"]) == ("TimerFlow", "every 3600s", "no")
    assert mine["NEXT ACTION"] == upcoming[1]

    paused = record(dexlite.ok("schedules", "pause", schedule_id, "--note", "maintenance"))
    assert (paused["Paused"], paused["Note"], paused["Next action"]) == ("yes", "maintenance", "-")

    triggered = record(dexlite.ok("schedules", "trigger", schedule_id))
    assert re.fullmatch(ACTION_ID.format(re.escape(schedule_id)), triggered["Flow ID"])
    assert triggered["Started"] == "yes"
    assert triggered["Run ID"] != "-"

    backfilled = dexlite.ok(
        "schedules",
        "backfill",
        schedule_id,
        "--start",
        "2025-01-01T00:00:00Z",
        "--end",
        "2025-01-01T03:00:00Z",
    )
    assert record(backfilled) == {"Started": "3", "Skipped": "0"}
    started = [row["FLOW ID"] for row in table(backfilled)]
    assert started == [f"{schedule_id}-20250101T{h:02d}0000Z" for h in range(3)]

    after = dexlite.ok("schedules", "describe", schedule_id)
    actions = {row["FLOW ID"]: row for row in table(after)}
    assert set(actions) >= {triggered["Flow ID"], *started}
    assert {actions[f]["STATUS"] for f in started} == {"RUNNING"}
    assert actions[started[0]]["SCHEDULED AT"] == "2025-01-01T00:00:00.000Z"
    assert re.fullmatch(ISO_MILLIS, actions[started[0]]["STARTED AT"])
    running = record(after)["Running"].split(", ")
    assert set(running) >= {triggered["Flow ID"], *started}

    unpaused = record(dexlite.ok("schedules", "unpause", schedule_id))
    assert (unpaused["Paused"], unpaused["Note"]) == ("no", "-")

    assert dexlite.ok("schedules", "delete", schedule_id) == f"Schedule {schedule_id} deleted\n"
    gone = dexlite("schedules", "describe", schedule_id)
    assert gone.returncode == 3
    assert gone.stderr.startswith("error: SCHEDULE_NOT_FOUND: ")
    # The Flows it started keep running.
    assert api.get(f"/api/v1/flows/{started[0]}").json()["status"] == "RUNNING"


def test_update_replaces_the_spec_and_left_out_options_take_their_defaults(
    dexlite: Dexlite, flow_id: str
) -> None:
    schedule_id = f"upd-{flow_id}"
    _create(dexlite, schedule_id, "--every", "60", "--overlap", "ALLOW_ALL", "--start-delay", "9")
    body = parsed(
        dexlite(
            "schedules",
            "update",
            schedule_id,
            "CounterFlow",
            "--cron",
            "30 2 * * *",
            "--timezone",
            "Europe/Paris",
            "--json",
        )
    )
    assert (body["everySeconds"], body["cron"], body["timezone"]) == (
        None,
        "30 2 * * *",
        "Europe/Paris",
    )
    # Not given again: the defaults, as PUT does.
    assert (body["flowType"], body["overlap"], body["paused"]) == ("CounterFlow", "SKIP", False)
    assert (body["input"], body["startOptions"]["startDelaySeconds"]) == (None, None)
    assert len(body["nextActionTimes"]) == 5
    dexlite.ok("schedules", "delete", schedule_id)


def test_failures_exit_with_the_status_of_their_problem(dexlite: Dexlite, flow_id: str) -> None:
    schedule_id = f"fail-{flow_id}"
    _create(dexlite, schedule_id, "--every", "60", "--paused")

    again = dexlite("schedules", "create", schedule_id, "CounterFlow", "--every", "60")
    assert again.returncode == 4
    assert again.stderr.startswith("error: SCHEDULE_ALREADY_EXISTS: ")

    for args in (
        ("describe", "no-such-schedule"),
        ("trigger", "no-such-schedule"),
        ("pause", "no-such-schedule"),
        ("delete", "no-such-schedule"),
    ):
        missing = dexlite("schedules", *args)
        assert missing.returncode == 3, missing
        assert missing.stderr.startswith("error: SCHEDULE_NOT_FOUND: ")

    bad_cron = dexlite(
        "schedules", "create", f"cron-{flow_id}", "CounterFlow", "--cron", "61 * * * *"
    )
    assert bad_cron.returncode == 2
    assert bad_cron.stderr.startswith("error: INVALID_ARGUMENT: ")
    assert "cron" in bad_cron.stderr.removeprefix("error: INVALID_ARGUMENT: ")

    for both_or_neither in (("--every", "60", "--cron", "@daily"), ()):
        refused = dexlite("schedules", "create", f"x-{flow_id}", "CounterFlow", *both_or_neither)
        assert refused.returncode == 2
        assert refused.stderr == (
            "error: INVALID_ARGUMENT: give exactly one of --every and --cron\n"
        )
    dexlite.ok("schedules", "delete", schedule_id)


def _pending_timer(api: httpx.Client, flow_id: str) -> dict[str, Any]:
    def waiting() -> dict[str, Any] | None:
        steps = api.get(f"/api/v1/flows/{flow_id}/pending-steps").json()["steps"]
        return steps[0] if steps and steps[0]["timers"] else None

    found: dict[str, Any] = wait_until(waiting, what=f"the Timer of {flow_id} to be waited on")
    return found


def test_skip_timer_fires_an_hour_long_timer_and_the_flow_completes(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    started = api.post(
        "/primitives/timer/start", params={"flowId": flow_id}, json={"seconds": 3600}
    )
    assert started.status_code == 201, started.text
    step = _pending_timer(api, flow_id)

    skipped = dexlite.ok("flows", "skip-timer", flow_id, step["stepExecutionId"])
    assert record(skipped) == {"Timers fired": "1"}
    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 30}).json()
    assert done["status"] == "COMPLETED"

    # The run has closed: nothing of it can be skipped; an unknown Flow is not found.
    again = dexlite("flows", "skip-timer", flow_id, step["stepExecutionId"], "--json")
    assert again.returncode == 3, again
    assert again.stderr.startswith("error: FLOW_NOT_ACTIVE_OR_NOT_FOUND: ")
    unknown = dexlite("flows", "skip-timer", f"nobody-{flow_id}", "WaitForTimer-1")
    assert unknown.returncode == 3
    assert unknown.stderr.startswith("error: FLOW_NOT_FOUND: ")


def test_skip_timer_prints_json_and_refuses_a_step_with_no_timer(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    started = api.post(
        "/primitives/timer/start", params={"flowId": flow_id}, json={"seconds": 3600}
    )
    assert started.status_code == 201, started.text
    step = _pending_timer(api, flow_id)

    missing = dexlite("flows", "skip-timer", flow_id, "NoSuchStep-1")
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: INVALID_ARGUMENT: ")
    fired = parsed(
        dexlite(
            "flows",
            "skip-timer",
            flow_id,
            step["stepExecutionId"],
            "--run-id",
            started.json()["runId"],
            "--json",
        )
    )
    assert fired == {"fired": 1}
    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 30}).json()
    assert done["status"] == "COMPLETED"
