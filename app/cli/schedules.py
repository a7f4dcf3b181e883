"""``dexlite schedules ...``: create, list, describe, update, pause, unpause, trigger, backfill
and delete Schedules; and ``dexlite flows skip-timer``, which fires a waiting Step's Timers."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from app.cli import output
from app.cli.classes import ReflowingGroup
from app.cli.client import NO_INPUT, Schedule
from app.cli.common import (
    DEFAULT_URL,
    EXIT_CODES,
    FlowIdArgument,
    InputOption,
    JsonOption,
    RunIdOption,
    TokenOption,
    UrlOption,
    next_page_hint,
    parse_input,
    session,
)
from app.cli.errors import CommandError, ExitCode
from app.cli.flows import PageSizeOption, PageTokenOption

#: The epilog of the ``schedules`` commands: the codes of Schedules named.
SCHEDULE_EXIT_CODES = (
    EXIT_CODES + " A Schedule ID that exists is 4 (SCHEDULE_ALREADY_EXISTS), one that does not "
    "3 (SCHEDULE_NOT_FOUND)."
)

schedules = typer.Typer(
    cls=ReflowingGroup,
    name="schedules",
    help="Create, list, describe, update, pause, unpause, trigger, backfill and delete "
    "Schedules: Flows started every N seconds or on a cron line.",
    epilog=SCHEDULE_EXIT_CODES,
    no_args_is_help=True,
)


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


def _spec(
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
) -> dict[str, Any]:
    """Return the body of createSchedule or updateSchedule: what is not given is left out."""
    if (every is None) == (cron is None):
        raise CommandError(
            "INVALID_ARGUMENT", "give exactly one of --every and --cron", ExitCode.BAD_INPUT
        )
    spec: dict[str, Any] = {"flowType": flow_type, "paused": paused, "note": note}
    value = parse_input(input)
    if value is not NO_INPUT:
        spec["input"] = value
    optional = {
        "everySeconds": every,
        "cron": cron,
        "timezone": timezone,
        "overlap": None if overlap is None else overlap.value,
        "catchupWindowSeconds": catchup_window,
    }
    spec.update({key: v for key, v in optional.items() if v is not None})
    if start_delay is not None:
        spec["startOptions"] = {"startDelaySeconds": start_delay}
    return spec


def _when(schedule: Schedule) -> str:
    """Return how often a Schedule acts: ``every 60s`` or ``cron 30 2 * * * (Europe/Paris)``."""
    if schedule["cron"] is not None:
        return f"cron {schedule['cron']} ({schedule['timezone']})"
    return f"every {schedule['everySeconds']}s"


def _show(schedule: Schedule) -> None:
    """Print a description: the spec, then its next times and its recent actions."""
    delay = schedule["startOptions"].get("startDelaySeconds")
    rows = [
        ("Schedule ID", schedule["scheduleId"]),
        ("Flow type", schedule["flowType"]),
        ("Input", output.compact(schedule["input"])),
        ("When", _when(schedule)),
        ("Overlap", schedule["overlap"]),
        ("Catch-up window", f"{schedule['catchupWindowSeconds']:g}s"),
        ("Start delay", output.NONE if delay is None else f"{delay:g}s"),
        ("Paused", "yes" if schedule["paused"] else "no"),
        ("Note", schedule["note"] or output.NONE),
        ("Running", ", ".join(schedule["running"]) or output.NONE),
        ("Skipped", str(schedule["skipped"])),
        ("Created", output.when(schedule["createdAt"])),
        ("Updated", output.when(schedule["updatedAt"])),
    ]
    upcoming = [[output.when(at)] for at in schedule["nextActionTimes"]] or [[output.NONE]]
    actions = [
        [output.when(a["scheduledAt"]), a["flowId"], a["status"], output.when(a["startedAt"])]
        for a in schedule["recentActions"]
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


def _emit(schedule: Schedule, json_output: bool) -> None:
    if json_output:
        output.emit_json(schedule)
    else:
        _show(schedule)


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def create(
    schedule_id: ScheduleIdArgument,
    flow_type: FlowTypeArgument,
    every: EveryOption = None,
    cron: CronOption = None,
    timezone: TimezoneOption = None,
    input: InputOption = None,
    overlap: OverlapOption = None,
    catchup_window: CatchupOption = None,
    start_delay: StartDelayOption = None,
    paused: PausedOption = False,
    note: NoteOption = "",
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Create a Schedule that starts FLOW_TYPE every SECONDS or on a cron LINE
    (createSchedule); give exactly one of --every and --cron.

    POLICY is SKIP (the default), BUFFER_ONE, ALLOW_ALL, CANCEL_OTHER or TERMINATE_OTHER. Each
    action's Flow ID is ID-<time as YYYYMMDDTHHMMSSZ>.
    """
    with session(url, token) as api:
        spec = _spec(
            flow_type,
            input,
            every,
            cron,
            timezone,
            overlap,
            catchup_window,
            start_delay,
            paused,
            note,
        )
        body = api.create_schedule({"scheduleId": schedule_id, **spec})
    _emit(body, json_output)


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def update(
    schedule_id: ScheduleIdArgument,
    flow_type: FlowTypeArgument,
    every: EveryOption = None,
    cron: CronOption = None,
    timezone: TimezoneOption = None,
    input: InputOption = None,
    overlap: OverlapOption = None,
    catchup_window: CatchupOption = None,
    start_delay: StartDelayOption = None,
    paused: PausedOption = False,
    note: NoteOption = "",
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Replace a Schedule's spec (updateSchedule): an option not given takes its default, not
    its old value, as PUT does.

    POLICY is SKIP (the default), BUFFER_ONE, ALLOW_ALL, CANCEL_OTHER or TERMINATE_OTHER. Its
    skipped count and recent actions stay.
    """
    with session(url, token) as api:
        spec = _spec(
            flow_type,
            input,
            every,
            cron,
            timezone,
            overlap,
            catchup_window,
            start_delay,
            paused,
            note,
        )
        body = api.update_schedule(schedule_id, spec)
    _emit(body, json_output)


@schedules.command("list", epilog=SCHEDULE_EXIT_CODES)
def list_(
    page_size: PageSizeOption = None,
    page_token: PageTokenOption = "",
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow nextPageToken and print every page.")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """List Schedules by ID (listSchedules), one page unless --all."""
    found: list[Schedule] = []
    with session(url, token) as api:
        while True:
            page = api.list_schedules(page_size, page_token)
            found.extend(page["schedules"])
            page_token = page["nextPageToken"]
            if not (all_pages and page_token):
                break
    if json_output:
        output.emit_json({"schedules": found, "nextPageToken": page_token})
        return
    rows = [
        [
            s["scheduleId"],
            s["flowType"],
            _when(s),
            s["overlap"],
            "yes" if s["paused"] else "no",
            output.when(s["nextActionTimes"][0] if s["nextActionTimes"] else None),
        ]
        for s in found
    ]
    headers = ["SCHEDULE ID", "FLOW TYPE", "WHEN", "OVERLAP", "PAUSED", "NEXT ACTION"]
    output.emit(output.table(headers, rows))
    next_page_hint(page_token)


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def describe(
    schedule_id: ScheduleIdArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show a Schedule's spec, next five times, last ten actions (time, Flow ID, status),
    running Flows and skipped count (describeSchedule)."""
    with session(url, token) as api:
        body = api.describe_schedule(schedule_id)
    _emit(body, json_output)


def _pause(
    schedule_id: str, note: str, paused: bool, url: str, token: str | None, js: bool
) -> None:
    with session(url, token) as api:
        body = api.pause_schedule(schedule_id, note, paused=paused)
    if js:
        output.emit_json(body)
        return
    upcoming = body["nextActionTimes"]
    rows = [
        ("Schedule ID", body["scheduleId"]),
        ("Paused", "yes" if body["paused"] else "no"),
        ("Note", body["note"] or output.NONE),
        ("Next action", output.when(upcoming[0] if upcoming else None)),
    ]
    output.emit(output.pairs(rows))


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def pause(
    schedule_id: ScheduleIdArgument,
    note: NoteOption = "",
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Pause a Schedule (pauseSchedule): it starts nothing on its own until unpaused."""
    _pause(schedule_id, note, True, url, token, json_output)


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def unpause(
    schedule_id: ScheduleIdArgument,
    note: NoteOption = "",
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Unpause a Schedule (unpauseSchedule); the times it slept through are not made up."""
    _pause(schedule_id, note, False, url, token, json_output)


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def trigger(
    schedule_id: ScheduleIdArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start one action now, paused or not, under the overlap policy (triggerSchedule)."""
    with session(url, token) as api:
        body = api.trigger_schedule(schedule_id)
    if json_output:
        output.emit_json(body)
        return
    started = "yes" if body["started"] else "no (the overlap policy held it)"
    rows = [("Flow ID", body["flowId"]), ("Run ID", output.text(body["runId"]))]
    output.emit(output.pairs([*rows, ("Started", started)]))


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def backfill(
    schedule_id: ScheduleIdArgument,
    start: Annotated[
        str, typer.Option("--start", metavar="ISO", help="The first time, e.g. 2027-03-01T00:00Z.")
    ],
    end: Annotated[str, typer.Option("--end", metavar="ISO", help="The end (not included).")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Act on every scheduled time in [--start, --end) as if it had come, under the overlap
    policy (backfillSchedule); print the Flows started and the times skipped."""
    with session(url, token) as api:
        body = api.backfill_schedule(schedule_id, start, end)
    if json_output:
        output.emit_json(body)
        return
    rows = [("Started", str(len(body["started"]))), ("Skipped", str(body["skipped"]))]
    blocks = [output.pairs(rows)]
    if body["started"]:
        blocks.append(output.table(["FLOW ID"], [[flow] for flow in body["started"]]))
    output.emit("\n\n".join(blocks))


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def delete(
    schedule_id: ScheduleIdArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Delete a Schedule (deleteSchedule); the Flows it started keep running."""
    with session(url, token) as api:
        api.delete_schedule(schedule_id)
    if json_output:
        output.emit_json({"scheduleId": schedule_id, "deleted": True})
    else:
        output.emit(f"Schedule {schedule_id} deleted")


def skip_timer(
    flow_id: FlowIdArgument,
    step_execution_id: Annotated[
        str,
        typer.Argument(metavar="STEP_EXECUTION_ID", help="A pending Step execution of the run."),
    ],
    run_id: RunIdOption = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Fire now the Timers a pending Step execution waits on (skipTimers); print how many.

    A wait on Timers alone runs now; one with other conditions still needs them. A Step
    waiting on no Timer is bad input (exit 2). 'flows describe' lists pending Steps.
    """
    with session(url, token) as api:
        body = api.skip_timers(flow_id, step_execution_id, run_id)
    if json_output:
        output.emit_json(body)
    else:
        output.emit(output.pairs([("Timers fired", str(body["fired"]))]))


def register(app: typer.Typer, flows: typer.Typer) -> None:
    """Add ``schedules`` to the ``dexlite`` command ``app`` and ``skip-timer`` to ``flows``."""
    flows.command("skip-timer", epilog=EXIT_CODES)(skip_timer)
    app.add_typer(schedules)
