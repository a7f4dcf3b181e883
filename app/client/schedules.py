"""Schedules and SkipTimer over REST."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import engine
from app.client.base import ClientBase, segment
from app.client.decoding import (
    duration,
    from_json_data,
    parse_time,
    seconds,
    without_nones,
)
from app.client.flow_types import flow_type_name


class ScheduleCalls(ClientBase):
    """The Schedule calls of :class:`app.client.Client`."""

    async def create_schedule(self, spec: engine.ScheduleSpec) -> engine.ScheduleDescription:
        """Create a Schedule (createSchedule)."""
        data = await self._call(
            "POST", "/api/v1/schedules", "createSchedule", body=schedule_body(spec, with_id=True)
        )
        return schedule_description(data)

    async def describe_schedule(self, schedule_id: str) -> engine.ScheduleDescription:
        """Describe a Schedule (describeSchedule)."""
        data = await self._call(
            "GET", f"/api/v1/schedules/{segment(schedule_id)}", "describeSchedule"
        )
        return schedule_description(data)

    async def list_schedules(
        self, page_size: int = 100, page_token: str = ""
    ) -> engine.SchedulePage:
        """Return a page of Schedules by ID (listSchedules)."""
        data = await self._call(
            "GET",
            "/api/v1/schedules",
            "listSchedules",
            params=without_nones({"pageSize": page_size, "pageToken": page_token or None}),
        )
        return engine.SchedulePage(
            [schedule_description(s) for s in data["schedules"]], data.get("nextPageToken") or ""
        )

    async def update_schedule(self, spec: engine.ScheduleSpec) -> engine.ScheduleDescription:
        """Replace a Schedule's spec (updateSchedule)."""
        data = await self._call(
            "PUT",
            f"/api/v1/schedules/{segment(spec.schedule_id)}",
            "updateSchedule",
            body=schedule_body(spec, with_id=False),
        )
        return schedule_description(data)

    async def pause_schedule(self, schedule_id: str, note: str = "") -> engine.ScheduleDescription:
        """Pause a Schedule with a note (pauseSchedule)."""
        data = await self._call(
            "POST",
            f"/api/v1/schedules/{segment(schedule_id)}/pause",
            "pauseSchedule",
            body={"note": note},
        )
        return schedule_description(data)

    async def unpause_schedule(
        self, schedule_id: str, note: str = ""
    ) -> engine.ScheduleDescription:
        """Unpause a Schedule with a note (unpauseSchedule)."""
        data = await self._call(
            "POST",
            f"/api/v1/schedules/{segment(schedule_id)}/unpause",
            "unpauseSchedule",
            body={"note": note},
        )
        return schedule_description(data)

    async def trigger_schedule(self, schedule_id: str) -> engine.ScheduleTriggerResult:
        """Start one action now under the overlap policy (triggerSchedule)."""
        data = await self._call(
            "POST", f"/api/v1/schedules/{segment(schedule_id)}/trigger", "triggerSchedule"
        )
        return engine.ScheduleTriggerResult(data["flowId"], data.get("runId"), data["started"])

    async def backfill_schedule(
        self, schedule_id: str, start: datetime, end: datetime
    ) -> engine.BackfillResult:
        """Act on every scheduled time in [start, end) (backfillSchedule)."""
        data = await self._call(
            "POST",
            f"/api/v1/schedules/{segment(schedule_id)}/backfill",
            "backfillSchedule",
            body={"startAt": engine.to_json_data(start), "endAt": engine.to_json_data(end)},
        )
        return engine.BackfillResult(list(data["started"]), data["skipped"])

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete a Schedule; the Flows it started keep running (deleteSchedule)."""
        await self._call("DELETE", f"/api/v1/schedules/{segment(schedule_id)}", "deleteSchedule")

    async def skip_timers(
        self, flow_id: str, step_execution_id: str, *, run_id: str | None = None
    ) -> int:
        """Fire now the Timers a pending Step execution waits on (skipTimers); return how
        many fired."""
        data = await self._call(
            "POST",
            f"/api/v1/flows/{segment(flow_id)}/timers/skip",
            "skipTimers",
            body=without_nones({"stepExecutionId": step_execution_id, "runId": run_id}),
        )
        return int(data["fired"])


def schedule_body(spec: engine.ScheduleSpec, *, with_id: bool) -> dict[str, Any]:
    """Return the create or update body of a ScheduleSpec."""
    options = spec.start_options
    return without_nones(
        {
            "scheduleId": spec.schedule_id if with_id else None,
            "flowType": flow_type_name(spec.flow_type),
            "input": engine.to_json_data(spec.input),
            "everySeconds": seconds(spec.every),
            "cron": spec.cron,
            "timezone": spec.timezone,
            "overlap": str(spec.overlap),
            "catchupWindowSeconds": seconds(spec.catchup_window),
            "startOptions": without_nones(
                {
                    "initialAttributes": {
                        k: engine.to_json_data(v)
                        for k, v in dict(options.initial_attributes).items()
                    },
                    "idReusePolicy": str(options.id_reuse_policy),
                    "timeoutSeconds": seconds(options.timeout),
                    "startDelaySeconds": seconds(options.start_delay),
                }
            ),
            "paused": spec.paused,
            "note": spec.note,
        }
    )


def schedule_description(data: dict[str, Any]) -> engine.ScheduleDescription:
    """Return a ScheduleDescription of its wire form."""
    options = data["startOptions"]
    spec = engine.ScheduleSpec(
        schedule_id=data["scheduleId"],
        flow_type=data["flowType"],
        input=from_json_data(data.get("input")),
        every=duration(data.get("everySeconds")),
        cron=data.get("cron"),
        timezone=data["timezone"],
        overlap=engine.OverlapPolicy(data["overlap"]),
        catchup_window=timedelta(seconds=data["catchupWindowSeconds"]),
        start_options=engine.StartFlowOptions(
            initial_attributes={
                k: from_json_data(v) for k, v in (options.get("initialAttributes") or {}).items()
            },
            id_reuse_policy=engine.IdReusePolicy(options["idReusePolicy"]),
            timeout=duration(options.get("timeoutSeconds")),
            start_delay=duration(options.get("startDelaySeconds")),
        ),
        paused=data["paused"],
        note=data["note"],
    )
    return engine.ScheduleDescription(
        spec=spec,
        next_action_times=[parse_time(t) for t in data["nextActionTimes"]],
        recent_actions=[
            engine.ScheduleAction(
                scheduled_at=parse_time(a["scheduledAt"]),
                started_at=parse_time(a["startedAt"]),
                flow_id=a["flowId"],
                run_id=a["runId"],
                status=a["status"],
            )
            for a in data["recentActions"]
        ],
        running=list(data["running"]),
        skipped=data["skipped"],
        created_at=parse_time(data["createdAt"]),
        updated_at=parse_time(data["updatedAt"]),
    )
