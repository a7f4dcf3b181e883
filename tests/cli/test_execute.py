"""``dexlite flows execute`` against a live server: it starts a Flow and waits, poll after
poll, for the run to close, then prints and exits like ``flows result``."""

from __future__ import annotations

import json
import signal

import httpx

from tests.cli.running import RUN_SECONDS, Dexlite, parsed, record, table
from tests.support.backends import backend_independent

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")

#: Three sections of 0.4 s: the run outlasts several polls of 0.2 s.
SLOW_PROGRESS = '{"sections": 3, "delaySeconds": 0.4}'


def test_execute_polls_until_the_run_completes_and_prints_its_result(
    dexlite: Dexlite, flow_id: str
) -> None:
    done = dexlite(
        "flows", "execute", "ProgressFlow", flow_id, "--input", SLOW_PROGRESS, "--wait", "0.2"
    )
    assert done.returncode == 0, done
    run_id = record(done.stdout)["Run ID"]
    assert done.stderr == f"started run {run_id} of Flow {flow_id}; waiting for its result\n"
    assert record(done.stdout) == {
        "Flow ID": flow_id,
        "Run ID": run_id,
        "Status": "COMPLETED",
        "Error type": "-",
        "Error message": "-",
    }
    assert table(done.stdout) == [
        {
            "STEP TYPE": "WriteProgress",
            "STEP EXECUTION ID": "WriteProgress-1",
            "OUTPUT": '"3 sections done"',
        }
    ]
    # What it printed is what `flows result` prints for the run.
    assert done.stdout == dexlite.ok("flows", "result", flow_id)


def test_execute_json_prints_the_wait_for_flow_answer_and_sends_the_start_options(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    done = dexlite(
        "flows", "execute", "ProgressFlow", flow_id,
        "--input", '{"sections": 1, "delaySeconds": 0}',
        "--request-id", "execute-1",
        "--timeout-seconds", "600",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done
    body = json.loads(done.stdout)
    assert body == api.get(f"/api/v1/flows/{flow_id}/result").json()
    assert (body["status"], body["completions"][0]["output"]) == ("COMPLETED", "1 sections done")
    first = api.get(f"/api/v1/flows/{flow_id}/history").json()["events"][0]
    assert (first["details"]["requestId"], first["details"]["input"]) == (
        "execute-1",
        {"sections": 1, "delaySeconds": 0.0},
    )


def test_execute_of_a_run_that_times_out_exits_6_with_its_result(
    dexlite: Dexlite, flow_id: str
) -> None:
    done = dexlite(
        "flows", "execute", "TimerFlow", flow_id,
        "--input", '{"seconds": 600}',
        "--timeout-seconds", "0.5",
        "--wait", "0.2",
    )  # fmt: skip
    assert done.returncode == 6, done
    assert record(done.stdout) == {
        "Flow ID": flow_id,
        "Run ID": record(done.stdout)["Run ID"],
        "Status": "TIMED_OUT",
        "Error type": "-",
        "Error message": "the Flow timed out",
    }


def test_execute_of_a_running_flow_id_with_reject_duplicate_exits_4_and_waits_for_nothing(
    dexlite: Dexlite, flow_id: str
) -> None:
    run_id = parsed(dexlite("flows", "start", "CounterFlow", flow_id, "--json"))["runId"]
    done = dexlite(
        "flows", "execute", "CounterFlow", flow_id, "--id-reuse-policy", "REJECT_DUPLICATE"
    )
    assert (done.returncode, done.stdout) == (4, ""), done
    assert done.stderr == (
        f"error: FLOW_ALREADY_STARTED: Flow {flow_id} is already running (run {run_id})\n"
    )


def test_execute_with_ignore_already_started_follows_the_run_that_request_started(
    dexlite: Dexlite, flow_id: str
) -> None:
    args = ("ProgressFlow", flow_id, "--input", SLOW_PROGRESS, "--request-id", "same")
    started = parsed(dexlite("flows", "start", *args, "--json"))
    again = dexlite("flows", "execute", *args, "--ignore-already-started", "--wait", "0.2")
    assert again.returncode == 0, again
    assert again.stderr == (
        f"run {started['runId']} of Flow {flow_id} was started by this request ID;"
        " waiting for its result\n"
    )
    assert (record(again.stdout)["Run ID"], record(again.stdout)["Status"]) == (
        started["runId"],
        "COMPLETED",
    )


def test_execute_stops_waiting_on_ctrl_c_with_status_130_and_leaves_the_run_running(
    dexlite: Dexlite, flow_id: str
) -> None:
    process = dexlite.popen("flows", "execute", "CounterFlow", flow_id)
    try:
        assert process.stderr is not None
        notice = process.stderr.readline()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=RUN_SECONDS)
    finally:
        process.kill()
        process.wait()
    run_id = notice.split()[2]
    assert notice == f"started run {run_id} of Flow {flow_id}; waiting for its result\n"
    assert (process.returncode, stdout) == (130, "")
    assert stderr == f"stopped waiting; run {run_id} of Flow {flow_id} goes on\n"
    assert parsed(dexlite("flows", "describe", flow_id, "--json"))["status"] == "RUNNING"


def test_execute_refuses_a_wait_outside_its_range_before_starting(
    dexlite: Dexlite, flow_id: str
) -> None:
    for wait in ("0", "61"):
        done = dexlite("flows", "execute", "CounterFlow", flow_id, "--wait", wait)
        assert (done.returncode, done.stdout) == (2, ""), done
        assert "Usage: dexlite flows execute" in done.stderr
        assert f"{wait} is not in the range 0.1 to 60" in done.stderr
    assert dexlite("flows", "describe", flow_id).returncode == 3
