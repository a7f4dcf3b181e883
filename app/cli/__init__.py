"""The ``dexlite`` command: ``serve`` and ``openapi``, and client commands over the REST API.

The client commands (``flows``, ``flow-types``, ``rpc``, ``attributes``, ``channels``,
``streams``, ``schedules``) live in :mod:`app.cli.flows`, :mod:`app.cli.execute`,
:mod:`app.cli.travel`, :mod:`app.cli.state`, :mod:`app.cli.schedules` and
:mod:`app.cli.commands`; they talk to a server through :class:`app.client.Client` (the
same client applications use), print through :mod:`app.cli.output` (``--json`` with the
server's own wire models, :mod:`app.cli.wire`) and end with the exit statuses of
:mod:`app.cli.errors`. They do not import the FastAPI app, so they start quickly. The
groups' Click classes (:mod:`app.cli.classes`) reflow help to the terminal's width and give
``attributes`` and ``channels`` a default subcommand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.main import get_command

from app.cli.classes import ReflowingGroup
from app.cli.commands import register
from app.cli.common import EXIT_CODES

__all__ = ["dexlite", "main", "openapi_document"]

dexlite = typer.Typer(
    cls=ReflowingGroup,
    name="dexlite",
    help="dexlite durable flow engine: serve it, or drive a server's Flows over its REST API.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["--help", "-h"]},
)


@dexlite.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind; default DEXLITE_HOST (127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to listen on; default DEXLITE_PORT (8000).")
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
) -> None:
    """Serve the API and playground (settings: DEXLITE_* environment variables).

    The playground's URL is printed once the server answers; a server that cannot start
    prints one line saying why on stderr and exits with status 1.
    """
    from app.cli.serving import run_server

    run_server(host, port, log_level=log_level, access_log=access_log)


def openapi_document() -> str:
    """Return the app's OpenAPI document as stable, pretty JSON."""
    from app.main import create_app

    return json.dumps(create_app().openapi(), indent=2, sort_keys=True) + "\n"


@dexlite.command()
def openapi(
    output: Annotated[
        str, typer.Option("--output", "-o", help="File to write; '-' for stdout.")
    ] = "openapi.json",
) -> None:
    """Write the OpenAPI document."""
    text = openapi_document()
    if output == "-":
        sys.stdout.write(text)
    else:
        Path(output).write_text(text)


register(dexlite)


def main(argv: list[str] | None = None) -> int:
    """Run the dexlite command line on ``argv`` (default: the process's); return its status."""
    try:
        get_command(dexlite).main(args=argv, prog_name="dexlite")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
