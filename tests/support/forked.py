"""Server processes forked by ``tests.support.zygote``, behind the part of ``subprocess.Popen``
the tests use (``pid``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``,
``kill``).

Each test worker starts one zygote on its first server and keeps it until it exits. A forked
server is not this process's child: its end is seen through a pidfd (readable once the process
has exited, and holding its PID until the zygote reaps it), and its exit status comes from the
zygote. ``DEXLITE_TEST_FORK_SERVERS=0`` starts every server the ordinary way instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def forking_enabled() -> bool:
    """Return whether test servers are forked (the default) rather than started by exec."""
    return os.environ.get("DEXLITE_TEST_FORK_SERVERS", "1") != "0" and hasattr(os, "pidfd_open")


class _Zygote:
    """The client of one zygote process (started on first use, ended at exit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        atexit.register(self.close)

    def _started(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
            env["PYTHONPATH"] = str(ROOT)
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.zygote"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        return self._process

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` and return the answer."""
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the server zygote ended ({process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the zygote (its input ends) and wait for it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.close()
            process.wait(10)
            process.stdout.close()


_ZYGOTE = _Zygote()


class ForkedProcess:
    """A server process forked by the zygote, used as a ``subprocess.Popen``."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        log: Path | None = None,
        *,
        program: str = "uvicorn",
        stdout: Path | None = None,
        stderr: Path | None = None,
    ) -> None:
        """Fork ``program`` (uvicorn, or ``dexlite``) on ``argv``, its output to ``log`` or
        to ``stdout`` and ``stderr``."""
        self.args = argv
        self.returncode: int | None = None
        spawn: dict[str, Any] = {"argv": argv, "env": env, "cwd": str(cwd), "program": program}
        if log is not None:
            spawn["log"] = str(log)
        else:
            assert stdout is not None and stderr is not None
            spawn.update(stdout=str(stdout), stderr=str(stderr))
        self.pid: int = _ZYGOTE.ask({"spawn": spawn})["pid"]
        # Opened before anyone reaps the process, so the PID cannot name another one.
        self._pidfd = os.pidfd_open(self.pid)

    def poll(self) -> int | None:
        """Return the exit status once the process has exited, else None."""
        return self._ended(0.0)

    def wait(self, timeout: float | None = None) -> int:
        """Return the exit status once the process exits; raise ``subprocess.TimeoutExpired``
        after ``timeout`` seconds."""
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def _ended(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            readable, _, _ = select.select([self._pidfd], [], [], timeout)
            if readable:
                self.returncode = int(_ZYGOTE.ask({"reap": self.pid})["returncode"])
                os.close(self._pidfd)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` unless the process has already exited."""
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        """Send SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """Send SIGKILL."""
        self.send_signal(signal.SIGKILL)

    def __del__(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(AttributeError, OSError):
                os.close(self._pidfd)
