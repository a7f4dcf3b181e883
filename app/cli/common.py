"""What every client command shares: its connection options, error reporting and exit codes."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Final, NoReturn, TypeVar

import typer

import engine
from app.cli import output
from app.cli.errors import CommandError, ExitCode, failure_of
from app.client import Client

T = TypeVar("T")

#: Seconds a request may take beyond the long poll it asks the server for.
TIMEOUT_SECONDS = 30.0

#: Where the client commands look for a server without --url or DEXLITE_URL.
DEFAULT_URL = "http://127.0.0.1:8000"
#: The exit status of a command stopped by Ctrl-C while it follows (128 + SIGINT, as shells
#: report it).
INTERRUPTED = 130
#: The help panel of the options every client command shares.
CONNECTION = "Connection and output"

#: The first characters of a JSON text that is not a bare word: an object, array or string.
JSON_OPENERS = frozenset('{["')

#: The epilog of every client command's --help.
EXIT_CODES = (
    "Exit codes: 0 success; 1 server error (5xx, 429) or server unreachable; 2 bad input (usage, "
    "invalid --input JSON, HTTP 400/413/422); 3 not found (404); 4 conflict (409, e.g. "
    "FLOW_ALREADY_STARTED, RPC_LOCK_CONFLICT); 5 unauthenticated (401). Errors are printed "
    "to stderr as 'error: CODE: detail'."
)

#: --url, default $DEXLITE_URL, else DEFAULT_URL.
UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        envvar="DEXLITE_URL",
        help="Base URL of the dexlite server.",
        rich_help_panel=CONNECTION,
    ),
]
#: --token, default $DEXLITE_API_TOKEN (the variable the server reads).
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="DEXLITE_API_TOKEN",
        help="Bearer token, for a server started with DEXLITE_API_TOKEN.",
        show_default=False,
        rich_help_panel=CONNECTION,
    ),
]
#: --json: print the response body instead of a table.
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json", help="Print the raw JSON response instead of a table.", rich_help_panel=CONNECTION
    ),
]
#: --run-id: one run of the Flow ID.
RunIdOption = Annotated[
    str | None,
    typer.Option("--run-id", help="A run of the Flow ID; default: its current or latest run."),
]
#: --input: a JSON value; absent, the request carries no input.
InputOption = Annotated[
    str | None,
    typer.Option(
        "--input", metavar="JSON", help="The input as JSON, e.g. '5' or '{\"a\": 1}' or '\"text\"'."
    ),
]
#: The Flow ID argument.
FlowIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The Flow ID.")]


class _NoInput:
    """The type of :data:`NO_INPUT`."""

    def __repr__(self) -> str:
        return "NO_INPUT"


#: What :func:`parse_input` returns when the user gave no input (the request sends null).
NO_INPUT: Final = _NoInput()


def given(value: Any) -> Any:
    """Return a parsed input for the client: :data:`NO_INPUT` is null, as the server reads a
    request without ``input``."""
    return None if value is NO_INPUT else value


@contextmanager
def reported(url: str) -> Iterator[None]:
    """Report a failure inside as ``error: CODE: detail`` on stderr and exit with its status:
    a command's own, or an error of the client of ``url``."""
    try:
        yield
    except CommandError as failure:
        _fail(failure)
    except (engine.EngineError, json.JSONDecodeError) as error:
        _fail(failure_of(error, url))


def _fail(failure: CommandError) -> NoReturn:
    output.error(failure.code, failure.detail)
    raise typer.Exit(int(failure.exit_code)) from None


def run(url: str, token: str | None, work: Callable[[Client], Awaitable[T]]) -> T:
    """Return what ``work`` returns, given a Client of ``url`` (one per command invocation,
    closed at the end) in an event loop of its own; a failure prints ``error: CODE: detail``
    and exits (see :func:`reported`). Ctrl-C raises KeyboardInterrupt here."""

    async def main() -> T:
        async with Client(url, token=token, timeout=TIMEOUT_SECONDS) as client:
            return await work(client)

    with reported(url):
        return asyncio.run(main())
    raise AssertionError("unreachable")  # pragma: no cover - reported() exits or returns


def parse_input(raw: str | None, option: str = "--input") -> Any:
    """Return the JSON value ``raw`` holds, :data:`NO_INPUT` for None; bad JSON is bad input."""
    if raw is None:
        return NO_INPUT
    return parse_json(raw, option, f"{option} ")


def parse_json(raw: str, what: str, written: str) -> Any:
    """Return the JSON value ``raw`` holds, for the option or argument ``what``.

    Args:
        raw: The text given on the command line.
        what: How an error names it: ``--input``, or ``the value of status`` for an Attribute.
        written: What precedes the value in the hint: ``--input `` or ``status=``.

    Raises:
        CommandError: Bad input (exit 2). A bare word, which the shell's own quotes stripped
            of the JSON quotes it needed, gets a hint saying how a string is written.
    """
    try:
        return json.loads(raw)
    except ValueError as exc:
        if raw.strip() and raw.lstrip()[0] not in JSON_OPENERS:
            # The shell ate the quotes: say how to keep them, quoted for a POSIX shell.
            hint = f"{written}{shlex.quote(json.dumps(raw, ensure_ascii=False))}"
            detail = f"{what} must be JSON; a string is written {hint}"
        else:
            detail = f"{what} is not valid JSON ({exc})"
        raise CommandError("INVALID_ARGUMENT", detail, ExitCode.BAD_INPUT) from None


def next_page_hint(token: str) -> None:
    """Tell the person at the terminal how to read the next page, when there is one."""
    if token:
        output.note(f"more results: add --page-token {token}")
