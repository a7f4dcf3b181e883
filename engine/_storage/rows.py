"""Row-level pieces of commit units: locking a run, writing Attributes, Steps and history.

Building a Core statement costs more than SQLite takes to run it, so the hot statements are
built once here with bound parameters and reused by every unit. None of these functions commits:
they run inside the transaction of the unit that calls them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from engine._storage import tables as t
from engine._storage.indexes import apply_index_writes
from engine._storage.records import (
    AttributeWrite,
    HistoryEventType,
    QueuedStep,
    RunStatus,
    StartRequest,
    StepState,
)

_se = t.step_executions

# -- statements built once --------------------------------------------------------------------

_READ_RUN = select(t.runs.c.run_id, t.runs.c.flow_id, t.runs.c.flow_type, t.runs.c.status).where(
    t.runs.c.run_id == bindparam("run_id")
)
_READ_LATEST_RUN = (
    select(
        t.runs.c.run_id,
        t.runs.c.flow_id,
        t.runs.c.flow_type,
        t.runs.c.status,
        t.runs.c.request_id,
    )
    .join(t.flows, t.flows.c.latest_run_id == t.runs.c.run_id)
    .where(t.flows.c.flow_id == bindparam("flow_id"))
)
# FOR UPDATE serializes units on one run across connections (PostgreSQL). SQLite has no row
# locks (its single writer is serial already), so it gets the plain read, which is cheaper
# even though SQLAlchemy would render FOR UPDATE there as nothing.
_LOCKING = {"sqlite": (_READ_RUN, _READ_LATEST_RUN)}
_FOR_UPDATE = (_READ_RUN.with_for_update(), _READ_LATEST_RUN.with_for_update())
_STATUS = {status.value: status for status in RunStatus}
_ATTEMPT = select(_se.c.state, _se.c.attempt, _se.c.fence).where(_se.c.id == bindparam("step_id"))
#: ``conn.info`` key: the ID of the process whose commits claim the Steps they queue (set on
#: the connections of a shared database; absent on SQLite, whose Steps are never claimed).
CLAIMANT = "dexlite.claimant"
_DELETE_ATTRIBUTE = delete(t.attributes).where(
    t.attributes.c.run_id == bindparam("r"),
    t.attributes.c.instance == bindparam("i"),
    t.attributes.c.name == bindparam("n"),
)
_INSERT_HISTORY = insert(t.history)
_INSERT_STEPS = insert(_se)
_CLOSE_STEP = (
    update(_se)
    .where(_se.c.id == bindparam("b_id"))
    .values(
        state=bindparam("b_state"),
        closed_at=bindparam("b_now"),
        due_at=None,
        is_completion=bindparam("b_completion"),
        output=bindparam("b_output"),
        error_type=bindparam("b_error_type"),
        error_message=bindparam("b_error_message"),
    )
)
_REQUEUE_STEP = (
    update(_se)
    .where(_se.c.id == bindparam("b_id"))
    .values(
        phase=bindparam("b_phase"),
        attempt=bindparam("b_attempt"),
        due_at=bindparam("b_due"),
        held_locks=bindparam("b_held"),
    )
)
# On a shared database the committing process claims the attempt it queues, with a new token.
_REQUEUE_CLAIMED = _REQUEUE_STEP.values(
    claimed_by=bindparam("b_claimant"), fence=_se.c.fence + 1
).returning(_se.c.fence)
_COUNT_ACTIVE = (
    select(func.count())
    .select_from(_se)
    .where(_se.c.run_id == bindparam("run_id"), _se.c.state == StepState.PENDING)
)
_COUNT_COMPLETIONS = (
    select(func.count())
    .select_from(_se)
    .where(_se.c.run_id == bindparam("run_id"), _se.c.is_completion.is_(True))
)
_ACTIVE_STEPS = select(_se.c.id).where(
    _se.c.run_id == bindparam("run_id"), _se.c.state == StepState.PENDING
)
_ACTIVE_STEPS_OF_TYPES = _ACTIVE_STEPS.where(
    _se.c.step_type.in_(bindparam("types", expanding=True))
)
_CANCEL_STEPS = (
    update(_se)
    .where(_se.c.id.in_(bindparam("ids", expanding=True)))
    .values(state=StepState.CANCELED, closed_at=bindparam("b_now"), due_at=None)
)
_CLOSE_RUN = (
    update(t.runs)
    .where(t.runs.c.run_id == bindparam("b_run_id"))
    .values(
        status=bindparam("b_status"),
        closed_at=bindparam("b_now"),
        error_type=bindparam("b_error_type"),
        error_message=bindparam("b_error_message"),
    )
)
_INSERT_RUN = insert(t.runs)
_DELETE_RUN = delete(t.runs).where(t.runs.c.run_id == bindparam("run_id"))
_MOVE_FLOW = (
    update(t.flows)
    .where(t.flows.c.flow_id == bindparam("b_flow_id"))
    .values(latest_run_id=bindparam("b_run_id"), flow_type=bindparam("b_flow_type"))
)
_upserts: dict[str, Any] = {}
_claims: dict[str, Any] = {}
_counts: dict[str, Any] = {}


def dialect_insert(conn: Connection) -> Any:
    """Return the ``insert`` of the connection's dialect (it has ON CONFLICT)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def _upsert_attributes(conn: Connection) -> Any:
    stmt = _upserts.get(conn.dialect.name)
    if stmt is None:
        insert_ = dialect_insert(conn)(t.attributes)
        stmt = _upserts[conn.dialect.name] = insert_.on_conflict_do_update(
            index_elements=[t.attributes.c.run_id, t.attributes.c.instance, t.attributes.c.name],
            set_={
                "value": insert_.excluded.value,
                "blob": insert_.excluded.blob,
                "updated_at": insert_.excluded.updated_at,
            },
        )
    return stmt


# -- the run ------------------------------------------------------------------------------------


@dataclass(slots=True)
class LockedRun:
    """A run locked for the rest of the unit's transaction."""

    run_id: str
    flow_id: str
    flow_type: str
    status: RunStatus

    @property
    def is_running(self) -> bool:
        """Return True while the run is open."""
        return self.status == RunStatus.RUNNING


@dataclass(slots=True)
class LatestRun(LockedRun):
    """The latest run of a Flow ID, locked with its Flow row."""

    request_id: str | None


def lock_run(conn: Connection, run_id: str) -> LockedRun | None:
    """Lock ``run_id`` for this transaction and return it; None when there is no such run."""
    statement = _LOCKING.get(conn.dialect.name, _FOR_UPDATE)[0]
    row = conn.execute(statement, {"run_id": run_id}).first()
    if row is None:
        return None
    return LockedRun(row.run_id, row.flow_id, row.flow_type, _STATUS[row.status])


def lock_latest_run(conn: Connection, flow_id: str) -> LatestRun | None:
    """Lock the Flow ID's row and its latest run; None when the Flow ID is unused."""
    statement = _LOCKING.get(conn.dialect.name, _FOR_UPDATE)[1]
    row = conn.execute(statement, {"flow_id": flow_id}).first()
    if row is None:
        return None
    return LatestRun(row.run_id, row.flow_id, row.flow_type, _STATUS[row.status], row.request_id)


def attempt_is_current(conn: Connection, step_id: str, attempt: int, fence: int = 0) -> bool:
    """Return True when the Step execution is still pending at ``attempt`` under the claim
    ``fence`` (lock its run first): a superseded claim's attempt may no longer commit."""
    row = conn.execute(_ATTEMPT, {"step_id": step_id}).first()
    return (
        row is not None
        and row.state == StepState.PENDING
        and row.attempt == attempt
        and row.fence == fence
    )


def insert_run(conn: Connection, request: StartRequest, now: int) -> None:
    """Insert the run row of a start."""
    conn.execute(
        _INSERT_RUN,
        {
            "run_id": request.run_id,
            "flow_id": request.flow_id,
            "flow_type": request.flow_type,
            "status": RunStatus.RUNNING,
            "input": request.input,
            "request_id": request.request_id,
            "started_at": now,
            "timeout_at": request.timeout_at,
            "closed_at": None,
            "error_type": None,
            "error_message": None,
        },
    )


def delete_run(conn: Connection, run_id: str) -> None:
    """Delete a run row that nothing refers to yet (a start that lost a race)."""
    conn.execute(_DELETE_RUN, {"run_id": run_id})


def claim_flow_id(conn: Connection, request: StartRequest) -> bool:
    """Create the Flow ID's row pointing at the new run; False when another start made it."""
    stmt = _claims.get(conn.dialect.name)
    if stmt is None:
        stmt = _claims[conn.dialect.name] = (
            dialect_insert(conn)(t.flows)
            .values(
                flow_id=bindparam("b_flow_id"),
                flow_type=bindparam("b_flow_type"),
                latest_run_id=bindparam("b_run_id"),
            )
            .on_conflict_do_nothing(index_elements=[t.flows.c.flow_id])
        )
    created = conn.execute(stmt, _pointer(request))
    return bool(created.rowcount)


def point_flow_at(conn: Connection, request: StartRequest) -> None:
    """Make the new run the Flow ID's latest."""
    conn.execute(_MOVE_FLOW, _pointer(request))


def _pointer(request: StartRequest) -> dict[str, str]:
    return {
        "b_flow_id": request.flow_id,
        "b_flow_type": request.flow_type,
        "b_run_id": request.run_id,
    }


# -- Attributes and history ---------------------------------------------------------------------


def apply_writes(conn: Connection, run_id: str, writes: Iterable[AttributeWrite], now: int) -> None:
    """Upsert or delete Attribute rows (and their index rows); the last write to a key wins."""
    writes = list(writes)
    latest: dict[tuple[str, str], AttributeWrite] = {}
    for w in writes:
        latest[(w.name, w.instance)] = w
    upserts = [
        {
            "run_id": run_id,
            "name": w.name,
            "instance": w.instance,
            "value": w.value,
            "blob": w.blob,
            "updated_at": now,
        }
        for w in latest.values()
        if w.value is not None or w.blob
    ]
    deletes = [
        {"r": run_id, "n": w.name, "i": w.instance}
        for w in latest.values()
        if w.value is None and not w.blob
    ]
    if upserts:
        conn.execute(_upsert_attributes(conn), upserts)
    if deletes:
        conn.execute(_DELETE_ATTRIBUTE, deletes)
    # Index rows commit in this same transaction, so search reads its own writes.
    apply_index_writes(conn, run_id, writes)


def add_history(
    conn: Connection, run_id: str, events: Iterable[tuple[str, dict[str, Any]]], now: int
) -> None:
    """Append events to the run's history."""
    rows = [
        {
            "run_id": run_id,
            "event_type": kind,
            "at": now,
            "details": json.dumps(details, separators=(",", ":"), default=str),
        }
        for kind, details in events
    ]
    if rows:
        conn.execute(_INSERT_HISTORY, rows)


def written_keys(writes: Iterable[AttributeWrite]) -> list[str]:
    """Return the sorted, distinct keys of ``writes`` (for history)."""
    return sorted({w.key for w in writes})


# -- Steps --------------------------------------------------------------------------------------


def insert_steps(conn: Connection, steps: Iterable[QueuedStep], now: int) -> None:
    """Create pending Step executions, numbering each ``<StepType>-<n>`` within its run.

    A step created by the runtime has no ID yet; it gets it here (set on the record, which the
    commit's result carries on). A unit may run twice (replayed after its batch rolled back):
    the IDs it gave the first time are given again, from the per-run counters, which the
    rollback put back.
    """
    steps = list(steps)
    _number(conn, [s for s in steps if not s.id or s.numbered])
    rows = [
        {
            "id": s.id,
            "run_id": s.run_id,
            "step_type": s.step_type,
            "input": s.input,
            "state": StepState.PENDING,
            "phase": s.phase,
            "attempt": s.attempt,
            "due_at": s.due_at,
            "created_at": now,
        }
        for s in steps
    ]
    claimant = conn.info.get(CLAIMANT)
    if claimant is not None:
        for row, step in zip(rows, steps, strict=True):
            row["claimed_by"], row["fence"] = claimant, 1
            step.fence = 1
    if rows:
        conn.execute(_INSERT_STEPS, rows)


def _number(conn: Connection, steps: list[QueuedStep]) -> None:
    """Give new executions their IDs: the run's counter of their Step type, counted on."""
    by_type: dict[tuple[str, str], list[QueuedStep]] = {}
    for step in steps:
        by_type.setdefault((step.run_id, step.step_type), []).append(step)
    for (run_id, step_type), group in by_type.items():
        last = conn.execute(
            _count_statement(conn), {"r": run_id, "t": step_type, "k": len(group)}
        ).scalar_one()
        for n, step in enumerate(group, start=last - len(group) + 1):
            step.id = f"{run_id}:{step_type}-{n}"
            step.numbered = True


def _count_statement(conn: Connection) -> Any:
    stmt = _counts.get(conn.dialect.name)
    if stmt is None:
        sc = t.step_counters
        insert_ = dialect_insert(conn)(sc).values(
            run_id=bindparam("r"), step_type=bindparam("t"), count=bindparam("k")
        )
        stmt = _counts[conn.dialect.name] = insert_.on_conflict_do_update(
            index_elements=[sc.c.run_id, sc.c.step_type],
            set_={"count": sc.c.count + insert_.excluded.count},
        ).returning(sc.c.count)
    return stmt


def requeue_step(conn: Connection, step: QueuedStep) -> None:
    """Record a pending execution's next attempt: its phase, attempt number and due time
    (on a shared database also this process's claim on it, whose token ``step`` takes)."""
    # Only a retry keeps locks while it waits: its keys go with it (a new phase holds none).
    held = json.dumps(list(step.held_locks)) if step.attempt > 1 and step.held_locks else None
    params = {
        "b_id": step.id,
        "b_phase": step.phase,
        "b_attempt": step.attempt,
        "b_due": step.due_at,
        "b_held": held,
    }
    claimant = conn.info.get(CLAIMANT)
    if claimant is None:
        conn.execute(_REQUEUE_STEP, params)
        return
    step.fence = conn.execute(_REQUEUE_CLAIMED, {**params, "b_claimant": claimant}).scalar_one()


def close_step(
    conn: Connection,
    step_id: str,
    state: StepState,
    now: int,
    *,
    is_completion: bool,
    output: str | None,
    error_type: str | None,
    error_message: str | None,
) -> None:
    """Close a Step execution with its outcome."""
    conn.execute(
        _CLOSE_STEP,
        {
            "b_id": step_id,
            "b_state": state,
            "b_now": now,
            "b_completion": is_completion,
            "b_output": output,
            "b_error_type": error_type,
            "b_error_message": error_message,
        },
    )


def cancel_steps(
    conn: Connection,
    run_id: str,
    now: int,
    *,
    step_types: Iterable[str] | None = None,
    keep: Iterable[str] = (),
) -> tuple[str, ...]:
    """Cancel the run's active Steps (of ``step_types`` if given) except ``keep``."""
    params: dict[str, Any] = {"run_id": run_id}
    query = _ACTIVE_STEPS
    if step_types is not None:
        types = list(step_types)
        if not types:
            return ()
        query, params["types"] = _ACTIVE_STEPS_OF_TYPES, types
    keep_ids = set(keep)
    found: list[str] = list(conn.execute(query, params).scalars())
    ids = tuple(step_id for step_id in found if step_id not in keep_ids)
    if ids:
        conn.execute(_CANCEL_STEPS, {"ids": list(ids), "b_now": now})
    return ids


def run_is_done(conn: Connection, run_id: str) -> bool:
    """Return True when no Step is active and at least one completion was recorded."""
    if conn.execute(_COUNT_ACTIVE, {"run_id": run_id}).scalar_one():
        return False
    return bool(conn.execute(_COUNT_COMPLETIONS, {"run_id": run_id}).scalar_one())


def close_run(
    conn: Connection,
    run_id: str,
    status: RunStatus,
    now: int,
    *,
    error_type: str | None = None,
    error_message: str | None = None,
) -> tuple[str, ...]:
    """Close an open run and cancel its active Steps; returns the canceled Step IDs."""
    canceled = cancel_steps(conn, run_id, now)
    conn.execute(
        _CLOSE_RUN,
        {
            "b_run_id": run_id,
            "b_status": status,
            "b_now": now,
            "b_error_type": error_type,
            "b_error_message": error_message,
        },
    )
    add_history(
        conn,
        run_id,
        [
            (
                HistoryEventType.FLOW_CLOSED,
                {"status": status, "errorType": error_type, "errorMessage": error_message},
            )
        ],
        now,
    )
    return canceled
