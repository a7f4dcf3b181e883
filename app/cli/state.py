"""``dexlite attributes get|set`` and ``dexlite channels list|publish``: a run's state.

Both were single commands (``attributes ID [NAME]...``, ``channels ID``) before they could
write; they are groups now whose default subcommand is the old command, so the old form
still works (:mod:`app.cli.classes`).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.cli import output, wire
from app.cli.classes import defaulting_to
from app.cli.common import (
    DEFAULT_URL,
    EXIT_CODES,
    FlowIdArgument,
    JsonOption,
    RunIdOption,
    TokenOption,
    UrlOption,
    given,
    parse_input,
    parse_json,
    reported,
    run,
)
from app.cli.errors import CommandError, ExitCode
from app.schemas import (
    AttributesResponse,
    ChannelInfoResponse,
    ChannelsResponse,
    PublishResponse,
    SetAttributesResponse,
)

#: What ``attributes get`` shows for a name the run has no value for.
UNSET = "(unset)"
#: What ``attributes set`` shows for a name it erased (given ``null``).
ERASED = "(erased)"

attributes = typer.Typer(
    name="attributes",
    cls=defaulting_to("get"),
    help="Read and write a run's Attributes. 'attributes ID [NAME]...' is 'attributes get'.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    subcommand_metavar="[COMMAND] ARGS...",
)
channels = typer.Typer(
    name="channels",
    cls=defaulting_to("list"),
    help="List a run's Channels and publish to them. 'channels ID' is 'channels list'.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    subcommand_metavar="[COMMAND] ARGS...",
)


@attributes.command("get", epilog=EXIT_CODES)
def get_attributes(
    flow_id: FlowIdArgument,
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[NAME]...",
            help="Attributes to read ('status', or 'progress/payment' for a map instance); "
            "none: every value.",
        ),
    ] = None,
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Print Attribute values from one committed state of a run (getAttributes)."""
    wanted = names or []
    # With no Registry the values come back as the server's JSON.
    found = run(url, token, lambda api: api.get_attributes(flow_id, wanted, run_id))
    values: dict[str, Any] = dict(found.values)
    if json_output:
        read = AttributesResponse(flow_id=found.flow_id, run_id=found.run_id, values=values)
        output.emit_json(wire.dump(read))
        return
    shown = wanted or sorted(values)
    rows = [[n, output.compact(values[n]) if n in values else UNSET] for n in shown]
    output.emit(output.table(["NAME", "VALUE"], rows))


@attributes.command("set", epilog=EXIT_CODES)
def set_attributes(
    flow_id: FlowIdArgument,
    assignments: Annotated[
        list[str],
        typer.Argument(
            metavar="NAME=JSON...",
            help="What to write, e.g. counter=5, status='\"done\"' or progress/payment=null; "
            "null erases the value.",
            show_default=False,
        ),
    ],
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Write Attribute values of a run in one commit (setAttributes).

    On a closed run only erasing hard-delete values is allowed. Prints the run written and
    each value, '(erased)' for a null.
    """
    with reported(url):
        values = dict(_assignment(text) for text in assignments)
    written, run_written = run(url, token, lambda api: api.set_attributes(flow_id, values, run_id))
    if json_output:
        output.emit_json(wire.dump(SetAttributesResponse(flow_id=written, run_id=run_written)))
        return
    rows = [[n, ERASED if v is None else output.compact(v)] for n, v in values.items()]
    blocks = [
        output.pairs([("Flow ID", written), ("Run ID", run_written)]),
        output.table(["NAME", "VALUE"], rows),
    ]
    output.emit("\n\n".join(blocks))


def _assignment(text: str) -> tuple[str, Any]:
    """Return the name and the value of a ``NAME=JSON`` argument; anything else is bad input."""
    name, equals, raw = text.partition("=")
    if not (equals and name):
        raise CommandError(
            "INVALID_ARGUMENT",
            f"{text!r} is not NAME=JSON (e.g. counter=5, or status='\"done\"'; null erases)",
            ExitCode.BAD_INPUT,
        )
    return name, parse_json(raw, f"the value of {name}", f"{name}=")


@channels.command("list", epilog=EXIT_CODES)
def list_channels(
    flow_id: FlowIdArgument,
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """List a run's Channels (and non-empty ChannelMap instances) with their sizes."""
    found = run(url, token, lambda api: api.list_channels(flow_id, run_id))
    if json_output:
        listed = [
            ChannelInfoResponse(name=c.name, instance=c.instance, size=c.size)
            for c in found.channels
        ]
        shown = ChannelsResponse(flow_id=found.flow_id, run_id=found.run_id, channels=listed)
        output.emit_json(wire.dump(shown))
        return
    rows = [[c.name, output.text(c.instance), str(c.size)] for c in found.channels]
    output.emit(output.table(["NAME", "INSTANCE", "SIZE"], rows))


@channels.command("publish", epilog=EXIT_CODES)
def publish(
    flow_id: FlowIdArgument,
    channel: Annotated[str, typer.Argument(metavar="CHANNEL", help="The Channel's name.")],
    value: Annotated[
        str,
        typer.Option(
            "--value",
            metavar="JSON",
            help="The message as JSON, e.g. '5' or '{\"a\": 1}' or '\"text\"'.",
            show_default=False,
        ),
    ],
    instance: Annotated[
        str | None,
        typer.Option("--instance", metavar="I", help="The instance, for a ChannelMap."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Publish a message to a Channel of a running Flow and print its ID (publishToChannel)."""
    with reported(url):
        message = given(parse_input(value, "--value"))
    message_id = run(
        url, token, lambda api: api.publish_to_channel(flow_id, channel, message, instance=instance)
    )
    if json_output:
        output.emit_json(wire.dump(PublishResponse(message_id=message_id)))
    else:
        output.emit(message_id)
