"""Row-level pieces of commit units: locking a run, writing Attributes, Steps and history.

The statements they run are built once, in ``unit_statements``. None of these functions commits:
they run inside the transaction of the unit that calls them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam

from engine._enums import HistoryEventType, RunStatus
from engine._ids import step_id
from engine._storage import tables as t
from engine._storage.deferred import deferred_of
from engine._storage.indexes import apply_index_writes
from engine._storage.journal import JOURNAL, WRITE, journal
from engine._storage.prepared import Prepared
from engine._storage.records import AttributeWrite, Phase, QueuedStep, StartRequest, StepState
from engine._storage.unit_statements import (
    _ACTIVE_STEPS,
    _ACTIVE_STEPS_OF_TYPES,
    _ATTEMPT,
    _CANCEL_STEPS,
    _CLOSE_RUN,
    _CLOSE_STEP,
    _COUNT_ACTIVE_AND_COMPLETIONS,
    _DELETE_ATTRIBUTES,
    _DELETE_RUN,
    _FOR_UPDATE,
    _INSERT_RUN,
    _INSERT_STEPS,
    _LOCKING,
    _MOVE_FLOW,
    _REQUEUE_CLAIMED,
    _REQUEUE_STEP,
    _RUN_AND_ATTEMPT,
    _STATUS,
    _TAKE_RUN,
    _TAKE_RUN_AND_ATTEMPT,
    CLAIMANT,
    _claims,
    _counts,
    _upsert_attributes,
    dialect_insert,
)

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
    """Lock ``run_id`` for this transaction and return it; None when there is no such run.

    Inside a journaled unit the same statement takes the run's commit number.
    """
    log = conn.info.get(JOURNAL)
    if log is not None and not log.numbered(run_id):
        row = _TAKE_RUN.first(conn, {"b_run_id": run_id})
        if row is None:
            return None
        log.took(run_id, row.commit_seq, bool(row.change_log))
        return LockedRun(row.run_id, row.flow_id, row.flow_type, _STATUS[row.status])
    statement = _LOCKING.get(conn.dialect.name, _FOR_UPDATE)[0]
    row = statement.first(conn, {"run_id": run_id})
    if row is None:
        return None
    return LockedRun(row.run_id, row.flow_id, row.flow_type, _STATUS[row.status])


def lock_run_at_attempt(
    conn: Connection, run_id: str, step_id: str, attempt: int, fence: int
) -> LockedRun | None:
    """Lock ``run_id`` and return it when it is open and the Step execution is still pending
    at ``attempt`` under the claim ``fence``; None otherwise."""
    log = conn.info.get(JOURNAL)
    taking = log is not None and not log.numbered(run_id)
    if conn.dialect.name != "sqlite" and not taking:
        # Read without a lock, the attempt could be stale: lock the run, then read it.
        run = lock_run(conn, run_id)
        if run is None or not run.is_running:
            return None
        return run if attempt_is_current(conn, step_id, attempt, fence) else None
    statement = _TAKE_RUN_AND_ATTEMPT if taking else _RUN_AND_ATTEMPT
    row = statement.first(conn, {"run_id": run_id, "b_run_id": run_id, "step_id": step_id})
    if (
        row is None
        or row.status != RunStatus.RUNNING
        or row.state != StepState.PENDING
        or row.attempt != attempt
        or row.fence != fence
    ):
        return None  # the unit fails (stale attempt): its number goes with its rollback
    if taking:
        assert log is not None
        log.took(run_id, row.commit_seq, bool(row.change_log))
    return LockedRun(row.run_id, row.flow_id, row.flow_type, RunStatus.RUNNING)


def lock_latest_run(conn: Connection, flow_id: str) -> LatestRun | None:
    """Lock the Flow ID's row and its latest run; None when the Flow ID is unused."""
    statement = _LOCKING.get(conn.dialect.name, _FOR_UPDATE)[1]
    row = statement.first(conn, {"flow_id": flow_id})
    if row is None:
        return None
    _known(conn, row)
    return LatestRun(row.run_id, row.flow_id, row.flow_type, _STATUS[row.status], row.request_id)


def _known(conn: Connection, row: Any) -> None:
    """Tell the unit's journal whether a run locked without taking its number keeps a
    change log: one that keeps none takes no commit numbers (nothing would read them)."""
    found = conn.info.get(JOURNAL)
    if found is not None:
        found.known(row.run_id, bool(row.change_log))


def attempt_is_current(conn: Connection, step_id: str, attempt: int, fence: int = 0) -> bool:
    """Return True when the Step execution is still pending at ``attempt`` under the claim
    ``fence`` (lock its run first): a superseded claim's attempt may no longer commit."""
    row = _ATTEMPT.first(conn, {"step_id": step_id})
    return (
        row is not None
        and row.state == StepState.PENDING
        and row.attempt == attempt
        and row.fence == fence
    )


def insert_run(conn: Connection, request: StartRequest, now: int, commit: int = 1) -> None:
    """Insert the run row of a start: the start is its first commit (a traveled run's is the
    travel's, after the commits it copied)."""
    journal(conn).took(request.run_id, commit, request.change_log)
    _INSERT_RUN.many(
        conn,
        [
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
                "commit_seq": commit,
                "change_log": request.change_log,
                "schedule_id": request.schedule_id,
            }
        ],
    )


def delete_run(conn: Connection, run_id: str) -> None:
    """Delete a run row that nothing refers to yet (a start that lost a race)."""
    _DELETE_RUN.run(conn, {"run_id": run_id})


def claim_flow_id(conn: Connection, request: StartRequest) -> bool:
    """Create the Flow ID's row pointing at the new run; False when another start made it."""
    stmt = _claims.get(conn.dialect.name)
    if stmt is None:
        stmt = _claims[conn.dialect.name] = Prepared(
            dialect_insert(conn)(t.flows)
            .values(
                flow_id=bindparam("b_flow_id"),
                flow_type=bindparam("b_flow_type"),
                latest_run_id=bindparam("b_run_id"),
            )
            .on_conflict_do_nothing(index_elements=[t.flows.c.flow_id])
        )
    return bool(stmt.run(conn, _pointer(request)))


def point_flow_at(conn: Connection, request: StartRequest) -> None:
    """Make the new run the Flow ID's latest."""
    _MOVE_FLOW.run(conn, _pointer(request))


def _pointer(request: StartRequest) -> dict[str, str]:
    return {
        "b_flow_id": request.flow_id,
        "b_flow_type": request.flow_type,
        "b_run_id": request.run_id,
    }


# -- Attributes and history ---------------------------------------------------------------------


def last_writes(writes: Iterable[AttributeWrite]) -> list[AttributeWrite]:
    """Return the last write to each key, in the order the keys were first written."""
    latest: dict[tuple[str, str], AttributeWrite] = {}
    for w in writes:
        latest[(w.name, w.instance)] = w
    return list(latest.values())


def apply_writes(conn: Connection, run_id: str, writes: Iterable[AttributeWrite], now: int) -> None:
    """Upsert or delete Attribute rows (and their index rows); the last write to a key wins."""
    writes = list(writes)
    latest = last_writes(writes)
    upserts = [
        {
            "run_id": run_id,
            "name": w.name,
            "instance": w.instance,
            "value": w.value,
            "blob": w.blob,
            "updated_at": now,
        }
        for w in latest
        if w.value is not None or w.blob
    ]
    deletes = [
        {"r": run_id, "n": w.name, "i": w.instance}
        for w in latest
        if w.value is None and not w.blob
    ]
    if upserts:
        _upsert_attributes(conn).many(conn, upserts)
    if deletes:
        _DELETE_ATTRIBUTES.many(conn, deletes)
    if latest:
        log = journal(conn)
        for w in latest:
            # Hard-delete values are one per Flow ID and never restored: not logged.
            if not w.hard_delete:
                log.log(conn, run_id, WRITE, w.name, w.instance, value=w.value)
    # Index rows commit in this same transaction, so search reads its own writes.
    apply_index_writes(conn, run_id, writes)


def add_history(
    conn: Connection, run_id: str, events: Iterable[tuple[str, dict[str, Any]]], now: int
) -> None:
    """Append events to the run's history (written when the unit ends, under its commit)."""
    if events:
        journal(conn).history(conn, run_id, events, now)


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
    if not steps:
        return
    _number(conn, [s for s in steps if not s.id or s.numbered])
    log = journal(conn)
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
            "is_completion": False,
            "created_commit": (commit := log.number(conn, s.run_id)),
            # An execution without a wait_for is in its execute phase from the start.
            "execute_commit": commit if s.phase == Phase.EXECUTE else None,
        }
        for s in steps
    ]
    claimant = conn.info.get(CLAIMANT)
    if claimant is not None:
        for row, step in zip(rows, steps, strict=True):
            row["claimed_by"], row["fence"] = claimant, 1
            step.fence = 1
    if rows:
        _INSERT_STEPS.many(conn, rows)


def _number(conn: Connection, steps: list[QueuedStep]) -> None:
    """Give new executions their IDs: the run's counter of their Step type, counted on."""
    by_type: dict[tuple[str, str], list[QueuedStep]] = {}
    for step in steps:
        by_type.setdefault((step.run_id, step.step_type), []).append(step)
    for (run_id, step_type), group in by_type.items():
        last = _count_statement(conn).scalar(conn, {"r": run_id, "t": step_type, "k": len(group)})
        for n, step in enumerate(group, start=last - len(group) + 1):
            step.id = step_id(run_id, step_type, n)
            step.numbered = True


def _count_statement(conn: Connection) -> Any:
    stmt = _counts.get(conn.dialect.name)
    if stmt is None:
        sc = t.step_counters
        insert_ = dialect_insert(conn)(sc).values(
            run_id=bindparam("r"), step_type=bindparam("t"), count=bindparam("k")
        )
        stmt = _counts[conn.dialect.name] = Prepared(
            insert_.on_conflict_do_update(
                index_elements=[sc.c.run_id, sc.c.step_type],
                set_={"count": sc.c.count + insert_.excluded.count},
            ).returning(sc.c.count)
        )
    return stmt


def requeue_step(conn: Connection, step: QueuedStep) -> None:
    """Record a pending execution's next attempt: its phase, attempt number and due time
    (on a PostgreSQL database also this process's claim on it, whose token ``step`` takes)."""
    # Only a retry keeps locks while it waits: its keys go with it (a new phase holds none).
    held = json.dumps(list(step.held_locks)) if step.attempt > 1 and step.held_locks else None
    params = {
        "b_id": step.id,
        "b_phase": step.phase,
        "b_attempt": step.attempt,
        "b_due": step.due_at,
        "b_held": held,
        "b_execute": (
            journal(conn).number(conn, step.run_id) if step.phase == Phase.EXECUTE else None
        ),
    }
    claimant = conn.info.get(CLAIMANT)
    if claimant is None:
        _REQUEUE_STEP.run(conn, params)
        return
    step.fence = _REQUEUE_CLAIMED.scalar(conn, {**params, "b_claimant": claimant})


def close_step(
    conn: Connection,
    run_id: str,
    step_id: str,
    state: StepState,
    now: int,
    *,
    phase: Phase,
    is_completion: bool,
    output: str | None,
    error_type: str | None,
    error_message: str | None,
    read_again: bool = True,
) -> None:
    """Close a Step execution with its outcome, decided in ``phase``; with its unit's last
    writes (see ``deferred``) unless the unit reads the execution again (``read_again``)."""
    commit = journal(conn).number(conn, run_id)
    deferred = None if read_again else deferred_of(conn)
    if deferred is not None:
        deferred.closes.append(
            {
                "id": step_id,
                "state": state.value,
                "phase": phase.value,
                "closed_at": now,
                "closed_commit": commit,
                "is_completion": is_completion,
                "output": output,
                "error_type": error_type,
                "error_message": error_message,
            }
        )
        return
    _CLOSE_STEP.run(
        conn,
        {
            "b_id": step_id,
            "b_state": state,
            "b_now": now,
            "b_phase": phase,
            "b_commit": commit,
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
    found: list[str]
    if step_types is None:
        found = [row[0] for row in _ACTIVE_STEPS.rows(conn, {"run_id": run_id})]
    else:
        types = list(step_types)
        if not types:
            return ()
        params = {"run_id": run_id, "types": types}
        found = list(conn.execute(_ACTIVE_STEPS_OF_TYPES, params).scalars())
    keep_ids = set(keep)
    ids = tuple(step_id for step_id in found if step_id not in keep_ids)
    if ids:
        commit = journal(conn).number(conn, run_id)
        conn.execute(_CANCEL_STEPS, {"ids": list(ids), "b_now": now, "b_commit": commit})
    return ids


def run_is_done(conn: Connection, run_id: str) -> bool:
    """Return True when no Step is active and at least one completion was recorded."""
    active, completions = _COUNT_ACTIVE_AND_COMPLETIONS.first(conn, {"run_id": run_id})
    return not active and bool(completions)


def close_run(
    conn: Connection,
    run_id: str,
    status: RunStatus,
    now: int,
    *,
    error_type: str | None = None,
    error_message: str | None = None,
    reason: str | None = None,
) -> tuple[str, ...]:
    """Close an open run and cancel its active Steps; returns the canceled Step IDs.

    ``reason`` says in the FLOW_CLOSED event why the engine itself closed it (a time travel).
    """
    canceled = cancel_steps(conn, run_id, now)
    _CLOSE_RUN.run(
        conn,
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
                {"status": status, "errorType": error_type, "errorMessage": error_message}
                | ({"reason": reason} if reason else {}),
            )
        ],
        now,
    )
    return canceled
