"""The hot statements of commit units, built once with bound parameters.

Building a Core statement costs more than SQLite takes to run it, so every unit reuses these.
Most are :class:`~engine._storage.prepared.Prepared`, so on SQLite they also skip SQLAlchemy's
per-execution work. The dialect-specific ones (ON CONFLICT, FOR UPDATE) are made on first use.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    true,
    update,
)

from engine._enums import RunStatus
from engine._storage import tables as t
from engine._storage.prepared import Prepared
from engine._storage.records import StepState

_se = t.step_executions


def filter_only(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """``condition`` as a test of the row a primary key found, never a way to find it.

    A run looked up by its ID and tested for its status (a Step execution by its ID and
    state, a run by its ID and Flow ID) could be found through an index that leads with the
    tested column: PostgreSQL's generic plans, made once while a table is small, pick such an
    index as readily as the primary key, and then scan every running run for the one wanted.
    ``(condition) IS true`` is the same test where the row is known, but no index serves it.
    """
    return condition.is_(true())


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
        t.runs.c.change_log,
    )
    .join(t.flows, t.flows.c.latest_run_id == t.runs.c.run_id)
    .where(t.flows.c.flow_id == bindparam("flow_id"))
)
# FOR UPDATE serializes units on one run across connections (PostgreSQL). SQLite has no row
# locks (its single writer is serial already), so it gets the plain read, which is cheaper
# even though SQLAlchemy would render FOR UPDATE there as nothing.
_LOCKING = {"sqlite": (Prepared(_READ_RUN), Prepared(_READ_LATEST_RUN))}
_FOR_UPDATE = (Prepared(_READ_RUN.with_for_update()), Prepared(_READ_LATEST_RUN.with_for_update()))
_STATUS = {status.value: status for status in RunStatus}
_ATTEMPT = Prepared(
    select(_se.c.state, _se.c.attempt, _se.c.fence).where(_se.c.id == bindparam("step_id"))
)
# SQLite only: the run and the attempt in one statement. Its single writer runs one unit at a
# time, so nothing can change the Step row between the two reads. PostgreSQL reads the attempt
# after the run's lock is granted: a joined row read before the wait could be stale.
_RUN_AND_ATTEMPT = Prepared(
    select(
        t.runs.c.run_id,
        t.runs.c.flow_id,
        t.runs.c.flow_type,
        t.runs.c.status,
        _se.c.state,
        _se.c.attempt,
        _se.c.fence,
    )
    .select_from(t.runs)
    .outerjoin(_se, _se.c.id == bindparam("step_id"))
    .where(t.runs.c.run_id == bindparam("run_id"))
)
# A unit that locks a run takes the run's next commit number in the same statement (see
# ``journal``): an UPDATE locks the row as FOR UPDATE did (PostgreSQL) and returns it as the
# SELECT did, so numbering commits costs no statement of its own. A run that keeps no change
# log takes none.
_NEXT_COMMIT = t.runs.c.commit_seq + case((t.runs.c.change_log.is_(True), 1), else_=0)
_TAKE = (
    update(t.runs).where(t.runs.c.run_id == bindparam("b_run_id")).values(commit_seq=_NEXT_COMMIT)
)
_TAKEN = tuple(
    t.runs.c[name]
    for name in ("run_id", "flow_id", "flow_type", "status", "change_log", "commit_seq")
)
_TAKE_RUN = Prepared(_TAKE.returning(*_TAKEN))


def _of_step(column: Any) -> Any:
    # FOR UPDATE (PostgreSQL; SQLite renders none): the subquery runs once the UPDATE holds
    # the run's row, and locking reads the execution's latest committed version, not the
    # statement's snapshot, which predates the wait for the run's lock.
    return (
        select(column).where(_se.c.id == bindparam("step_id")).with_for_update().scalar_subquery()
    )


# A Step's commit: the run, its number and the attempt in one statement, as _RUN_AND_ATTEMPT
# reads them.
_TAKE_RUN_AND_ATTEMPT = Prepared(
    _TAKE.returning(
        *_TAKEN,
        _of_step(_se.c.state).label("state"),
        _of_step(_se.c.attempt).label("attempt"),
        _of_step(_se.c.fence).label("fence"),
    )
)
#: ``conn.info`` key: the ID of the process whose commits claim the Steps they queue (set on
#: the connections of a PostgreSQL database; absent on SQLite, whose Steps are never claimed).
CLAIMANT = "dexlite.claimant"
_DELETE_ATTRIBUTE = delete(t.attributes).where(
    t.attributes.c.run_id == bindparam("r"),
    t.attributes.c.instance == bindparam("i"),
    t.attributes.c.name == bindparam("n"),
)
_DELETE_ATTRIBUTES = Prepared(_DELETE_ATTRIBUTE)
_INSERT_STEPS = Prepared(insert(_se))
_CLOSE_STEP = Prepared(
    update(_se)
    .where(_se.c.id == bindparam("b_id"))
    .values(
        state=bindparam("b_state"),
        phase=bindparam("b_phase"),
        closed_at=bindparam("b_now"),
        closed_commit=bindparam("b_commit"),
        due_at=None,
        is_completion=bindparam("b_completion"),
        output=bindparam("b_output"),
        error_type=bindparam("b_error_type"),
        error_message=bindparam("b_error_message"),
    )
)
_REQUEUE = (
    update(_se)
    .where(_se.c.id == bindparam("b_id"))
    .values(
        phase=bindparam("b_phase"),
        attempt=bindparam("b_attempt"),
        due_at=bindparam("b_due"),
        held_locks=bindparam("b_held"),
        # The commit that first queues its execute phase (a retry keeps the first one);
        # ``b_execute`` is NULL when the execution is not in its execute phase.
        execute_commit=func.coalesce(
            _se.c.execute_commit, bindparam("b_execute", type_=BigInteger)
        ),
    )
)
_REQUEUE_STEP = Prepared(_REQUEUE)
# On a PostgreSQL database the committing process claims the attempt it queues, with a new token.
_REQUEUE_CLAIMED = Prepared(
    _REQUEUE.values(claimed_by=bindparam("b_claimant"), fence=_se.c.fence + 1).returning(
        _se.c.fence
    )
)
# Both counts of run_is_done in one statement (the run is locked: its Steps cannot change).
_COUNT_ACTIVE_AND_COMPLETIONS = Prepared(
    select(
        func.count(case((_se.c.state == StepState.PENDING, 1))),
        func.count(case((_se.c.is_completion.is_(True), 1))),
    )
    .select_from(_se)
    .where(_se.c.run_id == bindparam("run_id"))
)
_ACTIVE = select(_se.c.id).where(
    _se.c.run_id == bindparam("run_id"), _se.c.state == StepState.PENDING
)
_ACTIVE_STEPS = Prepared(_ACTIVE)
_ACTIVE_STEPS_OF_TYPES = _ACTIVE.where(_se.c.step_type.in_(bindparam("types", expanding=True)))
_CANCEL_STEPS = (
    update(_se)
    .where(_se.c.id.in_(bindparam("ids", expanding=True)))
    .values(
        state=StepState.CANCELED,
        closed_at=bindparam("b_now"),
        closed_commit=bindparam("b_commit"),
        due_at=None,
    )
)
_CLOSE_RUN = Prepared(
    update(t.runs)
    .where(t.runs.c.run_id == bindparam("b_run_id"))
    .values(
        status=bindparam("b_status"),
        closed_at=bindparam("b_now"),
        error_type=bindparam("b_error_type"),
        error_message=bindparam("b_error_message"),
    )
)
_INSERT_RUN = Prepared(insert(t.runs))
_DELETE_RUN = Prepared(delete(t.runs).where(t.runs.c.run_id == bindparam("run_id")))
_MOVE_FLOW = Prepared(
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
        stmt = _upserts[conn.dialect.name] = Prepared(
            insert_.on_conflict_do_update(
                index_elements=[
                    t.attributes.c.run_id,
                    t.attributes.c.instance,
                    t.attributes.c.name,
                ],
                set_={
                    "value": insert_.excluded.value,
                    "blob": insert_.excluded.blob,
                    "updated_at": insert_.excluded.updated_at,
                },
            )
        )
    return stmt
