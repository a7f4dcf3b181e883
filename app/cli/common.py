"""What every client command shares: its connection options, error reporting and exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from app.cli import output
from app.cli.client import NO_INPUT, Client
from app.cli.errors import CommandError, ExitCode

#: Where the client commands look for a server without --url or DEXLITE_URL.
DEFAULT_URL = "http://127.0.0.1:8000"
#: The help panel of the options every client command shares.
CONNECTION = "Connection and output"

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


@contextmanager
def session(url: str, token: str | None) -> Iterator[Client]:
    """Yield a client of ``url``; a failure inside prints ``error: CODE: detail`` and exits."""
    try:
        with Client(url, token) as client:
            yield client
    except CommandError as failure:
        output.error(failure.code, failure.detail)
        raise typer.Exit(int(failure.exit_code)) from None


def parse_input(raw: str | None, option: str = "--input") -> Any:
    """Return the JSON value ``raw`` holds, :data:`NO_INPUT` for None; bad JSON is bad input."""
    if raw is None:
        return NO_INPUT
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise CommandError(
            "INVALID_ARGUMENT", f"{option} is not valid JSON ({exc})", ExitCode.BAD_INPUT
        ) from None


def next_page_hint(token: str) -> None:
    """Tell the person at the terminal how to read the next page, when there is one."""
    if token:
        output.note(f"more results: add --page-token {token}")
