"""``dexlite serve`` as a newcomer starts it: a registry module next to where it starts is
found, and a server that cannot start says why in one line on stderr and exits with status 1,
before any playground URL."""

from __future__ import annotations

import signal
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.cli.running import RUN_SECONDS, Dexlite, command_env, wait_answering
from tests.server import ROOT, free_port
from tests.support.backends import backend_independent

pytestmark = backend_independent("the command line, not the database")

ORDERS = textwrap.dedent(
    """
    from engine import Context, Flow, Registry, Step, StepDecision, StepList, graceful_complete


    class Ship(Step[str]):
        async def execute(self, context: Context, input: str) -> StepDecision:
            return graceful_complete(f"shipped {input}")


    class OrderFlow(Flow[str]):
        def get_steps(self) -> StepList[str]:
            return StepList.start_step(Ship())


    registry = Registry([OrderFlow()])
    """
)


def _settings(tmp_path: Path, port: int, **more: str) -> dict[str, str]:
    return command_env(
        {
            "DEXLITE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/dexlite.db",
            "DEXLITE_BLOB_DIR": str(tmp_path / "blobs"),
            "DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL",
            "DEXLITE_PORT": str(port),
            **more,
        }
    )


def _serve(cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    # Not from the repository: only what an installed dexlite finds.
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    return subprocess.Popen(
        [*Dexlite({}).argv("serve", "--log-level", "warning"), "--no-access-log"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=RUN_SECONDS)
    finally:
        process.kill()
        process.wait()


def _refused(cwd: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run a serve that must not start; return its stdout and its one stderr line."""
    done = subprocess.run(
        [*Dexlite({}).argv("serve", "--log-level", "warning")],
        cwd=cwd,
        env={k: v for k, v in env.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "playground" not in done.stdout
    return done.stdout, lines[0]


def test_a_registry_module_in_the_current_directory_is_served(tmp_path: Path) -> None:
    (tmp_path / "orders.py").write_text(ORDERS)
    port = free_port()
    process = _serve(tmp_path, _settings(tmp_path, port, DEXLITE_REGISTRY="orders:registry"))
    try:
        wait_answering(process, port)
        types = httpx.get(f"http://127.0.0.1:{port}/api/v1/flow-types", timeout=5).json()
    finally:
        stdout, stderr = _stop(process)
    assert [t["flowType"] for t in types["flowTypes"]] == ["OrderFlow"], types
    assert stdout.splitlines()[0] == f"dexlite: playground at http://127.0.0.1:{port}/playground/"
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("registry", "why"),
    [
        (
            "nothere:registry",
            "DEXLITE_REGISTRY='nothere:registry': no module named 'nothere' in the current "
            "directory ({cwd}) or the installed packages",
        ),
        ("orders:missing", "DEXLITE_REGISTRY='orders:missing': module 'orders' has no attribute"),
        ("orders", "DEXLITE_REGISTRY='orders' must look like 'module:attribute'"),
    ],
)
def test_a_registry_that_does_not_load_is_one_line(tmp_path: Path, registry: str, why: str) -> None:
    (tmp_path / "orders.py").write_text(ORDERS)
    _, line = _refused(tmp_path, _settings(tmp_path, free_port(), DEXLITE_REGISTRY=registry))
    assert line.startswith("dexlite: cannot start: " + why.format(cwd=tmp_path)), line


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEXLITE_PORT", "eighty"),
        ("DEXLITE_STREAM__TRIM_WORKERS", "0"),  # a setting of a group
        ("DEXLITE_STREAM_STORE_BACKEND", "mongo"),  # the backend's other name
    ],
)
def test_a_setting_that_does_not_parse_is_one_line_naming_it(
    tmp_path: Path, variable: str, value: str
) -> None:
    env = _settings(tmp_path, free_port())
    env[variable] = value
    _, line = _refused(tmp_path, env)
    assert line.startswith(f"dexlite: cannot start: {variable}: "), line


def test_a_second_server_on_one_sqlite_file_or_one_port_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    first = _serve(ROOT, _settings(tmp_path, port))
    try:
        wait_answering(first, port)
        _, line = _refused(ROOT, _settings(tmp_path, free_port()))
        assert line.startswith(
            f"dexlite: cannot start: the database {tmp_path}/dexlite.db is already served by "
            "process"
        ), line
        _, line = _refused(ROOT, _settings(tmp_path / "other", port))
        assert line == (
            f"dexlite: cannot start: cannot listen on 127.0.0.1:{port}: Address already in use"
        ), line
    finally:
        _stop(first)
