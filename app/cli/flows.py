"""``dexlite flows ...``: start, execute, describe, wait for, list, stop and read the history
of Flows."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any

import typer

import engine
from app.cli import output, wire
from app.cli.classes import ReflowingGroup
from app.cli.common import (
    DEFAULT_URL,
    EXIT_CODES,
    FlowIdArgument,
    InputOption,
    JsonOption,
    RunIdOption,
    TokenOption,
    UrlOption,
    given,
    next_page_hint,
    parse_input,
    reported,
    run,
)
from app.client import Client
from app.schemas import StartFlowResponse, StopFlowResponse

flows = typer.Typer(
    cls=ReflowingGroup,
    name="flows",
    help="Start, execute, describe, wait for, list, stop and read the history of Flows.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
)

#: The page size of a request without --page-size (the server's default).
DEFAULT_PAGE_SIZE = 100

PageSizeOption = Annotated[
    int | None, typer.Option("--page-size", min=1, max=1000, help="Items per page (1 to 1000).")
]
PageTokenOption = Annotated[
    str, typer.Option("--page-token", help="Start at this nextPageToken of an earlier page.")
]


class IdReusePolicy(StrEnum):
    """What starting a Flow ID that already has runs does."""

    ALLOW_DUPLICATE = "ALLOW_DUPLICATE"
    ALLOW_DUPLICATE_FAILED_ONLY = "ALLOW_DUPLICATE_FAILED_ONLY"
    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    TERMINATE_IF_RUNNING = "TERMINATE_IF_RUNNING"


class StopType(StrEnum):
    """How ``flows stop`` closes a run."""

    CANCEL = "CANCEL"
    TERMINATE = "TERMINATE"
    FAIL = "FAIL"


def _flow_rows(info: engine.FlowInfo) -> list[tuple[str, str]]:
    indexed = info.indexed_attributes
    return [
        ("Flow ID", info.flow_id),
        ("Run ID", info.run_id),
        ("Flow type", info.flow_type),
        ("Status", str(info.status)),
        ("Started", output.when(info.started_at)),
        ("Closed", output.when(info.closed_at)),
        ("Parent flow ID", output.text(info.parent_flow_id)),
        ("Parent run ID", output.text(info.parent_run_id)),
        ("Indexed attributes", output.compact(indexed) if indexed else output.NONE),
    ]


def _flow_row(info: engine.FlowInfo) -> list[str]:
    return [
        info.flow_id,
        info.flow_type,
        str(info.status),
        output.when(info.started_at),
        output.when(info.closed_at),
    ]


def _event_row(event: engine.HistoryEvent) -> list[str]:
    details = output.compact(event.details) if event.details else output.NONE
    return [str(event.event_id), str(event.event_type), output.when(event.at), details]


#: The Flow type argument of ``start`` and ``execute``.
FlowTypeArgument = Annotated[str, typer.Argument(metavar="TYPE", help="The Flow type.")]
IdReusePolicyOption = Annotated[
    IdReusePolicy | None,
    typer.Option(
        "--id-reuse-policy",
        metavar="POLICY",
        help="What to do when the Flow ID has runs (POLICY: see above).",
        show_default=False,
    ),
]
TimeoutSecondsOption = Annotated[
    float | None,
    typer.Option("--timeout-seconds", min=0, metavar="SECONDS", help="Durable timeout of the run."),
]
RequestIdOption = Annotated[
    str | None,
    typer.Option("--request-id", help="An ID of this request, recorded with the start."),
]
IgnoreAlreadyStartedOption = Annotated[
    bool,
    typer.Option(
        "--ignore-already-started",
        help="Succeed (started: false) when this --request-id started the running run.",
    ),
]


def start_options(
    id_reuse_policy: IdReusePolicy | None,
    timeout_seconds: float | None,
    request_id: str | None,
    ignore_already_started: bool,
) -> engine.StartFlowOptions:
    """Return the options of a start: those given on the command line, the server's defaults
    (the engine's) for the rest."""
    return engine.StartFlowOptions(
        id_reuse_policy=engine.IdReusePolicy(
            (id_reuse_policy or IdReusePolicy.ALLOW_DUPLICATE).value
        ),
        timeout=None if timeout_seconds is None else timedelta(seconds=timeout_seconds),
        request_id=request_id,
        ignore_already_started=ignore_already_started,
    )


@flows.command(epilog=EXIT_CODES)
def start(
    flow_type: FlowTypeArgument,
    flow_id: FlowIdArgument,
    input: InputOption = None,
    id_reuse_policy: IdReusePolicyOption = None,
    timeout_seconds: TimeoutSecondsOption = None,
    request_id: RequestIdOption = None,
    ignore_already_started: IgnoreAlreadyStartedOption = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start a Flow of TYPE with Flow ID ID (startFlow).

    POLICY is ALLOW_DUPLICATE (the server's default), ALLOW_DUPLICATE_FAILED_ONLY,
    REJECT_DUPLICATE or TERMINATE_IF_RUNNING.
    """
    options = start_options(id_reuse_policy, timeout_seconds, request_id, ignore_already_started)
    with reported(url):
        value = given(parse_input(input))
    result = run(url, token, lambda api: api.start_flow(flow_type, flow_id, value, options))
    if json_output:
        output.emit_json(
            wire.dump(
                StartFlowResponse(
                    flow_id=result.flow_id, run_id=result.run_id, started=result.started
                )
            )
        )
        return
    started = "yes" if result.started else "no (already started by this request ID)"
    output.emit(
        output.pairs([("Flow ID", result.flow_id), ("Run ID", result.run_id), ("Started", started)])
    )


@flows.command(epilog=EXIT_CODES)
def describe(
    flow_id: FlowIdArgument,
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show a run's type, status, times, indexed Attributes, input and pending Steps.

    The run comes from describeFlow, its input from the FLOW_STARTED event that begins its
    history (getFlowHistory), and its pending Steps from listPendingSteps: a table of each
    Step execution that has not closed, with the method that runs next (PHASE: WAIT_FOR,
    WAITING or EXECUTE), its attempt, when it is due, and the Timers, Channels and SubFlows it
    waits on. --json prints describeFlow's JSON with two more keys, input and pendingSteps.
    """

    async def read(api: Client) -> tuple[engine.FlowInfo, Any, list[engine.PendingStep]]:
        info = await api.describe_flow(flow_id, run_id)
        # The run just described, even if another run of the Flow ID has started since.
        flow_input = await _flow_input(api, flow_id, info.run_id)
        pending = await api.list_pending_steps(flow_id, info.run_id)
        return info, flow_input, pending.steps

    info, flow_input, pending = run(url, token, read)
    if json_output:
        shown = wire.flow_info(info)
        output.emit_json(
            {**shown, "input": flow_input, "pendingSteps": wire.pending_steps(pending)}
        )
        return
    rows = [
        *_flow_rows(info),
        ("Input", output.compact(flow_input)),
        ("Pending Steps", str(len(pending)) if pending else "none"),
    ]
    blocks = [output.pairs(rows)]
    if pending:
        blocks.append(output.table(PENDING_HEADERS, [pending_row(step) for step in pending]))
    output.emit("\n\n".join(blocks))


#: The columns of ``describe``'s table of pending Steps.
PENDING_HEADERS = ["STEP EXECUTION ID", "TYPE", "PHASE", "ATTEMPT", "DUE", "WAITING ON"]


async def _flow_input(api: Client, flow_id: str, run_id: str) -> Any:
    """Return the input run ``run_id`` started with: its first history event holds it."""
    first = (await api.get_flow_history(flow_id, run_id, 1, "")).events
    if not first or first[0].event_type != "FLOW_STARTED":
        return None
    return first[0].details.get("input")


def pending_row(step: engine.PendingStep) -> list[str]:
    """Return the cells of a pending Step: what runs next, when, and what it waits on."""
    waits = [
        *(f"Timer {output.when(at)}" for at in step.timers),
        *(f"Channel {channel}" for channel in step.channels),
        *(f"SubFlow {child}" for child in step.sub_flows),
    ]
    return [
        step.step_execution_id,
        step.step_type,
        step.phase,
        str(step.attempt),
        output.when(step.due_at),
        ", ".join(waits) or output.NONE,
    ]


#: The exit status of ``flows result`` for a run that did not complete.
NOT_COMPLETED = 6
#: The epilog of the commands that end with :data:`NOT_COMPLETED`.
RESULT_EXIT_CODES = (
    EXIT_CODES + f" {NOT_COMPLETED}: the run did not complete (FAILED, CANCELED, "
    "TERMINATED, TIMED_OUT, or still RUNNING when the wait ended)."
)


@flows.command(epilog=RESULT_EXIT_CODES)
def result(
    flow_id: FlowIdArgument,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            min=0,
            max=engine.MAX_WAIT_SECONDS,
            help=f"Seconds to wait for the run to close (0 to {engine.MAX_WAIT_SECONDS:g}).",
        ),
    ] = 0.0,
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show a run's status and, once closed, its completions or error (waitForFlow).

    Exits with status 6 unless the run COMPLETED: it FAILED, was CANCELED, TERMINATED or
    TIMED_OUT, or is still RUNNING when the wait ends (what it shows is the same).
    """
    found = run(url, token, lambda api: api.wait_for_flow(flow_id, run_id, wait))
    report_result(found, json_output)


def report_result(found: engine.FlowResult, json_output: bool) -> None:
    """Print a run's result as 'flows result' does, and exit 6 unless it COMPLETED."""
    if json_output:
        output.emit_json(wire.flow_result(found))
    else:
        show_result(found)
    if found.status != "COMPLETED":
        raise typer.Exit(NOT_COMPLETED)


def show_result(found: engine.FlowResult) -> None:
    """Print a waitForFlow answer: the run's status and error, then its completions."""
    rows = [
        ("Flow ID", found.flow_id),
        ("Run ID", found.run_id),
        ("Status", str(found.status)),
        ("Error type", output.text(found.error_type)),
        ("Error message", output.text(found.error_message)),
    ]
    blocks = [output.pairs(rows)]
    if found.completions:
        completions = [
            [c.step_type, c.step_execution_id, output.compact(c.output)] for c in found.completions
        ]
        blocks.append(output.table(["STEP TYPE", "STEP EXECUTION ID", "OUTPUT"], completions))
    output.emit("\n\n".join(blocks))


@flows.command(epilog=EXIT_CODES)
def search(
    query: Annotated[
        str,
        typer.Argument(
            metavar="[QUERY]",
            help="A filter such as \"FlowType = 'CounterFlow' AND Status = 'RUNNING'\"; "
            "empty matches every run.",
        ),
    ] = "",
    page_size: PageSizeOption = None,
    page_token: PageTokenOption = "",
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow nextPageToken and print every page.")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """List the runs matching QUERY (searchFlows), one page unless --all."""

    async def read(api: Client) -> tuple[list[engine.FlowInfo], str]:
        found: list[engine.FlowInfo] = []
        token_ = page_token
        while True:
            page = await api.search_flows(query, page_size or DEFAULT_PAGE_SIZE, token_)
            found.extend(page.flows)
            token_ = page.next_page_token
            if not (all_pages and token_):
                return found, token_

    found, next_token = run(url, token, read)
    if json_output:
        flows_json = [wire.flow_info(info) for info in found]
        output.emit_json({"flows": flows_json, "nextPageToken": next_token})
    else:
        headers = ["FLOW ID", "TYPE", "STATUS", "STARTED", "CLOSED"]
        output.emit(output.table(headers, [_flow_row(info) for info in found]))
        next_page_hint(next_token)


# Temporal's name for it; both spellings are kept so neither habit meets an error.
flows.command(
    "list",
    epilog=EXIT_CODES,
    help="List the runs matching QUERY, or every run without one (an alias of 'flows search').",
)(search)


@flows.command(epilog=EXIT_CODES)
def stop(
    flow_id: FlowIdArgument,
    stop_type: Annotated[
        StopType, typer.Option("--type", help="How to close the run.")
    ] = StopType.CANCEL,
    reason: Annotated[str | None, typer.Option("--reason", help="Why; kept with the run.")] = None,
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Stop a running Flow (stopFlow)."""
    kind = engine.StopType(stop_type.value)
    stopped = run(url, token, lambda api: api.stop_flow(flow_id, kind, reason, run_id))
    if json_output:
        output.emit_json(wire.dump(StopFlowResponse(flow_id=flow_id, run_id=stopped)))
    else:
        rows = [("Flow ID", flow_id), ("Run ID", stopped), ("Stop", stop_type.value)]
        output.emit(output.pairs(rows))


@flows.command(epilog=EXIT_CODES)
def history(
    flow_id: FlowIdArgument,
    page_size: Annotated[
        int | None,
        typer.Option(
            "--page-size", min=1, max=1000, help="Print one page of this many events (1 to 1000)."
        ),
    ] = None,
    page_token: PageTokenOption = "",
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Print a run's history, oldest first (getFlowHistory): every page unless --page-size."""

    async def read(api: Client) -> tuple[engine.HistoryPage, list[engine.HistoryEvent]]:
        events: list[engine.HistoryEvent] = []
        token_ = page_token
        while True:
            size = page_size or DEFAULT_PAGE_SIZE
            page = await api.get_flow_history(flow_id, run_id, size, token_)
            events.extend(page.events)
            token_ = page.next_page_token
            if page_size is not None or not token_:
                return page, events

    last, events = run(url, token, read)
    if json_output:
        output.emit_json(wire.history(last, events))
    else:
        headers = ["EVENT ID", "TYPE", "AT", "DETAILS"]
        output.emit(output.table(headers, [_event_row(event) for event in events]))
        next_page_hint(last.next_page_token)
