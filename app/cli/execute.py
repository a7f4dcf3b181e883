"""``dexlite flows execute``: start a Flow and follow it to its result, as Temporal's
``workflow execute`` does."""

from __future__ import annotations

from typing import Annotated

import typer

import engine
from app.cli import output
from app.cli.common import (
    DEFAULT_URL,
    INTERRUPTED,
    FlowIdArgument,
    InputOption,
    JsonOption,
    TokenOption,
    UrlOption,
    given,
    parse_input,
    reported,
    run,
)
from app.cli.flows import (
    RESULT_EXIT_CODES,
    FlowTypeArgument,
    IdReusePolicyOption,
    IgnoreAlreadyStartedOption,
    RequestIdOption,
    TimeoutSecondsOption,
    report_result,
    start_options,
)
from app.client import Client

#: The longest wait one waitForFlow request may ask for, and ``--wait``'s default.
MAX_WAIT_SECONDS = engine.MAX_WAIT_SECONDS
#: The shortest ``--wait``: shorter polls would only load the server.
MIN_WAIT_SECONDS = 0.1


def register(group: typer.Typer) -> None:
    """Add ``execute`` to the ``flows`` command ``group``."""
    group.command("execute", epilog=RESULT_EXIT_CODES)(execute)


def _poll_seconds(value: float) -> float:
    """Check ``--wait``; a range the option spelled out would crowd its help at 80 columns."""
    if not MIN_WAIT_SECONDS <= value <= MAX_WAIT_SECONDS:
        raise typer.BadParameter(
            f"{value:g} is not in the range {MIN_WAIT_SECONDS:g} to {MAX_WAIT_SECONDS:g}"
        )
    return value


def execute(
    flow_type: FlowTypeArgument,
    flow_id: FlowIdArgument,
    input: InputOption = None,
    id_reuse_policy: IdReusePolicyOption = None,
    timeout_seconds: TimeoutSecondsOption = None,
    request_id: RequestIdOption = None,
    ignore_already_started: IgnoreAlreadyStartedOption = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            callback=_poll_seconds,
            help=f"How long each waitForFlow request waits ({MIN_WAIT_SECONDS:g} to "
            f"{MAX_WAIT_SECONDS:g}); repeated until the run closes.",
        ),
    ] = MAX_WAIT_SECONDS,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start a Flow of TYPE with Flow ID ID and wait for its result (startFlow, waitForFlow).

    Prints what 'flows result' prints once the run closes, and exits like it: 0 when it
    COMPLETED, 6 when it FAILED, was CANCELED, TERMINATED or TIMED_OUT. The run started (or,
    with --ignore-already-started, the running one) is named on stderr; Ctrl-C stops the
    waiting, not the run, with exit status 130.

    POLICY is ALLOW_DUPLICATE (the server's default), ALLOW_DUPLICATE_FAILED_ONLY,
    REJECT_DUPLICATE or TERMINATE_IF_RUNNING.
    """
    options = start_options(id_reuse_policy, timeout_seconds, request_id, ignore_already_started)
    with reported(url):
        value = given(parse_input(input))
    # The run being waited for, once started: what a Ctrl-C leaves running.
    waiting: list[str] = []

    async def start_and_wait(api: Client) -> engine.FlowResult:
        started = await api.start_flow(flow_type, flow_id, value, options)
        shown = f"run {started.run_id} of Flow {flow_id}"
        waiting.append(shown)
        if started.started:
            output.note(f"started {shown}; waiting for its result")
        else:
            output.note(f"{shown} was started by this request ID; waiting for its result")
        return await _result(api, flow_id, started.run_id, wait)

    try:
        found = run(url, token, start_and_wait)
    except KeyboardInterrupt:
        if waiting:
            output.note(f"stopped waiting; {waiting[0]} goes on")
        # The way out of a wait, not a failure: no traceback, the shell's status for it.
        raise typer.Exit(INTERRUPTED) from None
    report_result(found, json_output)


async def _result(api: Client, flow_id: str, run_id: str, wait: float) -> engine.FlowResult:
    """Return waitForFlow's answer for run ``run_id`` once it is closed, polling ``wait`` s."""
    while True:
        # The run started here, not whichever is current, so a later run is never reported.
        found = await api.wait_for_flow(flow_id, run_id, wait)
        if found.status != "RUNNING":
            return found
