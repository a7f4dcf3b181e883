"""Wire schemas of Schedules and SkipTimer (docs/concepts/schedules.md): camelCase forms of
ScheduleSpec."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

import engine
from app.schemas import MAX_TIMEOUT_SECONDS, AttributeValues, Lax, Request, Wire

MAX_DELAY_SECONDS = MAX_TIMEOUT_SECONDS


class ScheduleStartOptionsBody(Request):
    """How each action starts its Flow (its request ID is derived from its time)."""

    initial_attributes: AttributeValues = Field(
        default_factory=dict,
        description='Values committed with each start: {"name": v} or {"map/instance": v}.',
    )
    id_reuse_policy: Lax[engine.IdReusePolicy] = engine.IdReusePolicy.ALLOW_DUPLICATE
    timeout_seconds: float | None = Field(
        None, gt=0, le=MAX_TIMEOUT_SECONDS, description="Each run's durable Flow timeout."
    )
    start_delay_seconds: float | None = Field(
        None, ge=0, le=MAX_DELAY_SECONDS, description="Each run's start Step runs this late."
    )

    def to_engine(self) -> engine.StartFlowOptions:
        """Return the engine's options."""
        return engine.StartFlowOptions(
            initial_attributes=self.initial_attributes,
            id_reuse_policy=self.id_reuse_policy,
            timeout=_seconds(self.timeout_seconds),
            start_delay=_seconds(self.start_delay_seconds),
        )


class ScheduleBody(Request):
    """A Schedule: exactly one of everySeconds and cron; the rest has defaults."""

    schedule_id: str | None = Field(
        None, min_length=1, max_length=256, description="Required to create; the path's on update."
    )
    flow_type: str = Field(min_length=1, max_length=256)
    input: Any = None
    every_seconds: int | None = Field(
        None,
        ge=1,
        le=366 * 86400,
        description="Start every N seconds (times aligned to the Unix epoch), at most 366 days.",
    )
    cron: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Five cron fields, or @hourly, @daily, @weekly, @monthly, @yearly.",
    )
    timezone: str = Field("UTC", min_length=1, max_length=64, description="IANA zone of cron.")
    overlap: Lax[engine.OverlapPolicy] = engine.OverlapPolicy.SKIP
    catchup_window_seconds: float = Field(
        60, ge=0, le=366 * 86400, description="Missed times older than this are skipped."
    )
    start_options: ScheduleStartOptionsBody = Field(default_factory=ScheduleStartOptionsBody)
    paused: bool = False
    note: str = Field("", max_length=4096)

    def to_spec(self, schedule_id: str) -> engine.ScheduleSpec:
        """Return the engine's spec of this body for ``schedule_id``."""
        return engine.ScheduleSpec(
            schedule_id=schedule_id,
            flow_type=self.flow_type,
            input=self.input,
            every=None if self.every_seconds is None else timedelta(seconds=self.every_seconds),
            cron=self.cron,
            timezone=self.timezone,
            overlap=self.overlap,
            catchup_window=timedelta(seconds=self.catchup_window_seconds),
            start_options=self.start_options.to_engine(),
            paused=self.paused,
            note=self.note,
        )


class NoteBody(Request):
    """A note saying why a Schedule was paused or unpaused."""

    note: str = Field("", max_length=4096)


class BackfillBody(Request):
    """The range of scheduled times to act on: [startAt, endAt)."""

    start_at: Lax[datetime]
    end_at: Lax[datetime]


class SkipTimersBody(Request):
    """The pending Step execution whose Timers fire now (of the latest run by default)."""

    step_execution_id: str = Field(min_length=1, max_length=512)
    run_id: str | None = Field(None, min_length=1, max_length=256)


class ScheduleStartOptionsResponse(Wire):
    """How each action starts its Flow."""

    initial_attributes: AttributeValues
    id_reuse_policy: engine.IdReusePolicy
    timeout_seconds: float | None
    start_delay_seconds: float | None


class ScheduleActionResponse(Wire):
    """A Flow the Schedule started: for which time, when, and its run's status now."""

    scheduled_at: datetime
    started_at: datetime
    flow_id: str
    run_id: str
    status: str


class ScheduleResponse(Wire):
    """A Schedule: its spec, next times, recent actions, running Flows and skipped times."""

    schedule_id: str
    flow_type: str
    input: Any
    every_seconds: int | None
    every: int | None = Field(description="The same as everySeconds.")
    cron: str | None
    timezone: str
    overlap: engine.OverlapPolicy
    catchup_window_seconds: float
    start_options: ScheduleStartOptionsResponse
    paused: bool
    note: str
    next_action_times: list[datetime] = Field(description="The next five; none while paused.")
    recent_actions: list[ScheduleActionResponse] = Field(description="The last ten, newest first.")
    running: list[str] = Field(description="Flow IDs of its actions still running.")
    skipped: int = Field(description="Times skipped: overlap, or missed beyond the window.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, found: engine.ScheduleDescription) -> ScheduleResponse:
        """Return the wire form of a description."""
        spec = found.spec
        options = spec.start_options
        every = None if spec.every is None else int(spec.every.total_seconds())
        return cls(
            schedule_id=spec.schedule_id,
            flow_type=str(spec.flow_type),
            input=engine.to_json_data(spec.input),
            every_seconds=every,
            every=every,
            cron=spec.cron,
            timezone=spec.timezone,
            overlap=spec.overlap,
            catchup_window_seconds=spec.catchup_window.total_seconds(),
            start_options=ScheduleStartOptionsResponse(
                initial_attributes={
                    key: engine.to_json_data(value)
                    for key, value in dict(options.initial_attributes).items()
                },
                id_reuse_policy=options.id_reuse_policy,
                timeout_seconds=None
                if options.timeout is None
                else options.timeout.total_seconds(),
                start_delay_seconds=(
                    None if options.start_delay is None else options.start_delay.total_seconds()
                ),
            ),
            paused=spec.paused,
            note=spec.note,
            next_action_times=found.next_action_times,
            recent_actions=[
                ScheduleActionResponse(
                    scheduled_at=a.scheduled_at,
                    started_at=a.started_at,
                    flow_id=a.flow_id,
                    run_id=a.run_id,
                    status=a.status,
                )
                for a in found.recent_actions
            ],
            running=found.running,
            skipped=found.skipped,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )


class ScheduleListResponse(Wire):
    """A page of Schedules by ID."""

    schedules: list[ScheduleResponse]
    next_page_token: str


class TriggerResponse(Wire):
    """The action a trigger started, or the overlap policy's refusal (started false)."""

    flow_id: str
    run_id: str | None
    started: bool


class BackfillResponse(Wire):
    """The Flow IDs a backfill started, oldest time first, and the times it skipped."""

    started: list[str]
    skipped: int


class SkipTimersResponse(Wire):
    """How many Timers fired."""

    fired: int


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)
