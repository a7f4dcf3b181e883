"""The README's tour, run the way a reader runs it: its Flow written to ``orders.py`` in an empty
directory, the server started there with the README's own command line, and the README's curl
commands run by bash against it, each answer checked.

Nothing of the tour is copied here: the Python block, the serve command and the curl commands
are all read from README.md. Only ``localhost:8000`` becomes the test server's address (a free
port, set through ``DEXLITE_PORT``), and the database is a file of the test's own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server import free_port
from tests.support.backends import backend_independent
from tests.support.waiting import wait_until

pytestmark = backend_independent("the README's commands, on the SQLite file they create")

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: How the README's commands name the server.
README_ADDRESS = "localhost:8000"
#: Each command's HTTP status on a line of its own after its body, so that a command can be
#: judged by both; the commands themselves run unchanged.
STATUS_AFTER_BODY = (
    "curl() { command curl --silent --show-error --write-out '\\n%{http_code}' \"$@\"; }"
)
COMMAND_SECONDS = 30
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def _tour() -> tuple[str, str, list[str]]:
    """Return the tour's Python block, its serve command and its curl commands."""
    blocks = [(lang, body) for lang, body in FENCE.findall(README.read_text())]
    python = [i for i, (lang, _) in enumerate(blocks) if lang == "python"]
    assert python, "the README has no python block"
    after = [body for lang, body in blocks[python[0] + 1 :] if lang == "sh"]
    [serve] = [body for body in after if "DEXLITE_REGISTRY=" in body]
    [curls] = [body for body in after if "curl " in body][:1]
    return blocks[python[0]][1], serve.strip(), _commands(curls)


def _commands(block: str) -> list[str]:
    """Split a shell block into its commands, joining continuation lines."""
    joined = re.sub(r"\\\n\s*", "", block)
    return [line.strip() for line in joined.splitlines() if line.strip()]


def _environment(directory: Path, port: int) -> dict[str, str]:
    """Return a reader's shell environment: the venv's ``dexlite`` on PATH, none of the
    developer's DEXLITE_* settings, and a database and port of this test's own."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_") and k != "PYTHONPATH"
    }
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        DEXLITE_PORT=str(port),
        DEXLITE_DATABASE_URL=f"sqlite+aiosqlite:///{directory}/tour.db",
        DEXLITE_BLOB_DIR=str(directory / "blobs"),
        DEXLITE_SQLITE__SYNCHRONOUS="NORMAL",
    )
    return env


@pytest.fixture
def tour_server(tmp_path: Path) -> Iterator[str]:
    """Write the tour's Flow to ``orders.py`` and run the README's serve command next to it;
    yield the server's address (``127.0.0.1:<port>``)."""
    python, serve, _ = _tour()
    (tmp_path / "orders.py").write_text(python)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        # Its own session: the stop below signals the server and whatever bash started.
        process = subprocess.Popen(
            ["bash", "-c", serve],
            cwd=tmp_path,
            env=_environment(tmp_path, port),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the server exited:\n{log.read_text()}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, within=30, interval=0.05, what="the README's server to answer")
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(COMMAND_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _run(command: str, address: str, cwd: Path) -> tuple[int, Any]:
    """Run one README command with bash against ``address``; return its HTTP status and the
    JSON body it printed."""
    done = subprocess.run(
        ["bash", "-c", f"{STATUS_AFTER_BODY}\n{command.replace(README_ADDRESS, address)}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), (command, done)
    body, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(body)


def test_the_readme_tour_reads_as_a_working_session() -> None:
    python, serve, commands = _tour()
    assert "class OrderFlow" in python and "registry = Registry(" in python
    assert serve == "DEXLITE_REGISTRY=orders:registry dexlite serve"
    assert len(commands) == 4, commands
    assert all(command.startswith("curl ") and README_ADDRESS in command for command in commands)


def test_the_readme_tour_runs_as_written(tour_server: str, tmp_path: Path) -> None:
    start, add_note, read_note, result = _tour()[2]

    status, started = _run(start, tour_server, tmp_path)
    assert status == 201, started
    assert (started["flowId"], started["started"]) == ("order-7", True)

    assert _run(add_note, tour_server, tmp_path) == (200, {"output": "fragile"})

    status, attributes = _run(read_note, tour_server, tmp_path)
    assert status == 200, attributes
    assert (attributes["flowId"], attributes["values"]) == ("order-7", {"note": "fragile"})
    assert attributes["runId"] == started["runId"]

    # The Timer takes 5 s of real time here: the command waits for it, as it says.
    status, outcome = _run(result, tour_server, tmp_path)
    assert status == 200, outcome
    assert outcome["status"] == "COMPLETED", outcome
    assert [c["output"] for c in outcome["completions"]] == ["order 7 shipped, note: fragile"]
