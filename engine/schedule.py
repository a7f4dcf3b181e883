"""Schedules: a Flow type started on its own, every so often or on a cron line.

A :class:`ScheduleSpec` is declared by a caller and kept by the engine as durable state. Each
scheduled time ``T`` starts one Flow with the ID ``<scheduleId>-<T as YYYYMMDDTHHMMSSZ>``; its
runs carry the search field ``ScheduleId``. What happens when the previous action's Flow still
runs is the Schedule's :class:`OverlapPolicy`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engine.options import StartFlowOptions


class OverlapPolicy(enum.StrEnum):
    """What a scheduled time does while the previous action's Flow is still running."""

    #: Skip the time (counted in ``skipped``). The default.
    SKIP = "SKIP"
    #: Start it once the running one has closed; at most one waits, later times are skipped.
    BUFFER_ONE = "BUFFER_ONE"
    #: Start it anyway: several actions may run at once.
    ALLOW_ALL = "ALLOW_ALL"
    #: Cancel the running one, then start.
    CANCEL_OTHER = "CANCEL_OTHER"
    #: Terminate the running one, then start.
    TERMINATE_OTHER = "TERMINATE_OTHER"


@dataclass(frozen=True)
class ScheduleSpec:
    """What a Schedule starts, and when.

    Exactly one of ``every`` (whole seconds, times aligned to the Unix epoch) and ``cron``
    (five fields, or ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``, read in
    ``timezone``, an IANA name) is set. A time missed by more than ``catchup_window`` (the
    server was down) is skipped; a later one fires when the server is back. A paused Schedule
    starts nothing on its own, but can be triggered. ``flow_type`` is a Flow type name or a
    registered Flow class; ``input`` is its start Step's input.
    """

    schedule_id: str
    flow_type: Any
    input: Any = None
    every: timedelta | None = None
    cron: str | None = None
    timezone: str = "UTC"
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    catchup_window: timedelta = timedelta(minutes=1)
    start_options: StartFlowOptions = field(default_factory=StartFlowOptions)
    paused: bool = False
    note: str = ""


@dataclass(frozen=True)
class ScheduleAction:
    """One Flow a Schedule started: for which time, when, and the run's status now."""

    scheduled_at: datetime
    started_at: datetime
    flow_id: str
    run_id: str
    status: str


@dataclass(frozen=True)
class ScheduleDescription:
    """A Schedule as it stands: its spec, its next times, what it started and skipped.

    ``next_action_times`` holds the next five times (none while paused);
    ``recent_actions`` the last ten actions, newest first; ``running`` the Flow IDs of its
    actions still running; ``skipped`` the times it skipped (overlap, or missed beyond the
    catch-up window).
    """

    spec: ScheduleSpec
    next_action_times: list[datetime]
    recent_actions: list[ScheduleAction]
    running: list[str]
    skipped: int
    created_at: datetime
    updated_at: datetime

    @property
    def schedule_id(self) -> str:
        """Return the Schedule's ID."""
        return self.spec.schedule_id


@dataclass(frozen=True)
class SchedulePage:
    """A page of Schedules by ID; an empty ``next_page_token`` marks the last page."""

    schedules: list[ScheduleDescription]
    next_page_token: str


@dataclass(frozen=True)
class ScheduleTriggerResult:
    """The action a trigger started (``started``), or the overlap policy's refusal."""

    flow_id: str
    run_id: str | None
    started: bool


@dataclass(frozen=True)
class BackfillResult:
    """The Flow IDs a backfill started, oldest time first, and the times it skipped."""

    started: list[str]
    skipped: int
