"""``dexlite streams tail`` against a live server: messages as a ProgressFlow writes them,
from the start or only new ones, ``--limit``, ``--no-follow``, ``--json`` and Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess

import httpx

from tests.cli.running import RUN_SECONDS, Dexlite
from tests.support.backends import backend_independent

pytestmark = backend_independent("Streams live in the server's memory on every backend")

LINE = re.compile(r"(\S+)  (\S+)  (.*)")


def _lines(stdout: str) -> list[tuple[str, str]]:
    """Return (source, value) of each printed message, checking the time in front."""
    found = []
    for line in stdout.splitlines():
        match = LINE.fullmatch(line)
        assert match, line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", match[1])
        found.append((match[2], match[3]))
    return found


def _following(process: subprocess.Popen[str]) -> str:
    """Return the notice the command prints once it knows where it starts."""
    assert process.stderr is not None
    return process.stderr.readline()


def test_tail_from_start_prints_what_a_progress_flow_writes_and_stops_at_the_limit(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok(
        "flows",
        "start",
        "ProgressFlow",
        flow_id,
        "--input",
        '{"sections": 3, "delaySeconds": 0.05}',
    )
    done = dexlite(
        "streams", "tail", "ProgressFlow", flow_id, "progress", "--from-start", "--limit", "3"
    )
    assert done.returncode == 0, done
    assert _lines(done.stdout) == [
        ("#WriteProgress-1", "section 1 of 3 done"),
        ("#WriteProgress-1", "section 2 of 3 done"),
        ("#WriteProgress-1", "section 3 of 3 done"),
    ]
    assert done.stderr == (
        f"following ProgressFlow/{flow_id}/progress from the oldest retained message"
        " (Ctrl-C to stop)\n"
    )


def test_tail_json_prints_one_message_object_per_line(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok(
        "flows", "start", "ProgressFlow", flow_id, "--input", '{"sections": 2, "delaySeconds": 0}'
    )
    done = dexlite(
        "streams",
        "tail",
        "ProgressFlow",
        flow_id,
        "progress",
        "--from-start",
        "--limit",
        "2",
        "--json",
    )
    assert done.returncode == 0, done
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    assert [m["value"] for m in messages] == ["section 1 of 2 done", "section 2 of 2 done"]
    assert {m["source"] for m in messages} == {"#WriteProgress-1"}
    assert all(m.keys() == {"value", "resumeToken", "createdAt", "source"} for m in messages)


def test_tail_without_from_start_prints_only_messages_written_after_it_started(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    path = f"/api/v1/streams/ProgressFlow/{flow_id}/progress/messages"
    api.post(path, json={"source": "test", "value": "old"}).raise_for_status()
    process = dexlite.popen("streams", "tail", "ProgressFlow", flow_id, "progress", "--limit", "1")
    try:
        assert "from the next new message" in _following(process)
        api.post(path, json={"source": "test", "value": "new"}).raise_for_status()
        stdout, stderr = process.communicate(timeout=RUN_SECONDS)
    finally:
        process.kill()
        process.wait()
    assert (process.returncode, stderr) == (0, "")
    assert _lines(stdout) == [("test", "new")]


def test_tail_no_follow_prints_the_retained_messages_and_exits(
    dexlite: Dexlite, api: httpx.Client, flow_id: str
) -> None:
    path = f"/api/v1/streams/ProgressFlow/{flow_id}/progress/messages"
    for value in ("one", "two"):
        api.post(path, json={"source": "test", "value": value}).raise_for_status()
    done = dexlite(
        "streams", "tail", "ProgressFlow", flow_id, "progress", "--from-start", "--no-follow"
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert _lines(done.stdout) == [("test", "one"), ("test", "two")]


def test_tail_stops_on_ctrl_c_with_status_130_and_no_traceback(
    dexlite: Dexlite, flow_id: str
) -> None:
    process = dexlite.popen("streams", "tail", "ProgressFlow", flow_id, "progress")
    try:
        assert _following(process).startswith("following ")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=RUN_SECONDS)
    finally:
        process.kill()
        process.wait()
    assert (process.returncode, stdout, stderr) == (130, "", "")


def test_tail_of_an_undeclared_stream_is_not_found(dexlite: Dexlite, flow_id: str) -> None:
    done = dexlite("streams", "tail", "ProgressFlow", flow_id, "nope")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == (
        "error: STREAM_NOT_FOUND: Flow type ProgressFlow declares no Stream named 'nope'\n"
    )


def test_tail_without_the_flow_type_reads_it_from_the_flow(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok(
        "flows", "start", "ProgressFlow", flow_id, "--input", '{"sections": 2, "delaySeconds": 0}'
    )
    done = dexlite("streams", "tail", flow_id, "progress", "--from-start", "--limit", "2")
    assert done.returncode == 0, done
    assert _lines(done.stdout) == [
        ("#WriteProgress-1", "section 1 of 2 done"),
        ("#WriteProgress-1", "section 2 of 2 done"),
    ]
    assert done.stderr == (
        f"following ProgressFlow/{flow_id}/progress from the oldest retained message"
        " (Ctrl-C to stop)\n"
    )
    with_type = dexlite(
        "streams", "tail", "ProgressFlow", flow_id, "progress", "--from-start", "--no-follow"
    )
    assert (with_type.returncode, with_type.stdout) == (0, done.stdout)


def test_tail_without_the_flow_type_of_a_flow_that_does_not_exist_exits_3(
    dexlite: Dexlite, flow_id: str
) -> None:
    done = dexlite("streams", "tail", flow_id, "progress")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == f"error: FLOW_NOT_FOUND: Flow {flow_id} was not found\n"


def test_tail_with_one_or_four_arguments_is_a_usage_error(dexlite: Dexlite) -> None:
    for args in (("only-one",), ("a", "b", "c", "d")):
        done = dexlite("streams", "tail", *args)
        assert (done.returncode, done.stdout) == (2, ""), done
        assert "Usage: dexlite streams tail [OPTIONS] [TYPE] ID STREAM" in done.stderr
        assert f"takes 2 or 3 arguments, not {len(args)}" in done.stderr
