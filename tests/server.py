"""A real dexlite server in a subprocess, for tests that need a process to kill or a browser,
and for the bench's loads.

Every subprocess test starts its server through :class:`ServerProcess`: a free port, its own
database and blob directory, only the settings the test gives (a developer's ``DEXLITE_*``
variables do not leak in), output captured in a log file the failure message quotes. The bench
(``bench._common.server``) starts its servers through the same class with an environment of its
own (``base_env``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import httpx

from tests.support.forked import ForkedProcess, forking_enabled
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
#: Generous: on a loaded 2-core machine (four test workers, each starting servers) a start that
#: migrates or checks a PostgreSQL database has taken over 30 s.
STARTUP_SECONDS = 60.0
TEST_LEASE_SECONDS = 2.0
TEST_POLL_SECONDS = 0.2


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listens(pid: int, port: int) -> bool:
    """Return True when process ``pid`` holds the socket listening on 127.0.0.1:``port``
    (Linux: its socket inodes against /proc/net/tcp)."""
    try:
        links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
        inodes = {link[8:-1] for link in links if link.startswith("socket:[")}
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:  # the process is gone (its exit is seen by the caller)
        return False
    wanted = f"0100007F:{port:04X}"
    for line in lines:
        fields = line.split()
        # local address, state (0A: LISTEN), inode
        if fields[1] == wanted and fields[3] == "0A" and fields[9] in inodes:
            return True
    return False


class ServerProcess:
    """``uvicorn --factory <factory>`` on a free port over a database in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        factory: str = "app.main:create_app",
        env: dict[str, str] | None = None,
        *,
        log_level: str = "warning",
        serve: bool = False,
        base_env: Mapping[str, str] | None = None,
        ready_path: str = "/readyz",
        own_session: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.factory = factory
        #: Run ``dexlite serve`` (the registry then comes from DEXLITE_REGISTRY in ``env``)
        #: instead of uvicorn on ``factory``.
        self.serve = serve
        self.extra_env = env or {}
        #: The server's whole environment as given (the bench's, with its own database); None:
        #: this process's without its DEXLITE_* variables, over the test's database.
        self.base_env = base_env
        #: The path that answers 200 once the server is ready to serve.
        self.ready_path = ready_path
        #: Start the server in a session of its own, out of reach of a Ctrl-C in the terminal
        #: (the bench stops its servers itself); tests leave it in theirs.
        self.own_session = own_session
        self.log_level = log_level
        self.port = free_port()
        self.log_path = data_dir / f"server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None

    @property
    def url(self) -> str:
        """Return the server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        """Return what the server printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 30) -> str:
        """Return the last ``lines`` lines the server printed."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def _environment(self) -> dict[str, str]:
        if self.base_env is not None:
            return {**self.base_env, **self.extra_env}
        # Imported here: the bench, which gives its own environment, needs no test backend.
        from tests.support.backends import database_url_for

        env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
        env.update(
            DEXLITE_DATABASE_URL=database_url_for(self.data_dir),
            DEXLITE_BLOB_DIR=str(self.data_dir / "blobs"),
            PYTHONPATH=str(ROOT),
            # On PostgreSQL a killed server's work is taken over once its lease expires: short
            # leases keep the restarts of the tests quick.
            DEXLITE_POSTGRES__LEASE_SECONDS=str(TEST_LEASE_SECONDS),
            DEXLITE_POSTGRES__POLL_SECONDS=str(TEST_POLL_SECONDS),
            **self.extra_env,
        )
        return env

    def start(self) -> ServerProcess:
        """Start the server and return once its ready path (/readyz: recovery has finished)
        answers 200."""
        if self._forked():
            # uvicorn from a process that has imported it all: the same server, a second
            # less of CPU per start (see tests.support.zygote).
            self.process = ForkedProcess(
                self._uvicorn_args(), ROOT, self._environment(), self.log_path
            )
        else:
            with self.log_path.open("ab") as log:
                # sys.executable is the venv's python, so the server runs the code under test.
                self.process = subprocess.Popen(
                    self._command(),
                    cwd=ROOT,
                    env=self._environment(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=self.own_session,
                )
        try:
            wait_until(self._ready, within=STARTUP_SECONDS, interval=0.05, what="the server start")
        except AssertionError as exc:
            # Leave no process behind (it would outlive the test), and say what it printed.
            self.kill()
            raise AssertionError(f"{exc}; the server printed:\n{self.log_text()}") from None
        return self

    def _command(self) -> list[str]:
        if self.serve:
            return [
                *(sys.executable, "-m", "app.cli", "serve"),
                *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", self.log_level),
            ]
        return [sys.executable, "-m", "uvicorn", *self._uvicorn_args()]

    def _uvicorn_args(self) -> list[str]:
        return [
            *("--factory", self.factory),
            *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", self.log_level),
        ]

    def _forked(self) -> bool:
        # A test's own server (the bench's, and `dexlite serve`, start the ordinary way).
        return not (self.serve or self.own_session) and self.base_env is None and forking_enabled()

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"server exited ({self.process.returncode}):\n{self.log_text()}")
        if not listens(self.process.pid, self.port):
            # Not bound yet, or (another test's server took the port between free_port and
            # this bind, and this one is failing) not ours: never ask the other one.
            return False
        try:
            return httpx.get(f"{self.url}{self.ready_path}", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        """SIGKILL the server: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        """Send SIGTERM (what a service manager sends) and return the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def interrupt(self, timeout: float = 15.0) -> int:
        """Send SIGINT (a graceful shutdown) and return the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout)

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM), killing it if it does not exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
