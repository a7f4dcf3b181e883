"""Schedules' specs as stored: validated eagerly into a row's JSON, and read back.

A spec's input and initial Attributes are kept in their JSON forms; each action's start is
made from them again, with a request ID naming its time.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from engine import _codec
from engine._enums import IdReusePolicy
from engine._ids import check_id
from engine._runtime.schedule_times import Times, action_flow_id, check_times
from engine._runtime.starts import Starter
from engine._storage.schedule_rows import ScheduleState
from engine._tokens import unseal
from engine.clock import to_micros
from engine.errors import FlowTypeNotFoundError, InvalidArgumentError, InvalidPageTokenError
from engine.options import StartFlowOptions
from engine.registry import Registry
from engine.schedule import OverlapPolicy, ScheduleSpec


async def checked_state(
    registry: Registry, starter: Starter, spec: ScheduleSpec, now: int
) -> ScheduleState:
    """Validate ``spec`` eagerly and return the row it makes (next time after now)."""
    if not isinstance(spec, ScheduleSpec):
        raise InvalidArgumentError("a Schedule needs a ScheduleSpec", field="spec")
    schedule_id = checked_id(spec.schedule_id)
    try:
        flow = registry.spec_of(spec.flow_type)
    except FlowTypeNotFoundError as exc:
        raise InvalidArgumentError(exc.detail, field="flowType") from None
    times = check_times(spec.every, spec.cron, spec.timezone)
    try:
        overlap = OverlapPolicy(spec.overlap)
    except ValueError:
        raise InvalidArgumentError(
            "overlap must be SKIP, BUFFER_ONE, ALLOW_ALL, CANCEL_OTHER or TERMINATE_OTHER",
            field="overlap",
        ) from None
    window = spec.catchup_window
    if not isinstance(window, timedelta) or not timedelta(0) <= window <= timedelta(days=366):
        raise InvalidArgumentError(
            "catchupWindow must be between 0 and 366 days", field="catchupWindowSeconds"
        )
    if not isinstance(spec.paused, bool) or not isinstance(spec.note, str):
        raise InvalidArgumentError("paused must be a boolean and note a string", field="note")
    options = spec.start_options or StartFlowOptions()
    if options.request_id is not None:
        raise InvalidArgumentError(
            "a Schedule's starts take their request IDs from their times",
            field="startOptions.requestId",
        )
    # The start as it will be made (its input, options and ID checked), stored nowhere.
    probe = action_flow_id(schedule_id, 0)
    await starter.prepare(flow, probe, spec.input, options, store_blobs=False)
    value = (
        None
        if flow.start_step is None
        else _codec.validate_client_value(flow.input_type, spec.input, what="input")
    )
    stored_spec = {
        "input": _codec.to_jsonable(value),
        "everySeconds": None if spec.every is None else int(spec.every.total_seconds()),
        "cron": spec.cron,
        "timezone": spec.timezone,
        "overlap": str(overlap),
        "catchupWindowSeconds": window.total_seconds(),
        "startOptions": _options_json(flow, options),
    }
    return ScheduleState(
        schedule_id=schedule_id,
        flow_type=flow.flow_type,
        spec=stored_spec,
        paused=spec.paused,
        note=spec.note,
        next_time=times.next(now),
        buffered=None,
        last_flow_id=None,
        skipped=0,
        created_at=now,
        updated_at=now,
    )


def checked_id(schedule_id: Any) -> str:
    check_id(schedule_id, "scheduleId")
    return str(schedule_id)


def times_of(spec: dict[str, Any]) -> Times:
    return Times(spec["everySeconds"], spec["cron"], spec["timezone"])


def instant(moment: Any, field: str) -> int:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidArgumentError(f"{field} must be a time with its offset", field=field)
    return to_micros(moment.timestamp())


def after_token(token: str) -> str:
    if not token:
        return ""
    try:
        return unseal(token).decode()
    except (ValueError, UnicodeDecodeError):
        raise InvalidPageTokenError("pageToken is malformed", field="pageToken") from None


def _options_json(flow: Any, options: StartFlowOptions) -> dict[str, Any]:
    """Return a start's options as stored JSON (values in their JSON forms)."""
    attributes = {
        key: _codec.to_jsonable(value) for key, value in dict(options.initial_attributes).items()
    }
    return {
        "initialAttributes": attributes,
        "idReusePolicy": str(IdReusePolicy(options.id_reuse_policy)),
        "timeoutSeconds": None if options.timeout is None else options.timeout.total_seconds(),
        "startDelaySeconds": (
            None if options.start_delay is None else options.start_delay.total_seconds()
        ),
    }


def start_options(data: dict[str, Any], schedule_id: str, when: int) -> StartFlowOptions:
    """Return the options of the start of time ``when``: the stored ones, and a request ID
    naming the time, so a start made twice for it is one start."""
    timeout, delay = data["timeoutSeconds"], data["startDelaySeconds"]
    return StartFlowOptions(
        initial_attributes={
            key: _codec.from_jsonable(value) for key, value in data["initialAttributes"].items()
        },
        id_reuse_policy=IdReusePolicy(data["idReusePolicy"]),
        timeout=None if timeout is None else timedelta(seconds=timeout),
        request_id=f"{schedule_id}@{when}",
        ignore_already_started=True,
        start_delay=None if delay is None else timedelta(seconds=delay),
    )


def spec_of(state: ScheduleState) -> ScheduleSpec:
    """Return the ScheduleSpec a stored Schedule was made from."""
    data = state.spec
    options = start_options(data["startOptions"], state.schedule_id, 0)
    every = data["everySeconds"]
    return ScheduleSpec(
        schedule_id=state.schedule_id,
        flow_type=state.flow_type,
        input=_codec.from_jsonable(data["input"]),
        every=None if every is None else timedelta(seconds=every),
        cron=data["cron"],
        timezone=data["timezone"],
        overlap=OverlapPolicy(data["overlap"]),
        catchup_window=timedelta(seconds=data["catchupWindowSeconds"]),
        start_options=dataclasses.replace(options, request_id=None, ignore_already_started=False),
        paused=state.paused,
        note=state.note,
    )
