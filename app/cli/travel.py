"""``dexlite flows time-travel`` and ``flows time-travel-all``: take runs back to a point.

Time travel (docs/concepts/time-travel.md) closes a Flow's latest run, if still open, and
starts a new run from the state right after a point of its history. It changes what runs, so
neither command acts without ``--yes``, and ``time-travel`` also needs the run's ID
(``--run-id``), so that it never travels a run the user did not look at. Both refusals exit 2
before any request is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer

import engine
from app.cli import output, wire
from app.cli.common import (
    DEFAULT_URL,
    EXIT_CODES,
    FlowIdArgument,
    JsonOption,
    TokenOption,
    UrlOption,
    reported,
    run,
)
from app.cli.errors import CommandError, ExitCode, failure_of
from app.cli.travel_points import (
    BulkPointKind,
    Method,
    PointKind,
    bad_input,
    engine_point,
    shown_point,
    travel_point,
)
from app.client import Client

T = TypeVar("T")

#: The problem code of a command refused for want of ``--yes``.
CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
#: The problem code of the summary line when some matched runs could not travel.
TIME_TRAVEL_FAILED = "TIME_TRAVEL_FAILED"
#: The help panel of the options that name the point.
POINT = "Travel point"
#: The server's default (and the CLI's) number of runs one ``time-travel-all`` travels.
DEFAULT_LIMIT = 100

#: The CLI option that stands for each field an API error may name.
FIELD_OPTIONS = {
    "runId": "--run-id",
    "to.kind": "--to",
    "to.eventId": "--event-id",
    "to.at": "--at",
    "to.stepType": "--step-type",
    "to.stepExecutionId": "--step-execution-id",
    "to.method": "--method",
    "reason": "--reason",
    "forkToFlowId": "--fork-to",
    "query": "QUERY",
    "limit": "--limit",
}


ToOption = Annotated[
    PointKind,
    typer.Option(
        "--to",
        case_sensitive=False,
        help="The point: the run's start, the commit of a history event, the last commit at or "
        "before a time, before a Step type's first execution, or a Step execution.",
        rich_help_panel=POINT,
    ),
]
BulkToOption = Annotated[
    BulkPointKind,
    typer.Option(
        "--to",
        case_sensitive=False,
        help="The point: each run's start, or before a Step type's first execution.",
        rich_help_panel=POINT,
    ),
]
StepTypeOption = Annotated[
    str | None,
    typer.Option(
        "--step-type",
        metavar="TYPE",
        help="With --to step-type: the Step type, e.g. ChargeCard.",
        rich_help_panel=POINT,
    ),
]
SkipOption = Annotated[
    bool,
    typer.Option(
        "--skip-writes-reapply",
        help="Leave out what RPCs and clients wrote, published and deleted after the point "
        "(by default applied again to the new run).",
    ),
]
YesOption = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Confirm: without it the command refuses and exits 2."),
]


def register(group: typer.Typer) -> None:
    """Add ``time-travel`` and ``time-travel-all`` to the ``flows`` command ``group``."""
    group.command("time-travel", epilog=EXIT_CODES)(time_travel)
    group.command("time-travel-all", epilog=EXIT_CODES)(time_travel_all)


def time_travel(
    flow_id: FlowIdArgument,
    to: ToOption,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="Required: the Flow's latest run (open or closed), as 'flows describe' shows it.",
            show_default=False,
        ),
    ] = None,
    event_id: Annotated[
        int | None,
        typer.Option(
            "--event-id",
            min=1,
            metavar="N",
            help="With --to event: the history event (as 'flows history' numbers it).",
            rich_help_panel=POINT,
        ),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="ISO",
            help="With --to time: an instant with a time zone, e.g. 2026-01-31T09:30:00Z.",
            rich_help_panel=POINT,
        ),
    ] = None,
    step_type: StepTypeOption = None,
    step_execution_id: Annotated[
        str | None,
        typer.Option(
            "--step-execution-id",
            metavar="ID",
            help="With --to step-execution: the execution, e.g. ChargeCard-2.",
            rich_help_panel=POINT,
        ),
    ] = None,
    method: Annotated[
        Method | None,
        typer.Option(
            "--method",
            case_sensitive=False,
            help="With --to step-execution: before its wait (the default), or before its "
            "execute with the wait's result kept.",
            show_default=False,
            rich_help_panel=POINT,
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Required: why; kept in the new run's TIME_TRAVELED event."),
    ] = None,
    skip_writes_reapply: SkipOption = False,
    fork_to: Annotated[
        str | None,
        typer.Option(
            "--fork-to",
            metavar="ID",
            help="Create the new run under this Flow ID (no run running there) and leave ID "
            "untouched.",
        ),
    ] = None,
    yes: YesOption = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Take a Flow's latest run back to a point and run it again from there (timeTravelFlow).

    The run --run-id, which must be the Flow's latest, closes as TERMINATED if still open, and
    a new run starts from its state right after the point; it becomes the latest. --run-id,
    --reason and --yes are required: without them nothing is sent and the exit status is 2.
    Prints the new run's Flow ID, Run ID and Previous run ID. A run that is not the latest
    exits 4 (FAILED_PRECONDITION); a point the run does not have exits 2 (INVALID_ARGUMENT).
    """
    with reported(url):
        if not run_id:
            raise bad_input(
                "--run-id is required: name the run to travel, the Flow's latest "
                f"('dexlite flows describe {flow_id}' shows it)"
            )
        point = travel_point(
            to,
            event_id=event_id,
            at=at,
            step_type=step_type,
            step_execution_id=step_execution_id,
            method=method,
        )
        if not (reason and reason.strip()):
            raise bad_input("--reason is required: say why, for the new run's history")
        if not yes:
            target = f"a new run of Flow {fork_to}" if fork_to else "a new run"
            raise CommandError(
                CONFIRMATION_REQUIRED,
                f"time travel closes run {run_id} of Flow {flow_id} if still open and starts "
                f"{target} from {shown_point(point)}; add --yes to confirm",
                ExitCode.BAD_INPUT,
            )
        options = engine.TimeTravelOptions(
            run_id=run_id,
            to=engine_point(point),
            reason=reason,
            skip_writes_reapply=skip_writes_reapply,
            fork_to_flow_id=fork_to,
        )
    result = run(url, token, _options_named(url, lambda api: api.time_travel(flow_id, options)))
    if json_output:
        output.emit_json(wire.dump(wire.traveled(result)))
        return
    rows = [
        ("Flow ID", result.flow_id),
        ("Run ID", result.run_id),
        ("Previous run ID", result.previous_run_id),
    ]
    output.emit(output.pairs(rows))


def time_travel_all(
    query: Annotated[
        str,
        typer.Argument(
            metavar="QUERY",
            help="A searchFlows filter, e.g. \"FlowType = 'OrderFlow' AND Status = 'FAILED'\".",
        ),
    ],
    to: BulkToOption,
    step_type: StepTypeOption = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why; kept in each new run's TIME_TRAVELED event.")
    ] = "",
    skip_writes_reapply: SkipOption = False,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, max=1000, help="Travel at most this many runs (1 to 1000)."),
    ] = DEFAULT_LIMIT,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only list the runs that would travel; change nothing."),
    ] = False,
    yes: YesOption = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Take the latest run of every Flow QUERY matches back to a point (timeTravelFlows).

    Each matched run travels as 'flows time-travel' would, in its own commit. Without --yes it
    refuses (exit 2) unless --dry-run, which lists the matched runs (FLOW ID, RUN ID) and
    changes nothing. Otherwise prints the runs that traveled (FLOW ID, RUN ID, PREVIOUS RUN ID)
    and, below them, those that could not (FLOW ID, RUN ID, CODE, DETAIL). Exit status: 0 when
    every matched run traveled; 1, with an 'error: TIME_TRAVEL_FAILED' line on stderr, when
    any could not (also with --json).
    """
    with reported(url):
        if not query.strip():
            raise bad_input("QUERY must not be empty: time-travel-all travels every run it matches")
        point = travel_point(PointKind(to.value), step_type=step_type)
        if not (yes or dry_run):
            raise CommandError(
                CONFIRMATION_REQUIRED,
                f"this travels the latest run of every Flow the query matches (at most {limit}) "
                f"back to {shown_point(point)}; list them with --dry-run, then add --yes to "
                "confirm",
                ExitCode.BAD_INPUT,
            )
        to_point = engine_point(point)
    found = run(
        url,
        token,
        _options_named(
            url,
            lambda api: api.time_travel_flows(
                query,
                to_point,
                reason=reason,
                skip_writes_reapply=skip_writes_reapply,
                dry_run=dry_run,
                limit=limit,
            ),
        ),
    )
    if json_output:
        output.emit_json(wire.bulk_travel(found))
    else:
        _print_bulk(found)
    _summarize(found, limit)


def _options_named(
    url: str, call: Callable[[Client], Awaitable[T]]
) -> Callable[[Client], Awaitable[T]]:
    """Return ``call`` with the CLI option added to an error that names a request field
    (``to.eventId``) of the point or the options."""

    async def named(api: Client) -> T:
        try:
            return await call(api)
        except engine.EngineError as error:
            option = FIELD_OPTIONS.get(error.field) if isinstance(error.field, str) else None
            # A schema refusal (VALIDATION_ERROR) names its field in its own detail.
            if option is None or "code" in error.extra:
                raise
            failure = failure_of(error, url)
            raise CommandError(
                failure.code, f"{failure.detail} ({option})", failure.exit_code
            ) from None

    return named


def _print_bulk(found: engine.BulkTimeTravelResult) -> None:
    """Print the matched runs of a dry run, else the traveled runs and those that failed."""
    if found.dry_run:
        matched = [[m.flow_id, m.run_id] for m in found.matched]
        output.emit(output.table(["FLOW ID", "RUN ID"], matched))
        return
    traveled = [[t.flow_id, t.run_id, t.previous_run_id] for t in found.traveled]
    blocks = [output.table(["FLOW ID", "RUN ID", "PREVIOUS RUN ID"], traveled)]
    if found.failed:
        failed = [[f.flow_id, f.run_id, f.code, f.detail] for f in found.failed]
        blocks.append(output.table(["FLOW ID", "RUN ID", "CODE", "DETAIL"], failed))
    output.emit("\n\n".join(blocks))


def _summarize(found: engine.BulkTimeTravelResult, limit: int) -> None:
    """Say on stderr what a dry run found, or end with exit 1 when some runs failed."""
    matched = len(found.matched)
    if matched == limit:
        output.note(
            f"the limit of {limit} {_noun(limit)} was reached: more may match (raise --limit)"
        )
    if found.dry_run:
        output.note(f"dry run: {matched} {_noun(matched)} matched; nothing traveled")
    elif not matched:
        output.note("no run matches the query; nothing traveled")
    if found.failed:
        output.error(
            TIME_TRAVEL_FAILED,
            f"{len(found.failed)} of {matched} matched {_noun(matched)} could not travel "
            f"({len(found.traveled)} traveled)",
        )
        raise typer.Exit(int(ExitCode.ERROR))


def _noun(count: int) -> str:
    return "run" if count == 1 else "runs"
