"""A run's state as it was right after one of its commits, read from its change log.

Commits are numbered per run (``journal``). The Attribute values after commit ``c`` are each
key's last logged write at or before ``c``; the pending Channel messages are those published
by then and neither consumed nor deleted by then; the pending Step executions are those created
by then and not closed by then, each in the phase it had then. These reads serve time travel
(inside its unit, under the run's lock) and as-of reads of Attributes (on their own: a past
commit never changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select

from engine._storage import tables as t
from engine._storage.journal import CONSUME, DELETE, PUBLISH, WRITE
from engine._storage.prepared import Prepared
from engine._storage.records import Phase
from engine.errors import FailedPreconditionError, InvalidArgumentError

_h, _log, _se, _sw = t.history, t.change_log, t.step_executions, t.step_waits


@dataclass(frozen=True)
class PastValue:
    """An Attribute value after a commit, with the position of the write that set it."""

    name: str
    instance: str
    value: str
    commit_seq: int
    pos: int


@dataclass(frozen=True)
class PastMessage:
    """A Channel message pending after a commit."""

    channel: str
    instance: str
    message_id: str
    value: str
    published_at: int


@dataclass(frozen=True)
class PastStep:
    """A Step execution as it was after a commit: closed by then (``closed``) or pending in
    ``phase`` (an execute phase keeps what its wait consumed)."""

    row: Any
    closed: bool
    phase: Phase
    consumed: str | None
    spec: str | None


# -- which commit a point names ------------------------------------------------------------------

_EVENT_COMMIT = Prepared(
    select(_h.c.commit_seq)
    .where(_h.c.run_id == bindparam("r"))
    .order_by(_h.c.id)
    .limit(1)
    .offset(bindparam("skip"))
)
_FIRST_COMMIT = Prepared(
    select(func.min(_h.c.commit_seq), func.min(_h.c.at)).where(_h.c.run_id == bindparam("r"))
)
_COMMIT_AT = Prepared(
    select(func.max(_h.c.commit_seq)).where(
        _h.c.run_id == bindparam("r"), _h.c.at <= bindparam("t")
    )
)
_FIRST_OF_TYPE = Prepared(
    select(func.min(_se.c.created_commit)).where(
        _se.c.run_id == bindparam("r"), _se.c.step_type == bindparam("type")
    )
)
_EXECUTION = Prepared(
    select(_se.c.created_commit, _se.c.execute_commit, _se.c.phase).where(
        _se.c.id == bindparam("id")
    )
)


def event_commit(conn: Connection, run_id: str, event_id: int, field: str) -> int:
    """Return the commit that wrote event ``event_id`` (numbered from 1) of the run."""
    if event_id >= 1:
        row = _EVENT_COMMIT.first(conn, {"r": run_id, "skip": event_id - 1})
        if row is not None and row[0] is not None:
            return int(row[0])
    raise InvalidArgumentError(f"{field}: run {run_id} has no event {event_id}", field=field)


def first_commit(conn: Connection, run_id: str) -> int:
    """Return the run's first commit (its start; a traveled run's is the original start)."""
    row = _FIRST_COMMIT.first(conn, {"r": run_id})
    return int(row[0]) if row is not None and row[0] is not None else 1


def commit_at(
    conn: Connection, run_id: str, at: int, until: int, field: str, shown: datetime
) -> int:
    """Return the run's last commit at or before ``at`` (µs); ``until`` ends the run's span
    (its close, or now)."""
    row = _FIRST_COMMIT.first(conn, {"r": run_id})
    began = None if row is None else row[1]
    if began is None or at < began or at > until:
        raise InvalidArgumentError(
            f"{field}: {shown.isoformat()} is outside run {run_id}, which spans from its start "
            "to its close (or now)",
            field=field,
        )
    found = _COMMIT_AT.first(conn, {"r": run_id, "t": at})
    return int(found[0])


def step_type_commit(conn: Connection, run_id: str, step_type: str, field: str) -> int:
    """Return the commit that queued the first execution of ``step_type`` in the run."""
    row = _FIRST_OF_TYPE.first(conn, {"r": run_id, "type": step_type})
    if row is None or row[0] is None:
        raise InvalidArgumentError(
            f"{field}: Step type {step_type} never executed in run {run_id}", field=field
        )
    return int(row[0])


def execution_commit(
    conn: Connection, run_id: str, execution: str, execute: bool, fields: tuple[str, str]
) -> tuple[int, bool]:
    """Return the commit that queued execution ``execution`` (before its wait_for), or with
    ``execute`` the one that moved it to its execute phase.

    The second value is True when that execution must be restored in its execute phase
    although the commit left it before: a wait_for that neither wrote nor waited moves to
    execute without a commit, so its point is the commit that created it.
    """
    id_field, method_field = fields
    row = _EXECUTION.first(conn, {"id": f"{run_id}:{execution}"})
    if row is None or row.created_commit is None:
        raise InvalidArgumentError(
            f"{id_field}: run {run_id} has no Step execution {execution}", field=id_field
        )
    if not execute:
        return int(row.created_commit), False
    if row.execute_commit is not None:
        return int(row.execute_commit), False
    if row.phase == Phase.EXECUTE:
        return int(row.created_commit), True
    raise InvalidArgumentError(
        f"{method_field}: Step execution {execution} of run {run_id} never reached its execute "
        "phase",
        field=method_field,
    )


# -- the state after a commit -------------------------------------------------------------------


def values_at(
    conn: Connection,
    run_id: str,
    commit: int,
    keys: list[tuple[str, str]] | None = None,
    *,
    singletons: bool = False,
) -> list[PastValue]:
    """Return the Attribute values set right after ``commit``, in the order they were written.

    ``keys`` limits the read to those (name, instance) keys, ``singletons`` to instance "".
    Names are unique per Flow across Attributes and Channels, so a key's last log row is an
    Attribute write exactly when the key names an Attribute.
    """
    conditions = [_log.c.run_id == run_id, _log.c.commit_seq <= commit]
    if singletons:
        conditions.append(_log.c.instance == "")
    if keys is not None:
        if not keys:
            return []
        conditions.append(
            or_(*[and_(_log.c.name == name, _log.c.instance == inst) for name, inst in keys])
        )
    latest = (
        select(_log.c.name, _log.c.instance, func.max(_log.c.commit_seq).label("last"))
        .where(*conditions)
        .group_by(_log.c.name, _log.c.instance)
        .subquery()
    )
    query = (
        select(_log.c.name, _log.c.instance, _log.c.value, _log.c.commit_seq, _log.c.pos)
        .join(
            latest,
            and_(
                _log.c.name == latest.c.name,
                _log.c.instance == latest.c.instance,
                _log.c.commit_seq == latest.c.last,
            ),
        )
        .where(_log.c.run_id == run_id, _log.c.kind == WRITE, _log.c.value.is_not(None))
        .order_by(_log.c.commit_seq, _log.c.pos)
    )
    return [PastValue(*row) for row in conn.execute(query)]


def messages_at(conn: Connection, run_id: str, commit: int) -> list[PastMessage]:
    """Return the Channel messages pending right after ``commit``, in publication order."""
    query = (
        select(
            _log.c.kind,
            _log.c.name,
            _log.c.instance,
            _log.c.message_id,
            _log.c.value,
            _log.c.at,
        )
        .where(
            _log.c.run_id == run_id,
            _log.c.commit_seq <= commit,
            _log.c.kind.in_([PUBLISH, DELETE, CONSUME]),
        )
        .order_by(_log.c.commit_seq, _log.c.pos)
    )
    pending: dict[str, PastMessage] = {}
    for row in conn.execute(query):
        if row.kind == PUBLISH:
            pending[row.message_id] = PastMessage(
                row.name, row.instance, row.message_id, row.value, row.at
            )
        else:
            pending.pop(row.message_id, None)
    return list(pending.values())


def steps_at(conn: Connection, run_id: str, commit: int) -> list[PastStep]:
    """Return the run's Step executions created by ``commit``, as they were right after it."""
    query = (
        select(_se, _sw.c.spec, _sw.c.consumed)
        .outerjoin(_sw, _sw.c.step_id == _se.c.id)
        .where(_se.c.run_id == run_id, _se.c.created_commit <= commit)
        .order_by(_se.c.created_commit, _se.c.created_at, _se.c.id)
    )
    found: list[PastStep] = []
    for row in conn.execute(query):
        closed = row.closed_commit is not None and row.closed_commit <= commit
        executing = row.execute_commit is not None and row.execute_commit <= commit
        found.append(
            PastStep(
                row=row,
                closed=closed,
                # A wait that had begun by then is entered again from its wait_for.
                phase=Phase.EXECUTE if executing else Phase.WAIT_FOR,
                consumed=row.consumed if executing else None,
                spec=row.spec,
            )
        )
    return found


# -- as-of reads ----------------------------------------------------------------------------------

_AS_OF_RUN = select(t.runs.c.run_id, t.runs.c.flow_type, t.runs.c.change_log)


@dataclass(frozen=True)
class AsOf:
    """What an as-of read found: the run, its Flow type, and the values then."""

    run_id: str
    flow_type: str
    values: list[PastValue]


def as_of(
    conn: Connection,
    flow_id: str,
    run_id: str | None,
    event_id: int,
    keys: list[tuple[str, str]] | None,
) -> AsOf | None:
    """Return the Attribute values right after the commit that wrote event ``event_id`` of
    the run (the Flow's latest when ``run_id`` is None): ``keys``, or every singleton.

    None when there is no such run; FailedPreconditionError when it keeps no change log.
    """
    runs = t.runs
    if run_id is None:
        latest = select(t.flows.c.latest_run_id).where(t.flows.c.flow_id == flow_id)
        query = _AS_OF_RUN.where(runs.c.run_id == latest.scalar_subquery())
    else:
        query = _AS_OF_RUN.where(runs.c.run_id == run_id, runs.c.flow_id == flow_id)
    run = conn.execute(query).first()
    if run is None:
        return None
    if not run.change_log:
        raise FailedPreconditionError(
            f"run {run.run_id} of Flow {flow_id} keeps no change log (its Flow type "
            f"{run.flow_type} opts out, or the run began before the log existed): its past "
            "values cannot be read",
            flow_id=flow_id,
        )
    commit = event_commit(conn, run.run_id, event_id, "asOfEventId")
    values = values_at(conn, run.run_id, commit, keys, singletons=keys is None)
    return AsOf(run.run_id, run.flow_type, values)
