"""The options of a Schedule's spec, the spec they make, and how ``dexlite schedules``
prints a Schedule."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated

import typer
from pydantic import TypeAdapter, ValidationError

import engine
from app.cli import output, wire
from app.cli.common import given, parse_input
from app.cli.errors import CommandError, ExitCode
from app.schedule_schemas import ScheduleResponse


class OverlapPolicy(StrEnum):
    """What a scheduled time does while the previous action's Flow still runs."""

    SKIP = "SKIP"
    BUFFER_ONE = "BUFFER_ONE"
    ALLOW_ALL = "ALLOW_ALL"
    CANCEL_OTHER = "CANCEL_OTHER"
    TERMINATE_OTHER = "TERMINATE_OTHER"


ScheduleIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The Schedule ID.")]
FlowTypeArgument = Annotated[
    str, typer.Argument(metavar="FLOW_TYPE", help="The Flow type each action starts.")
]
EveryOption = Annotated[
    int | None,
    typer.Option(
        "--every",
        min=1,
        metavar="SECONDS",
        help="Start every SECONDS (epoch-aligned).",
        show_default=False,
    ),
]
CronOption = Annotated[
    str | None,
    typer.Option("--cron", metavar="LINE", help="Start on a cron line (5 fields or @daily...)."),
]
TimezoneOption = Annotated[
    str | None,
    typer.Option("--timezone", metavar="ZONE", help="IANA zone of --cron; default UTC."),
]
OverlapOption = Annotated[
    OverlapPolicy | None,
    typer.Option(
        "--overlap",
        metavar="POLICY",
        help="While the last action runs (POLICY: see above); default SKIP.",
        show_default=False,
    ),
]
CatchupOption = Annotated[
    float | None,
    typer.Option(
        "--catchup-window",
        min=0,
        metavar="SECONDS",
        help="Start missed times this late at most; default 60.",
    ),
]
StartDelayOption = Annotated[
    float | None,
    typer.Option(
        "--start-delay", min=0, metavar="SECONDS", help="Run each start Step this much later."
    ),
]
PausedOption = Annotated[bool, typer.Option("--paused", help="Start nothing until unpaused.")]
NoteOption = Annotated[str, typer.Option("--note", help="Why; kept with the Schedule.")]


def schedule_spec(
    schedule_id: str,
    flow_type: str,
    input: str | None,
    every: int | None,
    cron: str | None,
    timezone: str | None,
    overlap: OverlapPolicy | None,
    catchup_window: float | None,
    start_delay: float | None,
    paused: bool,
    note: str,
) -> engine.ScheduleSpec:
    """Return the spec of createSchedule or updateSchedule: what is not given takes the
    server's default (the engine's)."""
    if (every is None) == (cron is None):
        raise CommandError(
            "INVALID_ARGUMENT", "give exactly one of --every and --cron", ExitCode.BAD_INPUT
        )
    defaults = engine.ScheduleSpec(schedule_id, flow_type)
    return engine.ScheduleSpec(
        schedule_id=schedule_id,
        flow_type=flow_type,
        input=given(parse_input(input)),
        every=None if every is None else timedelta(seconds=every),
        cron=cron,
        timezone=defaults.timezone if timezone is None else timezone,
        overlap=defaults.overlap if overlap is None else engine.OverlapPolicy(overlap.value),
        catchup_window=defaults.catchup_window
        if catchup_window is None
        else timedelta(seconds=catchup_window),
        start_options=engine.StartFlowOptions(
            start_delay=None if start_delay is None else timedelta(seconds=start_delay)
        ),
        paused=paused,
        note=note,
    )


def when_shown(schedule: engine.ScheduleDescription) -> str:
    """Return how often a Schedule acts: ``every 60s`` or ``cron 30 2 * * * (Europe/Paris)``."""
    spec = schedule.spec
    if spec.cron is not None:
        return f"cron {spec.cron} ({spec.timezone})"
    every = None if spec.every is None else int(spec.every.total_seconds())
    return f"every {every}s"


def show_schedule(schedule: engine.ScheduleDescription) -> None:
    """Print a description: the spec, then its next times and its recent actions."""
    spec = schedule.spec
    delay = spec.start_options.start_delay
    rows = [
        ("Schedule ID", spec.schedule_id),
        ("Flow type", str(spec.flow_type)),
        ("Input", output.compact(engine.to_json_data(spec.input))),
        ("When", when_shown(schedule)),
        ("Overlap", str(spec.overlap)),
        ("Catch-up window", f"{spec.catchup_window.total_seconds():g}s"),
        ("Start delay", output.NONE if delay is None else f"{delay.total_seconds():g}s"),
        ("Paused", "yes" if spec.paused else "no"),
        ("Note", spec.note or output.NONE),
        ("Running", ", ".join(schedule.running) or output.NONE),
        ("Skipped", str(schedule.skipped)),
        ("Created", output.when(schedule.created_at)),
        ("Updated", output.when(schedule.updated_at)),
    ]
    upcoming = [[output.when(at)] for at in schedule.next_action_times] or [[output.NONE]]
    actions = [
        [output.when(a.scheduled_at), a.flow_id, a.status, output.when(a.started_at)]
        for a in schedule.recent_actions
    ]
    output.emit(
        "\n\n".join(
            [
                output.pairs(rows),
                output.table(["NEXT ACTION TIMES"], upcoming),
                output.table(["SCHEDULED AT", "FLOW ID", "STATUS", "STARTED AT"], actions),
            ]
        )
    )


def emit_schedule(schedule: engine.ScheduleDescription, json_output: bool) -> None:
    """Print a Schedule's description, or its JSON."""
    if json_output:
        output.emit_json(wire.dump(ScheduleResponse.of(schedule)))
    else:
        show_schedule(schedule)


#: How the server reads a time of a request (lax: ISO 8601, with or without a zone).
TIME_ADAPTER = TypeAdapter(datetime)


def instant(text: str, field: str) -> datetime:
    """Return ``--start`` or ``--end`` read as the server reads the field, and refused as it
    refuses it (VALIDATION_ERROR naming the field, exit 2)."""
    try:
        return TIME_ADAPTER.validate_python(text)
    except ValidationError as exc:
        detail = f"body.{field}: {exc.errors()[0]['msg']}"
        raise CommandError("VALIDATION_ERROR", detail, ExitCode.BAD_INPUT) from None
