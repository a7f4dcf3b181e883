"""``dexlite flows describe`` against a live server: the run's input, from its FLOW_STARTED
event, and its pending Steps (listPendingSteps) with what each waits on, as a table and as
``--json``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

import engine
from app.cli.flows import pending_row
from tests.cli.running import Dexlite, parsed, record, table
from tests.support.backends import backend_independent
from tests.support.waiting import wait_until

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")


def _millis(value: str) -> str:
    """Return an RFC 3339 time as the CLI prints it: UTC, to the millisecond."""
    moment = datetime.fromisoformat(value).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _pending_once(api: httpx.Client, flow_id: str, phase: str) -> dict[str, Any]:
    """Wait until the Flow's one pending Step is in ``phase``; return listPendingSteps' answer."""

    def reached() -> dict[str, Any]:
        body: dict[str, Any] = api.get(f"/api/v1/flows/{flow_id}/pending-steps").json()
        return body if [s["phase"] for s in body["steps"]] == [phase] else {}

    return wait_until(reached, what=f"the Step of {flow_id} to reach {phase}")


def test_describe_shows_the_input_and_a_timer_wait_with_its_due_time(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "TimerFlow", flow_id, "--input", '{"seconds": 600}')
    # A Wait on Timers alone is due at its Timer: listed as the execute that then runs.
    step = _pending_once(api, flow_id, "EXECUTE")["steps"][0]
    due = _millis(step["dueAt"])
    assert [_millis(at) for at in step["timers"]] == [due]

    shown = dexlite.ok("flows", "describe", flow_id)
    described = record(shown)
    assert (described["Input"], described["Pending Steps"]) == ('{"seconds":600.0}', "1")
    assert list(described)[-2:] == ["Input", "Pending Steps"]
    assert table(shown) == [
        {
            "STEP EXECUTION ID": "WaitForTimer-1",
            "TYPE": "WaitForTimer",
            "PHASE": "EXECUTE",
            "ATTEMPT": "1",
            "DUE": due,
            "WAITING ON": f"Timer {due}",
        }
    ]
    started = datetime.fromisoformat(api.get(f"/api/v1/flows/{flow_id}").json()["startedAt"])
    waited = datetime.fromisoformat(step["dueAt"]) - started
    assert 599 < waited.total_seconds() < 601


def test_describe_shows_a_step_waiting_on_a_channel(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "ChannelFlow", flow_id)
    _pending_once(api, flow_id, "WAITING")

    shown = dexlite.ok("flows", "describe", flow_id)
    assert (record(shown)["Input"], record(shown)["Pending Steps"]) == ("null", "1")
    assert table(shown) == [
        {
            "STEP EXECUTION ID": "HandlePrioritizedMessage-1",
            "TYPE": "HandlePrioritizedMessage",
            "PHASE": "WAITING",
            "ATTEMPT": "1",
            "DUE": "-",
            "WAITING ON": "Channel prioritized-messages",
        }
    ]


def test_describe_json_adds_the_input_and_the_pending_steps_to_describe_flow(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "TimerFlow", flow_id, "--input", '{"seconds": 300}')
    pending = _pending_once(api, flow_id, "EXECUTE")

    described = parsed(dexlite("flows", "describe", flow_id, "--json"))
    assert described == {
        **api.get(f"/api/v1/flows/{flow_id}").json(),
        "input": {"seconds": 300.0},
        "pendingSteps": pending["steps"],
    }
    assert list(described)[-2:] == ["input", "pendingSteps"]


def test_describe_of_a_closed_run_has_no_pending_steps_and_no_table(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok(
        "flows", "start", "ProgressFlow", flow_id, "--input", '{"sections": 1, "delaySeconds": 0}'
    )
    dexlite.ok("flows", "result", flow_id, "--wait", "30")

    shown = dexlite.ok("flows", "describe", flow_id)
    assert "\n\n" not in shown
    described = record(shown)
    assert described["Status"] == "COMPLETED"
    assert described["Input"] == '{"sections":1,"delaySeconds":0.0}'
    assert described["Pending Steps"] == "none"
    assert parsed(dexlite("flows", "describe", flow_id, "--json"))["pendingSteps"] == []


def test_describe_with_run_id_shows_the_input_that_run_started_with(
    dexlite: Dexlite, flow_id: str
) -> None:
    first = parsed(
        dexlite(
            "flows",
            "start",
            "ProgressFlow",
            flow_id,
            "--input",
            '{"sections": 1, "delaySeconds": 0}',
            "--json",
        )
    )
    dexlite.ok("flows", "result", flow_id, "--wait", "30")
    dexlite.ok(
        "flows", "start", "ProgressFlow", flow_id, "--input", '{"sections": 2, "delaySeconds": 0}'
    )

    earlier = record(dexlite.ok("flows", "describe", flow_id, "--run-id", first["runId"]))
    assert (earlier["Run ID"], earlier["Input"]) == (
        first["runId"],
        '{"sections":1,"delaySeconds":0.0}',
    )
    latest = record(dexlite.ok("flows", "describe", flow_id))
    assert latest["Input"] == '{"sections":2,"delaySeconds":0.0}'


def test_a_pending_row_lists_every_timer_channel_and_subflow_it_waits_on() -> None:
    # No bundled example keeps a SubFlow pending long enough to describe; the row is formatted
    # the same whatever the server.
    step = engine.PendingStep(
        step_execution_id="FanOut-1",
        step_type="FanOut",
        phase="WAITING",
        attempt=2,
        created_at=datetime.fromisoformat("2026-01-31T09:00:00+00:00"),
        due_at=None,
        timers=[datetime.fromisoformat("2026-01-31T10:30:00.5+01:00")],
        channels=["orders", "replies/eu"],
        sub_flows=["SubFlow:p-FanOut-1-0"],
    )
    assert pending_row(step) == [
        "FanOut-1",
        "FanOut",
        "WAITING",
        "2",
        "-",
        "Timer 2026-01-31T09:30:00.500Z, Channel orders, Channel replies/eu,"
        " SubFlow SubFlow:p-FanOut-1-0",
    ]
