"""The client commands besides ``flows``, ``attributes``, ``channels`` and ``schedules``:
``flow-types``, ``rpc`` and ``streams tail``; and :func:`register`, which adds every client
command."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

import engine
from app.cli import execute, output, schedules, travel, wire
from app.cli.classes import ReflowingGroup
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
    given,
    parse_input,
    reported,
    run,
)
from app.cli.errors import CommandError, ExitCode
from app.cli.flows import flows
from app.cli.state import attributes, channels
from app.client import Client
from app.flow_type_schemas import FlowTypeInfo
from app.schemas import InvokeRpcResponse

#: How long each read of ``streams tail`` waits on the server for a message (its maximum).
TAIL_WAIT_SECONDS = engine.MAX_WAIT_SECONDS

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
    served = run(url, token, lambda api: api.fetch_flow_types())
    found = [t for t in served if flow_type in (None, t.flow_type)]
    if not found and flow_type is not None:
        known = ", ".join(t.flow_type for t in served) or "none"
        with reported(url):
            raise CommandError(
                "FLOW_TYPE_NOT_FOUND",
                f"Flow type {flow_type!r} is not served here (served: {known})",
                ExitCode.NOT_FOUND,
            )
    if json_output:
        shown = [wire.dump(FlowTypeInfo.of(t)) for t in found]
        output.emit_json(shown if flow_type is None else shown[0])
    elif flow_type is None:
        rows = [
            [t.flow_type, t.start_step or "-", ", ".join(r.name for r in t.rpcs) or "-"]
            for t in found
        ]
        output.emit(output.table(["FLOW TYPE", "START STEP", "RPCS"], rows))
    else:
        info = found[0]
        blocks = [
            output.pairs(
                [
                    ("Flow type", info.flow_type),
                    ("Start Step", info.start_step or "- (starts with a null input)"),
                    ("Steps", ", ".join(s.step_type for s in info.steps) or "-"),
                ]
            ),
            "Input (JSON Schema):\n" + json.dumps(info.input_schema, indent=2),
        ]
        if info.rpcs:
            rpcs = [[r.name, json.dumps(r.input_schema, separators=(",", ":"))] for r in info.rpcs]
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
    with reported(url):
        value = given(parse_input(input))
    # By name, with no Registry: the input goes as given and the output comes back as JSON.
    answer = run(url, token, lambda api: api.invoke_rpc(name, flow_id, value, run_id=run_id))
    if json_output:
        output.emit_json(wire.dump(InvokeRpcResponse(output=engine.to_json_data(answer))))
    else:
        output.emit(_readable(answer))


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

    async def tail_stream(api: Client) -> None:
        # Streams are addressed by Flow type too; without one, the Flow's own is meant.
        flow_type = named_type[0] if named_type else (await api.describe_flow(flow_id)).flow_type
        where_shown = f"{flow_type}/{flow_id}/{stream}"
        resume_token = "" if from_start else await _newest_token(api, flow_type, flow_id, stream)
        start = "the oldest retained message" if from_start else "the next new message"
        if follow:
            output.note(f"following {where_shown} from {start} (Ctrl-C to stop)")
        await _follow(api, (flow_type, flow_id, stream), resume_token, limit, follow, json_output)

    try:
        run(url, token, tail_stream)
    except KeyboardInterrupt:
        # The way out of a follow, not a failure: no traceback, the shell's status for it.
        raise typer.Exit(INTERRUPTED) from None


async def _follow(
    api: Client,
    where: tuple[str, str, str],
    resume_token: str,
    limit: int | None,
    follow: bool,
    json_output: bool,
) -> None:
    """Print the messages after ``resume_token`` until ``limit``, or none is waiting."""
    flow_type, flow_id, stream = where
    printed = 0
    while limit is None or printed < limit:
        wait = TAIL_WAIT_SECONDS if follow else 0.0
        message = await api.read_stream(
            flow_id, stream, resume_token, wait_seconds=wait, flow_type=flow_type
        )
        if message is None:
            if follow:
                continue
            break
        _print_message(message, json_output)
        resume_token = message.resume_token
        printed += 1


async def _newest_token(api: Client, flow_type: str, flow_id: str, stream: str) -> str:
    """Return the resume token after which new messages come (empty when there are none)."""
    newest = await api.list_stream_messages(flow_id, stream, 1, flow_type=flow_type)
    return newest.messages[0].resume_token if newest.messages else ""


def _print_message(message: engine.StreamMessage[Any], json_output: bool) -> None:
    if json_output:
        output.emit_json_line(wire.stream_message(message))
    else:
        stamp = output.when(message.created_at)
        value = engine.to_json_data(message.value)
        output.emit(f"{stamp}{output.GAP}{message.source}{output.GAP}{_line(value)}")


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
