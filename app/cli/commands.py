"""The client commands besides ``flows``, ``attributes``, ``channels`` and ``schedules``:
``flow-types``, ``rpc`` and ``streams tail``; and :func:`register`, which adds every client
command."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from app.cli import execute, output, schedules, travel
from app.cli.classes import ReflowingGroup
from app.cli.client import Client, StreamMessage
from app.cli.common import (
    DEFAULT_URL,
    EXIT_CODES,
    INTERRUPTED,
    FlowIdArgument,
    InputOption,
    JsonOption,
    RunIdOption,
    TokenOption,
    UrlOption,
    parse_input,
    session,
)
from app.cli.errors import CommandError, ExitCode
from app.cli.flows import flows
from app.cli.state import attributes, channels

#: How long each read of ``streams tail`` waits on the server for a message (its maximum).
TAIL_WAIT_SECONDS = 60.0

streams = typer.Typer(
    cls=ReflowingGroup,
    name="streams",
    help="Follow the Stream messages Flows write.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
)


def flow_types(
    flow_type: Annotated[
        str | None,
        typer.Argument(metavar="[FLOW_TYPE]", help="Show this Flow type only, with its schemas."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """List the Flow types the server runs; with FLOW_TYPE, what its start takes as input
    (the JSON Schema `flows start --input` must match) and its RPCs (listFlowTypes)."""
    with session(url, token) as api:
        served = api.list_flow_types()
        found = [t for t in served if flow_type in (None, t["flowType"])]
        if not found and flow_type is not None:
            known = ", ".join(t["flowType"] for t in served) or "none"
            raise CommandError(
                "FLOW_TYPE_NOT_FOUND",
                f"Flow type {flow_type!r} is not served here (served: {known})",
                ExitCode.NOT_FOUND,
            )
    if json_output:
        output.emit_json(found if flow_type is None else found[0])
    elif flow_type is None:
        rows = [
            [t["flowType"], t["startStep"] or "-", ", ".join(r["name"] for r in t["rpcs"]) or "-"]
            for t in found
        ]
        output.emit(output.table(["FLOW TYPE", "START STEP", "RPCS"], rows))
    else:
        info = found[0]
        blocks = [
            output.pairs(
                [
                    ("Flow type", info["flowType"]),
                    ("Start Step", info["startStep"] or "- (starts with a null input)"),
                    ("Steps", ", ".join(s["stepType"] for s in info["steps"]) or "-"),
                ]
            ),
            "Input (JSON Schema):\n" + json.dumps(info["inputSchema"], indent=2),
        ]
        if info["rpcs"]:
            rpcs = [
                [r["name"], json.dumps(r.get("inputSchema"), separators=(",", ":"))]
                for r in info["rpcs"]
            ]
            blocks.append(output.table(["RPC", "INPUT SCHEMA"], rpcs))
        output.emit("\n\n".join(blocks))


def rpc(
    flow_id: FlowIdArgument,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The RPC's name.")],
    input: InputOption = None,
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Invoke the RPC NAME on a running Flow and print its output (invokeRpc)."""
    with session(url, token) as api:
        body = api.invoke_rpc(flow_id, name, parse_input(input), run_id)
    if json_output:
        output.emit_json(body)
    else:
        output.emit(_readable(body["output"]))


def _where(value: list[str]) -> list[str]:
    """Check that ``streams tail`` got ``[TYPE] ID STREAM``: two or three arguments."""
    if len(value) not in (2, 3):
        raise typer.BadParameter(f"takes 2 or 3 arguments, not {len(value)}")
    return value


@streams.command(epilog=EXIT_CODES)
def tail(
    where: Annotated[
        list[str],
        typer.Argument(
            metavar="[TYPE] ID STREAM",
            help="The Flow type (default: the Flow's, which must exist), the Flow ID and the "
            "Stream's name.",
            callback=_where,
            show_default=False,
        ),
    ],
    from_start: Annotated[
        bool,
        typer.Option(
            "--from-start", help="Begin at the oldest retained message, not the next new one."
        ),
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Exit after this many messages.")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow/--no-follow", help="Wait for new messages; --no-follow exits when none is."
        ),
    ] = True,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Print a Stream's messages as they are written, like tail -f (readStream), until Ctrl-C.

    Each line is the message's time, source and value; with --json, one JSON object per line.
    Ctrl-C ends it with exit status 130. Without TYPE the Flow's type is read (describeFlow),
    so the Flow must exist (else exit 3).
    """
    *named_type, flow_id, stream = where
    with session(url, token) as api:
        # Streams are addressed by Flow type too; without one, the Flow's own is meant.
        flow_type = named_type[0] if named_type else api.describe_flow(flow_id)["flowType"]
        where_shown = f"{flow_type}/{flow_id}/{stream}"
        resume_token = "" if from_start else _newest_token(api, flow_type, flow_id, stream)
        start = "the oldest retained message" if from_start else "the next new message"
        if follow:
            output.note(f"following {where_shown} from {start} (Ctrl-C to stop)")
        try:
            _follow(api, (flow_type, flow_id, stream), resume_token, limit, follow, json_output)
        except KeyboardInterrupt:
            # The way out of a follow, not a failure: no traceback, the shell's status for it.
            raise typer.Exit(INTERRUPTED) from None


def _follow(
    api: Client,
    where: tuple[str, str, str],
    resume_token: str,
    limit: int | None,
    follow: bool,
    json_output: bool,
) -> None:
    """Print the messages after ``resume_token`` until ``limit``, or none is waiting."""
    printed = 0
    while limit is None or printed < limit:
        wait = TAIL_WAIT_SECONDS if follow else 0.0
        message = api.read_stream(*where, resume_token, wait)
        if message is None:
            if follow:
                continue
            break
        _print_message(message, json_output)
        resume_token = message["resumeToken"]
        printed += 1


def _newest_token(api: Client, flow_type: str, flow_id: str, stream: str) -> str:
    """Return the resume token after which new messages come (empty when there are none)."""
    newest = api.newest_stream_message(flow_type, flow_id, stream)
    return "" if newest is None else newest["resumeToken"]


def _print_message(message: StreamMessage, json_output: bool) -> None:
    if json_output:
        output.emit_json_line(message)
    else:
        stamp = output.when(message["createdAt"])
        output.emit(f"{stamp}{output.GAP}{message['source']}{output.GAP}{_line(message['value'])}")


def _line(value: Any) -> str:
    """Return a value on one line: a string as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else output.compact(value)


def _readable(value: Any) -> str:
    """Return an RPC output for a person: a string as it is, anything else as indented JSON."""
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def register(app: typer.Typer) -> None:
    """Add the client commands to the ``dexlite`` command ``app``."""
    execute.register(flows)
    travel.register(flows)
    schedules.register(app, flows)
    app.add_typer(flows)
    app.command("flow-types", epilog=EXIT_CODES)(flow_types)
    app.command("rpc", epilog=EXIT_CODES)(rpc)
    app.add_typer(attributes)
    app.add_typer(channels)
    app.add_typer(streams)
