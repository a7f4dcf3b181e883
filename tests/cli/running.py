"""Running the ``dexlite`` command in a subprocess, as a user does, and reading its output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.server import ROOT
from tests.support.forked import ForkedProcess, forking_enabled
from tests.support.waiting import wait_until

#: A subprocess that takes longer has hung: the CLI's own long polls are shorter.
RUN_SECONDS = 60.0
#: The servers' settings: NORMAL keeps the commits quick (nothing here survives power loss).
SERVER_ENV = {"DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL"}
COLUMNS = re.compile(r" {2,}")


def command_env(extra: dict[str, str]) -> dict[str, str]:
    """Return the environment of a CLI subprocess: a developer's DEXLITE_* kept out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


@dataclass(frozen=True)
class Dexlite:
    """``python -m app.cli`` with extra environment variables (such as DEXLITE_URL)."""

    env: dict[str, str]

    def argv(self, *args: str) -> list[str]:
        """Return the command line of ``dexlite args...``."""
        return [sys.executable, "-m", "app.cli", *args]

    def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``dexlite args...`` to its end and return what it printed and its status.

        The process is forked from the test worker's zygote, which has imported the command
        already (``tests.support.zygote``), unless ``DEXLITE_TEST_FORK_SERVERS=0``."""
        argv, full_env = self.argv(*args), command_env({**self.env, **env})
        if not forking_enabled():
            return subprocess.run(
                argv, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=RUN_SECONDS
            )
        with tempfile.TemporaryDirectory(prefix="dexlite-cli-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            process = ForkedProcess(
                ["dexlite", *args], ROOT, full_env, program="dexlite", stdout=out, stderr=err
            )
            try:
                code = process.wait(RUN_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise
            return subprocess.CompletedProcess(
                argv, code, out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
            )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start ``dexlite args...`` with its output piped, for a command that follows."""
        return subprocess.Popen(
            self.argv(*args),
            cwd=ROOT,
            env=command_env(self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ok(self, *args: str) -> str:
        """Run ``dexlite args...``, assert it succeeded with nothing on stderr; return stdout."""
        done = self(*args)
        assert (done.returncode, done.stderr) == (0, ""), done
        return done.stdout


def record(stdout: str) -> dict[str, str]:
    """Return the ``label  value`` rows of a record (describe, start, result) as a dict."""
    rows = {}
    for line in stdout.split("\n\n")[0].splitlines():
        label, *value = COLUMNS.split(line, maxsplit=1)
        rows[label] = value[0] if value else ""
    return rows


def table(stdout: str) -> list[dict[str, str]]:
    """Return the rows of the (last) table in ``stdout``, keyed by column header."""
    lines = stdout.rstrip("\n").split("\n\n")[-1].splitlines()
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", lines[0])]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    headers = [lines[0][a:b].strip() for a, b in bounds]
    return [
        {h: line[a:b].strip() for h, (a, b) in zip(headers, bounds, strict=True)}
        for line in lines[1:]
    ]


def parsed(done: subprocess.CompletedProcess[str]) -> Any:
    """Return the JSON a ``--json`` command printed."""
    assert (done.returncode, done.stderr) == (0, ""), done
    return json.loads(done.stdout)


def wait_answering(process: subprocess.Popen[str], port: int) -> None:
    """Wait until the ``dexlite serve`` ``process`` answers /readyz on ``port``."""

    def ready() -> bool:
        assert process.poll() is None, process.communicate()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(ready, within=30, interval=0.05, what="dexlite serve to answer")
