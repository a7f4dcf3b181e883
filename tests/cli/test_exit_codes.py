"""The exit status and the ``error: CODE: detail`` line of every failure a client command
reports: not found, conflict, bad input, unauthenticated, and a server that is not there."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.cli.running import SERVER_ENV, Dexlite, parsed
from tests.server import ServerProcess, free_port
from tests.support.backends import backend_independent

pytestmark = backend_independent("the CLI speaks HTTP; the server's backend is tested elsewhere")

TOKEN = "cli-test-token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Run a server that needs ``Authorization: Bearer cli-test-token``."""
    env = {**SERVER_ENV, "DEXLITE_API_TOKEN": TOKEN}
    with ServerProcess(tmp_path_factory.mktemp("cli-guarded"), env=env) as running:
        yield running


def _fails(done: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    """Assert ``done`` exited with ``status``, printed nothing, and ``line`` on stderr."""
    assert (done.returncode, done.stdout, done.stderr) == (status, "", line + "\n"), done


def test_describe_of_an_unknown_flow_exits_3(dexlite: Dexlite, flow_id: str) -> None:
    _fails(
        dexlite("flows", "describe", flow_id),
        3,
        f"error: FLOW_NOT_FOUND: Flow {flow_id} was not found",
    )
    assert dexlite("flows", "result", flow_id).returncode == 3
    assert dexlite("flows", "history", flow_id).returncode == 3
    assert dexlite("flows", "stop", flow_id).returncode == 3


def test_rpc_errors_exit_3_for_an_unknown_rpc_and_4_for_a_held_lock(
    dexlite: Dexlite, flow_id: str
) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    _fails(
        dexlite("rpc", flow_id, "nope"),
        3,
        "error: RPC_NOT_FOUND: Flow type CounterFlow has no RPC named 'nope'",
    )
    dexlite.ok("rpc", flow_id, "hold_counter_lock", "--input", "60")
    try:
        # The Step writes this once it holds the lock: an increment sent now conflicts.
        tail = ("streams", "tail", "CounterFlow", flow_id, "counter-lock")
        held = dexlite(*tail, "--from-start", "--limit", "1")
        assert held.stdout.endswith("  #HoldCounterLock-1  holding the counter lock for 60 s\n")
        conflict = dexlite("rpc", flow_id, "increment", "--input", "1")
        assert (conflict.returncode, conflict.stdout) == (4, ""), conflict
        assert conflict.stderr.startswith("error: RPC_LOCK_CONFLICT: ")
    finally:
        dexlite.ok("flows", "stop", flow_id, "--type", "TERMINATE")


def test_a_duplicate_start_with_reject_duplicate_exits_4(dexlite: Dexlite, flow_id: str) -> None:
    args = ("flows", "start", "CounterFlow", flow_id, "--id-reuse-policy", "REJECT_DUPLICATE")
    run_id = parsed(dexlite("flows", "start", "CounterFlow", flow_id, "--json"))["runId"]
    _fails(
        dexlite(*args),
        4,
        f"error: FLOW_ALREADY_STARTED: Flow {flow_id} is already running (run {run_id})",
    )


def test_invalid_input_json_exits_2_and_sends_nothing(dexlite: Dexlite, flow_id: str) -> None:
    done = dexlite("flows", "start", "CounterFlow", flow_id, "--input", "{not json")
    assert (done.returncode, done.stdout) == (2, "")
    assert re.fullmatch(r"error: INVALID_ARGUMENT: --input is not valid JSON \(.+\)\n", done.stderr)
    assert dexlite("flows", "describe", flow_id).returncode == 3
    assert dexlite("rpc", flow_id, "increment", "--input", "").returncode == 2


@pytest.mark.parametrize(
    "args",
    [
        ("flows", "start", "CounterFlow"),
        ("flows", "execute", "CounterFlow"),
    ],
)
def test_a_bare_word_as_input_exits_2_saying_how_a_string_is_written(
    dexlite: Dexlite, flow_id: str, args: tuple[str, ...]
) -> None:
    _fails(
        dexlite(*args, flow_id, "--input", "hello"),
        2,
        "error: INVALID_ARGUMENT: --input must be JSON; a string is written --input '\"hello\"'",
    )
    assert dexlite("flows", "describe", flow_id).returncode == 3


def test_the_string_hint_is_quoted_for_the_shell(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    _fails(
        dexlite("rpc", flow_id, "increment", "--input", "it's"),
        2,
        "error: INVALID_ARGUMENT: --input must be JSON; a string is written"
        " --input '\"it'\"'\"'s\"'",
    )


def test_a_bad_query_exits_2_with_its_position(dexlite: Dexlite) -> None:
    _fails(
        dexlite("flows", "search", "FlowType ="),
        2,
        "error: INVALID_QUERY: the query ends too early; expected one of FALSE, TRUE, a number,"
        " a quoted string (at position 10 of the query)",
    )
    # A detail that names the position already says it once, with a hint for "==".
    _fails(
        dexlite("flows", "search", "FlowType == 'X'"),
        2,
        "error: INVALID_QUERY: unexpected \"= 'X'\" at position 10; expected one of FALSE, TRUE,"
        " a number, a quoted string (compare with a single =, not ==)",
    )


def test_a_request_the_schema_refuses_exits_2(dexlite: Dexlite, flow_id: str) -> None:
    done = dexlite("flows", "start", "CounterFlow", flow_id, "--timeout-seconds", "0")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("error: VALIDATION_ERROR: body.options.timeoutSeconds: ")


def test_an_unknown_attribute_name_exits_2(dexlite: Dexlite, flow_id: str) -> None:
    dexlite.ok("flows", "start", "CounterFlow", flow_id)
    _fails(
        dexlite("attributes", flow_id, "nope"),
        2,
        "error: INVALID_ARGUMENT: name: Flow type CounterFlow declares no Attribute or"
        " AttributeMap named 'nope'",
    )


@pytest.mark.parametrize(
    "args",
    [
        ("flows", "describe"),  # the ID is missing
        ("flows", "result", "x", "--wait", "61"),
        ("flows", "stop", "x", "--type", "PAUSE"),
        ("flows", "search", "--page-size", "0"),
        ("flows", "nope"),
    ],
)
def test_usage_errors_exit_2_before_any_request(args: tuple[str, ...]) -> None:
    # Nothing listens on this URL: a request would exit 1, not 2.
    nowhere = Dexlite({"DEXLITE_URL": f"http://127.0.0.1:{free_port()}"})
    done = nowhere(*args)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert "Usage: dexlite" in done.stderr


def test_a_wrong_or_missing_token_exits_5_and_the_right_one_passes(
    guarded: ServerProcess, flow_id: str
) -> None:
    dexlite = Dexlite({"DEXLITE_URL": guarded.url})
    wrong = dexlite("flows", "describe", flow_id, "--token", "wrong")
    assert (wrong.returncode, wrong.stdout) == (5, ""), wrong
    assert wrong.stderr.startswith("error: UNAUTHENTICATED: ")
    assert dexlite("flows", "search").returncode == 5

    assert dexlite("flows", "start", "CounterFlow", flow_id, "--token", TOKEN).returncode == 0
    # The token also comes from DEXLITE_API_TOKEN, the variable the server reads.
    shown = dexlite("flows", "describe", flow_id, "--json", DEXLITE_API_TOKEN=TOKEN)
    assert (shown.returncode, shown.stderr) == (0, ""), shown


def test_a_server_that_is_not_there_exits_1_with_one_line(dexlite: Dexlite, flow_id: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = dexlite("flows", "describe", flow_id, "--url", url)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"error: CONNECTION_ERROR: cannot reach {url}: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
