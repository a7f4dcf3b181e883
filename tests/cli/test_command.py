"""The ``dexlite`` command itself: ``--help`` on every command, the entry points, and the
server commands ``serve`` and ``openapi`` on their new command-line library."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from app.cli import dexlite, main
from tests.cli.running import RUN_SECONDS, Dexlite, command_env, wait_answering
from tests.server import ROOT, free_port
from tests.support.backends import backend_independent

pytestmark = backend_independent("the command line, not the database")

CLIENT_COMMANDS = {
    ("flows", "start"),
    ("flows", "describe"),
    ("flows", "result"),
    ("flows", "search"),
    ("flows", "stop"),
    ("flows", "history"),
    ("flows", "list"),
    ("flows", "execute"),
    ("flows", "time-travel"),
    ("flows", "time-travel-all"),
    ("flow-types",),
    ("rpc",),
    ("attributes", "get"),
    ("attributes", "set"),
    ("channels", "list"),
    ("channels", "publish"),
    ("streams", "tail"),
    ("flows", "skip-timer"),
    ("schedules", "create"),
    ("schedules", "list"),
    ("schedules", "describe"),
    ("schedules", "update"),
    ("schedules", "pause"),
    ("schedules", "unpause"),
    ("schedules", "trigger"),
    ("schedules", "backfill"),
    ("schedules", "delete"),
}
GROUPS = {(), ("flows",), ("attributes",), ("channels",), ("streams",), ("schedules",)}
SERVER_COMMANDS = {("serve",), ("openapi",)}


def _paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Yield the path of ``command`` and of every command under it (a group has ``commands``)."""
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _paths(sub, (*path, name))


def test_the_command_tree_is_the_documented_one() -> None:
    assert set(_paths(get_command(dexlite))) == CLIENT_COMMANDS | GROUPS | SERVER_COMMANDS


@pytest.mark.parametrize("path", sorted(CLIENT_COMMANDS | GROUPS | SERVER_COMMANDS))
def test_help_on_every_command_exits_0(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(dexlite, [*path, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert f"Usage: dexlite {' '.join(path)}".rstrip() in result.output
    if path not in SERVER_COMMANDS:
        assert "Exit codes: 0 success; 1 server error" in result.output


#: Every command, discovered from the Click command tree rather than listed by hand.
EVERY_PATH = sorted(_paths(get_command(dexlite)))
#: The width the help must fit, and the columns rich keeps around a paragraph (one each side).
WIDTH = 80
MARGIN = 2


def _help(path: tuple[str, ...], columns: int = WIDTH) -> str:
    """Return the ``--help`` of ``dexlite path...`` in a terminal ``columns`` wide."""
    result = CliRunner().invoke(dexlite, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", EVERY_PATH, ids=lambda path: " ".join(path) or "dexlite")
def test_help_fits_80_columns_and_cuts_nothing(path: tuple[str, ...]) -> None:
    shown = _help(path)
    assert [line for line in shown.splitlines() if len(line) > WIDTH] == []
    # rich ends a cell it had to cut (an option's name, a long word) with an ellipsis.
    assert "…" not in shown


@pytest.mark.parametrize("path", EVERY_PATH, ids=lambda path: " ".join(path) or "dexlite")
def test_help_text_wraps_at_the_terminal_not_where_the_docstring_does(
    path: tuple[str, ...],
) -> None:
    lines = _help(path).splitlines()
    first_box = next((n for n, line in enumerate(lines) if line.startswith("╭")), len(lines))
    prose = lines[2:first_box]  # from the usage line to the first box
    for line, following in zip(prose, prose[1:], strict=False):
        if line.strip() and following.strip():
            # Within a paragraph a line ends early only when the next word does not fit.
            next_word = following.split()[0]
            assert len(line.rstrip()) + 1 + len(next_word) > WIDTH - MARGIN, (line, following)


def test_dexlite_help_in_a_process_fits_80_columns() -> None:
    done = Dexlite({})("--help", COLUMNS=str(WIDTH))
    assert (done.returncode, done.stderr) == (0, ""), done
    assert max(len(line) for line in done.stdout.splitlines()) == WIDTH


@pytest.mark.parametrize("path", sorted(CLIENT_COMMANDS))
def test_every_client_command_takes_url_token_and_json(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(dexlite, [*path, "--help"], env={"COLUMNS": "120"})
    for option in ("--url", "--token", "--json", "DEXLITE_URL", "DEXLITE_API_TOKEN"):
        assert option in result.output


def test_python_m_app_cli_and_main_run_the_command() -> None:
    done = Dexlite({})("--help")
    assert (done.returncode, done.stderr) == (0, ""), done
    assert "Usage: dexlite" in done.stdout
    assert main(["flows", "--help"]) == 0
    assert main(["flows", "no-such-command"]) == 2


def test_pyproject_names_main_as_the_dexlite_script() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '\ndexlite = "app.cli:main"\n' in text


def test_openapi_writes_the_committed_document_to_a_file_or_stdout(tmp_path: Path) -> None:
    committed = (ROOT / "openapi.json").read_text()
    target = tmp_path / "openapi.json"
    assert CliRunner().invoke(dexlite, ["openapi", "--output", str(target)]).exit_code == 0
    assert target.read_text() == committed
    printed = CliRunner().invoke(dexlite, ["openapi", "-o", "-"])
    assert (printed.exit_code, printed.output) == (0, committed)


def test_serve_serves_the_api_on_the_given_host_and_port(tmp_path: Path) -> None:
    port = free_port()
    env = command_env(
        {
            "DEXLITE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/dexlite.db",
            "DEXLITE_BLOB_DIR": str(tmp_path / "blobs"),
            "DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL",
            "DEXLITE_PORT": "1",  # --port wins over the setting
        }
    )
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(
        [*Dexlite({}).argv(*args), "--no-access-log"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_answering(process, port)
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=RUN_SECONDS)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0, stdout
    assert stdout.splitlines()[:2] == [
        f"dexlite: playground at http://127.0.0.1:{port}/playground/",
        f"dexlite: database sqlite+aiosqlite:///{tmp_path}/dexlite.db",
    ]
