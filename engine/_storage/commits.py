"""Commit units: each function here returns a ``unit(conn)`` that the single writer runs inside
one transaction. Units validate what they depend on (the run is open, the Step attempt is still
current) inside that transaction, then apply their effects in the seed's order: Attribute
writes, then cancellations, then new Steps, then the run's own state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from engine._storage import tables as t
from engine._storage.indexes import apply_index_writes
from engine._storage.records import (
    COMPLETED,
    FAILED,
    PHASE_EXECUTE,
    RUNNING,
    STEP_CANCELED,
    STEP_COMPLETED,
    STEP_FAILED,
    STEP_PENDING,
    AttributeWrite,
    CommitResult,
    Effects,
    NewStep,
    StepOutcome,
)
from engine.errors import FlowAlreadyStartedError, FlowNotActiveOrNotFoundError

Unit = Callable[[Connection], Any]


class StaleAttemptError(Exception):
    """The Step attempt was canceled, retried or its run closed before it could commit."""


# -- statements built once --------------------------------------------------------------------
# Building a Core statement costs more than SQLite takes to run it, so the hot ones are built
# once with bound parameters and reused by every unit.

_se = t.step_executions
_DELETE_ATTRIBUTE = delete(t.attributes).where(
    t.attributes.c.run_id == bindparam("r"),
    t.attributes.c.instance == bindparam("i"),
    t.attributes.c.name == bindparam("n"),
)
_INSERT_HISTORY = insert(t.history)
_INSERT_STEPS = insert(_se)
_RUN_STATUS = select(t.runs.c.status).where(t.runs.c.run_id == bindparam("run_id"))
_ATTEMPT_STATE = (
    select(_se.c.state, _se.c.attempt, t.runs.c.status)
    .join(t.runs, t.runs.c.run_id == _se.c.run_id)
    .where(_se.c.id == bindparam("step_id"))
)
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
_COUNT_ACTIVE = (
    select(func.count())
    .select_from(_se)
    .where(_se.c.run_id == bindparam("run_id"), _se.c.state == STEP_PENDING)
)
_COUNT_COMPLETIONS = (
    select(func.count())
    .select_from(_se)
    .where(_se.c.run_id == bindparam("run_id"), _se.c.is_completion.is_(True))
)
_LATEST_RUN = (
    select(t.runs.c.run_id, t.runs.c.status, t.runs.c.request_id)
    .join(t.flows, t.flows.c.latest_run_id == t.runs.c.run_id)
    .where(t.flows.c.flow_id == bindparam("flow_id"))
)
_INSERT_RUN = insert(t.runs)
_INSERT_FLOW = insert(t.flows).values(
    flow_id=bindparam("b_flow_id"),
    flow_type=bindparam("b_flow_type"),
    latest_run_id=bindparam("b_run_id"),
)
_MOVE_FLOW = (
    update(t.flows)
    .where(t.flows.c.flow_id == bindparam("b_flow_id"))
    .values(latest_run_id=bindparam("b_run_id"), flow_type=bindparam("b_flow_type"))
)
_ACTIVE_STEPS = select(_se.c.id).where(
    _se.c.run_id == bindparam("run_id"), _se.c.state == STEP_PENDING
)
_ACTIVE_STEPS_OF_TYPES = _ACTIVE_STEPS.where(
    _se.c.step_type.in_(bindparam("types", expanding=True))
)
_CANCEL_STEPS = (
    update(_se)
    .where(_se.c.id.in_(bindparam("ids", expanding=True)))
    .values(state=STEP_CANCELED, closed_at=bindparam("b_now"), due_at=None)
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
_upserts: dict[str, Any] = {}


def _upsert_attributes(conn: Connection) -> Any:
    stmt = _upserts.get(conn.dialect.name)
    if stmt is None:
        insert_ = _dialect_insert(conn)(t.attributes)
        stmt = _upserts[conn.dialect.name] = insert_.on_conflict_do_update(
            index_elements=[t.attributes.c.run_id, t.attributes.c.instance, t.attributes.c.name],
            set_={
                "value": insert_.excluded.value,
                "blob": insert_.excluded.blob,
                "updated_at": insert_.excluded.updated_at,
            },
        )
    return stmt


# -- shared pieces ----------------------------------------------------------------------------


def _dialect_insert(conn: Connection) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


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


def insert_steps(conn: Connection, run_id: str, steps: Iterable[NewStep], now: int) -> None:
    """Create pending Step executions."""
    rows = [
        {
            "id": s.id,
            "run_id": run_id,
            "step_type": s.step_type,
            "input": s.input,
            "state": STEP_PENDING,
            "phase": s.phase,
            "attempt": 1,
            "due_at": s.due_at,
            "created_at": now,
        }
        for s in steps
    ]
    if rows:
        conn.execute(_INSERT_STEPS, rows)


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


def _run_status(conn: Connection, run_id: str) -> str | None:
    return conn.execute(_RUN_STATUS, {"run_id": run_id}).scalar()


def close_run(
    conn: Connection,
    run_id: str,
    status: str,
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
                "FLOW_CLOSED",
                {"status": status, "errorType": error_type, "errorMessage": error_message},
            )
        ],
        now,
    )
    return canceled


# -- units ------------------------------------------------------------------------------------


def start_run(
    *,
    flow_id: str,
    flow_type: str,
    run_id: str,
    input: str,
    request_id: str | None,
    id_reuse_policy: str,
    ignore_already_started: bool,
    timeout_at: int | None,
    writes: list[AttributeWrite],
    start_step: NewStep | None,
    now: int,
) -> Unit:
    """Create a run with its initial Attributes and start Step, honouring ID reuse."""

    def unit(conn: Connection) -> tuple[str, bool, CommitResult | None]:
        latest = conn.execute(_LATEST_RUN, {"flow_id": flow_id}).first()
        terminated: CommitResult | None = None
        if latest is not None:
            same_request = request_id is not None and latest.request_id == request_id
            if same_request and ignore_already_started:
                return latest.run_id, False, None
            if latest.status == RUNNING:
                if id_reuse_policy != "TERMINATE_IF_RUNNING":
                    raise FlowAlreadyStartedError(
                        f"Flow {flow_id} is already running (run {latest.run_id})",
                        flow_id=flow_id,
                        run_id=latest.run_id,
                    )
                canceled = close_run(
                    conn,
                    latest.run_id,
                    "TERMINATED",
                    now,
                    error_message="terminated by a new start (TERMINATE_IF_RUNNING)",
                )
                terminated = CommitResult(latest.run_id, canceled, closed_status="TERMINATED")
            elif id_reuse_policy == "REJECT_DUPLICATE" or (
                id_reuse_policy == "ALLOW_DUPLICATE_FAILED_ONLY" and latest.status == COMPLETED
            ):
                raise FlowAlreadyStartedError(
                    f"Flow ID {flow_id} was used by run {latest.run_id} ({latest.status}) and "
                    f"the ID reuse policy {id_reuse_policy} refuses a new run",
                    flow_id=flow_id,
                    run_id=latest.run_id,
                )
        # The run goes in first: flows.latest_run_id refers to it.
        conn.execute(
            _INSERT_RUN,
            {
                "run_id": run_id,
                "flow_id": flow_id,
                "flow_type": flow_type,
                "status": RUNNING,
                "input": input,
                "request_id": request_id,
                "started_at": now,
                "timeout_at": timeout_at,
                "closed_at": None,
                "error_type": None,
                "error_message": None,
            },
        )
        pointer = {"b_flow_id": flow_id, "b_flow_type": flow_type, "b_run_id": run_id}
        conn.execute(_MOVE_FLOW if latest is not None else _INSERT_FLOW, pointer)
        apply_writes(conn, run_id, writes, now)
        if start_step is not None:
            insert_steps(conn, run_id, [start_step], now)
        add_history(
            conn,
            run_id,
            [
                (
                    "FLOW_STARTED",
                    {
                        "flowType": flow_type,
                        "requestId": request_id,
                        "initialAttributes": sorted(_key(w) for w in writes),
                    },
                )
            ],
            now,
        )
        return run_id, True, terminated

    return unit


def _key(w: AttributeWrite) -> str:
    return w.name if not w.instance else f"{w.name}/{w.instance}"


def commit_rpc(*, run_id: str, rpc_name: str, effects: Effects, now: int, flow_id: str) -> Unit:
    """Commit an RPC's effects: writes, then cancellations, then its next Steps."""

    def unit(conn: Connection) -> CommitResult:
        if _run_status(conn, run_id) != RUNNING:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} is not active; RPC {rpc_name} has durable effects and needs an "
                "active run",
                flow_id=flow_id,
                operation="invokeRpc",
            )
        apply_writes(conn, run_id, effects.writes, now)
        canceled = (
            cancel_steps(
                conn,
                run_id,
                now,
                step_types=effects.cancel_step_types,
            )
            if effects.cancel_step_types
            else ()
        )
        insert_steps(conn, run_id, effects.new_steps, now)
        add_history(
            conn,
            run_id,
            [
                (
                    "RPC_COMMITTED",
                    {
                        "rpc": rpc_name,
                        "attributes": sorted({_key(w) for w in effects.writes}),
                        "canceledSteps": list(canceled),
                        "nextSteps": [s.step_type for s in effects.new_steps],
                    },
                )
            ],
            now,
        )
        return CommitResult(run_id, canceled, tuple(effects.new_steps))

    return unit


def _check_attempt(conn: Connection, run_id: str, step_id: str, attempt: int) -> None:
    row = conn.execute(_ATTEMPT_STATE, {"step_id": step_id}).first()
    if row is None or row.state != STEP_PENDING or row.attempt != attempt or row.status != RUNNING:
        raise StaleAttemptError(step_id)


def commit_step(
    *,
    run_id: str,
    step_id: str,
    step_type: str,
    attempt: int,
    outcome: StepOutcome,
    effects: Effects,
    now: int,
) -> Unit:
    """Commit a Step attempt's result: writes, cancellations, next Steps, then the run's fate."""

    def unit(conn: Connection) -> CommitResult:
        _check_attempt(conn, run_id, step_id, attempt)
        apply_writes(conn, run_id, effects.writes, now)
        canceled: tuple[str, ...] = ()
        if effects.cancel_step_types:
            canceled = cancel_steps(
                conn, run_id, now, step_types=effects.cancel_step_types, keep=[step_id]
            )
        conn.execute(
            _CLOSE_STEP,
            {
                "b_id": step_id,
                "b_state": STEP_FAILED if outcome.kind == "FAILED" else STEP_COMPLETED,
                "b_now": now,
                "b_completion": outcome.is_completion,
                "b_output": outcome.output,
                "b_error_type": outcome.error_type,
                "b_error_message": outcome.error_message,
            },
        )
        insert_steps(conn, run_id, effects.new_steps, now)
        add_history(
            conn,
            run_id,
            [
                (
                    "STEP_CLOSED",
                    {
                        "stepType": step_type,
                        "stepExecutionId": step_id,
                        "attempt": attempt,
                        "decision": outcome.kind,
                        "errorType": outcome.error_type,
                        "errorMessage": outcome.error_message,
                        "nextSteps": [s.step_type for s in effects.new_steps],
                        "canceledSteps": list(canceled),
                        "attributes": sorted({_key(w) for w in effects.writes}),
                    },
                )
            ],
            now,
        )
        closed: str | None = None
        if outcome.kind == "FORCE_COMPLETE":
            closed = COMPLETED
        elif outcome.kind in ("FORCE_FAIL", "FAILED") and not effects.new_steps:
            closed = FAILED
        elif not effects.new_steps:
            active = conn.execute(_COUNT_ACTIVE, {"run_id": run_id}).scalar_one()
            if active == 0:
                completions = conn.execute(_COUNT_COMPLETIONS, {"run_id": run_id}).scalar_one()
                if completions:
                    closed = COMPLETED
        if closed is not None:
            canceled += close_run(
                conn,
                run_id,
                closed,
                now,
                error_type=outcome.error_type if closed == FAILED else None,
                error_message=outcome.error_message if closed == FAILED else None,
            )
        return CommitResult(run_id, canceled, tuple(effects.new_steps), closed)

    return unit


def retry_step(
    *,
    run_id: str,
    step_id: str,
    attempt: int,
    due_at: int,
    error_type: str,
    error_message: str,
    now: int,
) -> Unit:
    """Record a failed attempt and schedule the next one; its writes are discarded."""

    def unit(conn: Connection) -> None:
        _check_attempt(conn, run_id, step_id, attempt)
        conn.execute(
            update(t.step_executions)
            .where(t.step_executions.c.id == step_id)
            .values(attempt=attempt + 1, due_at=due_at)
        )
        add_history(
            conn,
            run_id,
            [
                (
                    "STEP_ATTEMPT_FAILED",
                    {
                        "stepExecutionId": step_id,
                        "attempt": attempt,
                        "errorType": error_type,
                        "errorMessage": error_message,
                        "retryAt": due_at,
                    },
                )
            ],
            now,
        )

    return unit


def enter_execute_phase(
    *,
    run_id: str,
    step_id: str,
    step_type: str,
    attempt: int,
    due_at: int | None,
    writes: list[AttributeWrite],
    now: int,
) -> Unit:
    """Commit a ``wait_for`` result: its writes, and when ``execute`` may run."""

    def unit(conn: Connection) -> None:
        _check_attempt(conn, run_id, step_id, attempt)
        apply_writes(conn, run_id, writes, now)
        conn.execute(
            update(t.step_executions)
            .where(t.step_executions.c.id == step_id)
            .values(phase=PHASE_EXECUTE, due_at=due_at, attempt=1)
        )
        event = {
            "stepType": step_type,
            "stepExecutionId": step_id,
            "dueAt": due_at,
            "attributes": sorted({_key(w) for w in writes}),
        }
        add_history(conn, run_id, [("STEP_WAITING", event)], now)

    return unit


def stop_run(
    *,
    flow_id: str,
    run_id: str | None,
    status: str,
    reason: str | None,
    now: int,
    only_if_running: bool = False,
    writes: Iterable[AttributeWrite] = (),
) -> Unit:
    """Close the latest (or given) run of ``flow_id`` with ``status``, after applying
    ``writes`` (a timeout handler's) in the same transaction."""

    def unit(conn: Connection) -> CommitResult | None:
        query = select(t.runs.c.run_id, t.runs.c.status)
        if run_id is None:
            query = query.join(t.flows, t.flows.c.latest_run_id == t.runs.c.run_id).where(
                t.flows.c.flow_id == flow_id
            )
        else:
            query = query.where(t.runs.c.run_id == run_id, t.runs.c.flow_id == flow_id)
        row = conn.execute(query).first()
        if row is None or row.status != RUNNING:
            if only_if_running:
                return None
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} has no active run", flow_id=flow_id, operation="stopFlow"
            )
        apply_writes(conn, row.run_id, writes, now)
        error_type = "Stopped" if status == FAILED else None
        canceled = close_run(
            conn, row.run_id, status, now, error_type=error_type, error_message=reason
        )
        return CommitResult(row.run_id, canceled, (), status)

    return unit


def set_attributes(
    *, flow_id: str, run_id: str, writes: list[AttributeWrite], now: int, closed_erase: bool
) -> Unit:
    """Apply a client's Attribute writes to an open run, or erase hard-delete rows of a closed
    one."""

    def unit(conn: Connection) -> None:
        status = _run_status(conn, run_id)
        if status is None or (status != RUNNING and not closed_erase):
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} run {run_id} is not active",
                flow_id=flow_id,
                operation="setAttributes",
            )
        apply_writes(conn, run_id, writes, now)
        add_history(
            conn,
            run_id,
            [
                (
                    "ATTRIBUTES_SET",
                    {"attributes": sorted({_key(w) for w in writes}), "erase": closed_erase},
                )
            ],
            now,
        )

    return unit


def purge_closed_runs(*, before: int, limit: int) -> Unit:
    """Delete up to ``limit`` runs closed before ``before`` with every row they own.

    A Flow whose latest run goes is removed too; the unit returns (purged run IDs, removed
    Flow IDs) so the caller can delete the removed Flows' hard-delete values.
    """

    def unit(conn: Connection) -> tuple[list[str], list[str]]:
        runs = t.runs
        ids: list[str] = list(
            conn.execute(
                select(runs.c.run_id)
                .where(runs.c.status != RUNNING, runs.c.closed_at < before)
                .order_by(runs.c.closed_at)
                .limit(limit)
            ).scalars()
        )
        if not ids:
            return [], []
        for table in (
            t.attributes,
            t.step_executions,
            t.history,
            t.search_values,
            t.search_keywords,
            t.search_texts,
        ):
            conn.execute(delete(table).where(table.c.run_id.in_(ids)))
        gone: list[str] = list(
            conn.execute(
                select(t.flows.c.flow_id).where(t.flows.c.latest_run_id.in_(ids))
            ).scalars()
        )
        if gone:
            conn.execute(delete(t.flows).where(t.flows.c.flow_id.in_(gone)))
        conn.execute(delete(runs).where(runs.c.run_id.in_(ids)))
        return ids, gone

    return unit
