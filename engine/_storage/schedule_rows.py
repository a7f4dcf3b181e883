"""Schedules in storage: their rows, and the one commit that acts on a Schedule's times.

Acting on a time (a scheduled time, a trigger, a backfill, or a buffered time whose blocker
closed) locks the Schedule's row, decides by the overlap policy against the previous
action's run, starts the Flows it decides to start and moves the row on, all in one
transaction: a time is acted on once, whichever process gets there, and a crash leaves
either all of it or none. The runtime prepares the starts (their requests); this module
knows rows and JSON, not Flow classes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from engine._enums import RunStatus
from engine._storage import rows, start_units
from engine._storage import tables as t
from engine._storage.apply import apply_effects
from engine._storage.reads import Reader
from engine._storage.records import CommitResult, RunChange, RunClose, StagedEffects, StartRequest
from engine._storage.unit_statements import dialect_insert
from engine._storage.units import journaled
from engine.errors import FlowAlreadyStartedError, ScheduleAlreadyExistsError, ScheduleNotFoundError

#: The actions describeSchedule lists; older ones are deleted as new ones come.
KEPT_ACTIONS = 10

SKIP, BUFFER_ONE, ALLOW_ALL = "SKIP", "BUFFER_ONE", "ALLOW_ALL"
CANCEL_OTHER, TERMINATE_OTHER = "CANCEL_OTHER", "TERMINATE_OTHER"


@dataclass(slots=True)
class ScheduleState:
    """A Schedule's row: its spec (decoded JSON) and where its firing stands."""

    schedule_id: str
    flow_type: str
    spec: dict[str, Any]
    paused: bool
    note: str
    next_time: int
    buffered: int | None
    last_flow_id: str | None
    skipped: int
    created_at: int
    updated_at: int

    @property
    def overlap(self) -> str:
        """Return the Schedule's overlap policy."""
        return str(self.spec["overlap"])


@dataclass(slots=True)
class Acting:
    """What one commit does to a Schedule: act on ``times`` (each with its prepared start).

    ``expect_next`` guards a scheduled firing: the commit does nothing unless the row's
    ``next_time`` is still that (another process acted first). ``new_next`` and ``missed``
    (times beyond the catch-up window, counted as skipped) then move the row on.
    ``release`` starts the buffered time, if the row still holds it and its blocker closed.
    """

    schedule_id: str
    times: Sequence[tuple[int, StartRequest]] = ()
    expect_next: int | None = None
    new_next: int | None = None
    missed: int = 0
    release: tuple[int, StartRequest] | None = None


@dataclass(slots=True)
class Acted:
    """What acting did: the Flows started (time, Flow ID, run ID), the times skipped, and
    whether the commit applied at all (False: another process had acted first)."""

    started: list[tuple[int, str, str]] = field(default_factory=list)
    skipped: int = 0
    buffered: bool = False
    applied: bool = True


def _state(row: Any) -> ScheduleState:
    return ScheduleState(
        schedule_id=row.schedule_id,
        flow_type=row.flow_type,
        spec=json.loads(row.spec),
        paused=bool(row.paused),
        note=row.note,
        next_time=row.next_time,
        buffered=row.buffered,
        last_flow_id=row.last_flow_id,
        skipped=row.skipped,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _lock(conn: Connection, schedule_id: str) -> ScheduleState | None:
    s = t.schedules
    query = select(s).where(s.c.schedule_id == schedule_id).with_for_update()
    row = conn.execute(query).first()
    return None if row is None else _state(row)


def _locked(conn: Connection, schedule_id: str) -> ScheduleState:
    state = _lock(conn, schedule_id)
    if state is None:
        raise ScheduleNotFoundError(f"Schedule {schedule_id} was not found")
    return state


# -- changes of the Schedule itself -----------------------------------------------------------


def create(state: ScheduleState) -> Any:
    """Insert a new Schedule; ScheduleAlreadyExistsError when its ID is taken."""

    def unit(conn: Connection) -> CommitResult:
        values = _values(state)
        added = conn.execute(
            dialect_insert(conn)(t.schedules)
            .values(**values)
            .on_conflict_do_nothing(index_elements=[t.schedules.c.schedule_id])
        )
        if not added.rowcount:
            raise ScheduleAlreadyExistsError(
                f"Schedule {state.schedule_id} already exists", field="scheduleId"
            )
        return CommitResult()

    return unit


def replace_spec(state: ScheduleState, *, keep_next: bool) -> Any:
    """Replace a Schedule's spec, pause and note (updateSchedule); its counters and recent
    actions stay. ``keep_next``: the times did not change, the row's next time stays."""

    def unit(conn: Connection) -> CommitResult:
        current = _locked(conn, state.schedule_id)
        values = {
            "flow_type": state.flow_type,
            "spec": json.dumps(state.spec, separators=(",", ":")),
            "paused": state.paused,
            "note": state.note,
            "next_time": current.next_time if keep_next else state.next_time,
            "updated_at": state.updated_at,
        }
        _update(conn, state.schedule_id, values)
        return CommitResult()

    return unit


def set_paused(schedule_id: str, paused: bool, note: str, next_time: int, now: int) -> Any:
    """Pause or unpause a Schedule with a note; unpausing moves its next time past ``now``
    (``next_time``): the times it slept through are not made up."""

    def unit(conn: Connection) -> CommitResult:
        current = _locked(conn, schedule_id)
        values: dict[str, Any] = {"paused": paused, "note": note, "updated_at": now}
        if not paused and current.paused:
            values["next_time"] = next_time
        _update(conn, schedule_id, values)
        return CommitResult()

    return unit


def remove(schedule_id: str) -> Any:
    """Delete a Schedule and its recent actions (the Flows it started keep running)."""

    def unit(conn: Connection) -> CommitResult:
        _locked(conn, schedule_id)
        a = t.schedule_actions
        conn.execute(delete(a).where(a.c.schedule_id == schedule_id))
        conn.execute(delete(t.schedules).where(t.schedules.c.schedule_id == schedule_id))
        return CommitResult()

    return unit


def _values(state: ScheduleState) -> dict[str, Any]:
    return {
        "schedule_id": state.schedule_id,
        "flow_type": state.flow_type,
        "spec": json.dumps(state.spec, separators=(",", ":")),
        "paused": state.paused,
        "note": state.note,
        "next_time": state.next_time,
        "buffered": state.buffered,
        "last_flow_id": state.last_flow_id,
        "skipped": state.skipped,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
    }


def _update(conn: Connection, schedule_id: str, values: dict[str, Any]) -> None:
    s = t.schedules
    conn.execute(update(s).where(s.c.schedule_id == schedule_id).values(**values))


# -- acting on times ----------------------------------------------------------------------------


def act(acting: Acting, now: int) -> Any:
    """Act on a Schedule's times under its overlap policy, in one transaction (see Acting)."""

    def unit(conn: Connection) -> CommitResult:
        state = _locked(conn, acting.schedule_id)
        if acting.expect_next is not None and state.next_time != acting.expect_next:
            return CommitResult((), Acted(applied=False))
        acted = Acted(skipped=acting.missed)
        changes: list[RunChange] = []
        release = acting.release
        if (
            release is not None
            and state.buffered == release[0]
            and not _running(conn, state.last_flow_id)
        ):
            state.buffered = None
            _start(conn, state, release, now, acted, changes)
        for when, request in acting.times:
            _act_on(conn, state, when, request, now, acted, changes)
        values: dict[str, Any] = {
            "skipped": state.skipped + acted.skipped,
            "buffered": state.buffered,
            "last_flow_id": state.last_flow_id,
        }
        if acting.new_next is not None:
            values["next_time"] = acting.new_next
        _update(conn, state.schedule_id, values)
        if acted.started:
            _keep_recent(conn, state.schedule_id)
        return CommitResult(tuple(changes), acted)

    return journaled(unit)


def _act_on(
    conn: Connection,
    state: ScheduleState,
    when: int,
    request: StartRequest,
    now: int,
    acted: Acted,
    changes: list[RunChange],
) -> None:
    policy = state.overlap
    if policy != ALLOW_ALL and _running(conn, state.last_flow_id):
        if policy == SKIP:
            acted.skipped += 1
            return
        if policy == BUFFER_ONE:
            if state.buffered is None:
                state.buffered = when
                acted.buffered = True
            else:
                acted.skipped += 1
            return
        status = RunStatus.CANCELED if policy == CANCEL_OTHER else RunStatus.TERMINATED
        assert state.last_flow_id is not None
        changes.extend(_stop(conn, state.last_flow_id, status, state.schedule_id, now))
    _start(conn, state, (when, request), now, acted, changes)


def _start(
    conn: Connection,
    state: ScheduleState,
    action: tuple[int, StartRequest],
    now: int,
    acted: Acted,
    changes: list[RunChange],
) -> None:
    when, request = action
    try:
        outcome, started = start_units.insert_run(conn, request, now)
    except FlowAlreadyStartedError:
        # The Flow ID of this time runs already (a trigger in the same second), or its ID
        # reuse policy refuses another run: the time is skipped, not failed.
        acted.skipped += 1
        return
    changes.extend(started)
    if not outcome.started:  # the same time acted on before (its request ID)
        return
    acted.started.append((when, request.flow_id, outcome.run_id))
    state.last_flow_id = request.flow_id
    _record(conn, state.schedule_id, when, now, request.flow_id, outcome.run_id)


def _running(conn: Connection, flow_id: str | None) -> bool:
    if flow_id is None:
        return False
    r, f = t.runs, t.flows
    query = (
        select(r.c.status).join(f, f.c.latest_run_id == r.c.run_id).where(f.c.flow_id == flow_id)
    )
    return conn.execute(query).scalar() == RunStatus.RUNNING


def _stop(
    conn: Connection, flow_id: str, status: RunStatus, schedule_id: str, now: int
) -> list[RunChange]:
    run = rows.lock_latest_run(conn, flow_id)
    if run is None or not run.is_running:
        return []
    close = RunClose(status, error_message=f"stopped by Schedule {schedule_id}'s next action")
    return apply_effects(conn, run, StagedEffects(decision=close), now)


def _record(
    conn: Connection, schedule_id: str, when: int, now: int, flow_id: str, run_id: str
) -> None:
    a = t.schedule_actions
    conn.execute(
        insert(a).values(
            schedule_id=schedule_id,
            scheduled_at=when,
            started_at=now,
            flow_id=flow_id,
            run_id=run_id,
        )
    )


def _keep_recent(conn: Connection, schedule_id: str) -> None:
    """Delete a Schedule's actions beyond the last few (once per commit, however many it
    recorded)."""
    a = t.schedule_actions
    conn.execute(
        delete(a).where(
            a.c.schedule_id == schedule_id,
            a.c.seq.not_in(
                select(a.c.seq)
                .where(a.c.schedule_id == schedule_id)
                .order_by(a.c.seq.desc())
                .limit(KEPT_ACTIONS)
            ),
        )
    )


# -- reads --------------------------------------------------------------------------------------


@dataclass(slots=True)
class StoredAction:
    """An action a Schedule started, with its run's status now."""

    scheduled_at: int
    started_at: int
    flow_id: str
    run_id: str
    status: str


async def load(db: Reader, schedule_id: str) -> ScheduleState | None:
    """Return a Schedule's row, or None."""
    s = t.schedules
    query = select(s).where(s.c.schedule_id == schedule_id)
    row = await db.scan(lambda conn: conn.execute(query).first())
    return None if row is None else _state(row)


async def page(db: Reader, after_id: str, limit: int) -> list[ScheduleState]:
    """Return up to ``limit`` Schedules by ID after ``after_id``."""
    s = t.schedules
    query = select(s).where(s.c.schedule_id > after_id).order_by(s.c.schedule_id).limit(limit)
    found = await db.scan(lambda conn: conn.execute(query).all())
    return [_state(row) for row in found]


async def actions(db: Reader, schedule_id: str) -> list[StoredAction]:
    """Return a Schedule's recent actions, newest first, with their runs' statuses."""
    a, r = t.schedule_actions, t.runs
    query = (
        select(a.c.scheduled_at, a.c.started_at, a.c.flow_id, a.c.run_id, r.c.status)
        .join(r, r.c.run_id == a.c.run_id, isouter=True)
        .where(a.c.schedule_id == schedule_id)
        .order_by(a.c.seq.desc())
        .limit(KEPT_ACTIONS)
    )
    found = await db.scan(lambda conn: conn.execute(query).all())
    # A purged run (retention) leaves its action without a status.
    return [StoredAction(*row[:4], row.status or "PURGED") for row in found]


async def running(db: Reader, schedule_id: str) -> list[str]:
    """Return the Flow IDs of a Schedule's actions still running."""
    r = t.runs
    query = (
        select(r.c.flow_id)
        .where(r.c.schedule_id == schedule_id, r.c.status == RunStatus.RUNNING)
        .order_by(r.c.started_at, r.c.flow_id)
    )
    found = await db.scan(lambda conn: conn.execute(query).all())
    return [row.flow_id for row in found]


async def due(db: Reader, now: int, limit: int) -> list[ScheduleState]:
    """Return Schedules with a time due by ``now`` (unpaused) or a buffered time, earliest
    first, at most ``limit``."""
    s = t.schedules
    query = (
        select(s)
        .where(((s.c.paused.is_(False)) & (s.c.next_time <= now)) | s.c.buffered.is_not(None))
        .order_by(s.c.next_time)
        .limit(limit)
    )
    found = await db.scan(lambda conn: conn.execute(query).all())
    return [_state(row) for row in found]


async def flow_running(db: Reader, flow_id: str) -> bool:
    """Return whether the latest run of ``flow_id`` is running."""
    return bool(await db.read(lambda conn: _running(conn, flow_id)))


async def earliest(db: Reader) -> int | None:
    """Return the earliest next time of an unpaused Schedule, or None."""
    s = t.schedules
    query = select(func.min(s.c.next_time)).where(s.c.paused.is_(False))
    found: int | None = await db.scan(lambda conn: conn.execute(query).scalar())
    return found
