"""``dexlite schedules ...``: create, list, describe, update, pause, unpause, trigger, backfill
and delete Schedules; and ``dexlite flows skip-timer``, which fires a waiting Step's Timers."""

from __future__ import annotations

from typing import Annotated

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
    next_page_hint,
    reported,
    run,
)
from app.cli.flows import DEFAULT_PAGE_SIZE, PageSizeOption, PageTokenOption
from app.cli.schedule_specs import (
    CatchupOption,
    CronOption,
    EveryOption,
    FlowTypeArgument,
    NoteOption,
    OverlapOption,
    PausedOption,
    ScheduleIdArgument,
    StartDelayOption,
    TimezoneOption,
    emit_schedule,
    instant,
    schedule_spec,
    when_shown,
)
from app.client import Client
from app.schedule_schemas import (
    BackfillResponse,
    ScheduleListResponse,
    ScheduleResponse,
    SkipTimersResponse,
    TriggerResponse,
)

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
    with reported(url):
        spec = schedule_spec(
            schedule_id,
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
    emit_schedule(run(url, token, lambda api: api.create_schedule(spec)), json_output)


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
    with reported(url):
        spec = schedule_spec(
            schedule_id,
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
    emit_schedule(run(url, token, lambda api: api.update_schedule(spec)), json_output)


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

    async def read(api: Client) -> tuple[list[engine.ScheduleDescription], str]:
        found: list[engine.ScheduleDescription] = []
        token_ = page_token
        while True:
            page = await api.list_schedules(page_size or DEFAULT_PAGE_SIZE, token_)
            found.extend(page.schedules)
            token_ = page.next_page_token
            if not (all_pages and token_):
                return found, token_

    found, next_token = run(url, token, read)
    if json_output:
        listed = [ScheduleResponse.of(s) for s in found]
        output.emit_json(
            wire.dump(ScheduleListResponse(schedules=listed, next_page_token=next_token))
        )
        return
    rows = [
        [
            s.spec.schedule_id,
            str(s.spec.flow_type),
            when_shown(s),
            str(s.spec.overlap),
            "yes" if s.spec.paused else "no",
            output.when(s.next_action_times[0] if s.next_action_times else None),
        ]
        for s in found
    ]
    headers = ["SCHEDULE ID", "FLOW TYPE", "WHEN", "OVERLAP", "PAUSED", "NEXT ACTION"]
    output.emit(output.table(headers, rows))
    next_page_hint(next_token)


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def describe(
    schedule_id: ScheduleIdArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show a Schedule's spec, next five times, last ten actions (time, Flow ID, status),
    running Flows and skipped count (describeSchedule)."""
    emit_schedule(run(url, token, lambda api: api.describe_schedule(schedule_id)), json_output)


def _pause(
    schedule_id: str, note: str, paused: bool, url: str, token: str | None, js: bool
) -> None:

    async def call(api: Client) -> engine.ScheduleDescription:
        if paused:
            return await api.pause_schedule(schedule_id, note)
        return await api.unpause_schedule(schedule_id, note)

    found = run(url, token, call)
    if js:
        output.emit_json(wire.dump(ScheduleResponse.of(found)))
        return
    upcoming = found.next_action_times
    rows = [
        ("Schedule ID", found.spec.schedule_id),
        ("Paused", "yes" if found.spec.paused else "no"),
        ("Note", found.spec.note or output.NONE),
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
    found = run(url, token, lambda api: api.trigger_schedule(schedule_id))
    if json_output:
        shown = TriggerResponse(flow_id=found.flow_id, run_id=found.run_id, started=found.started)
        output.emit_json(wire.dump(shown))
        return
    started = "yes" if found.started else "no (the overlap policy held it)"
    rows = [("Flow ID", found.flow_id), ("Run ID", output.text(found.run_id))]
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
    with reported(url):
        start_at, end_at = instant(start, "startAt"), instant(end, "endAt")
    found = run(url, token, lambda api: api.backfill_schedule(schedule_id, start_at, end_at))
    if json_output:
        output.emit_json(wire.dump(BackfillResponse(started=found.started, skipped=found.skipped)))
        return
    rows = [("Started", str(len(found.started))), ("Skipped", str(found.skipped))]
    blocks = [output.pairs(rows)]
    if found.started:
        blocks.append(output.table(["FLOW ID"], [[flow] for flow in found.started]))
    output.emit("\n\n".join(blocks))


@schedules.command(epilog=SCHEDULE_EXIT_CODES)
def delete(
    schedule_id: ScheduleIdArgument,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    json_output: JsonOption = False,
) -> None:
    """Delete a Schedule (deleteSchedule); the Flows it started keep running."""
    run(url, token, lambda api: api.delete_schedule(schedule_id))
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
    fired = run(url, token, lambda api: api.skip_timers(flow_id, step_execution_id, run_id=run_id))
    if json_output:
        output.emit_json(wire.dump(SkipTimersResponse(fired=fired)))
    else:
        output.emit(output.pairs([("Timers fired", str(fired))]))


def register(app: typer.Typer, flows: typer.Typer) -> None:
    """Add ``schedules`` to the ``dexlite`` command ``app`` and ``skip-timer`` to ``flows``."""
    flows.command("skip-timer", epilog=EXIT_CODES)(skip_timer)
    app.add_typer(schedules)
