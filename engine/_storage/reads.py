"""Read queries. Each public function is one SQL statement, so what it returns comes from one
committed state (SQLite and PostgreSQL both give a statement a single snapshot).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from sqlalchemy import (
    BigInteger,
    Connection,
    and_,
    bindparam,
    cast,
    false,
    func,
    literal,
    null,
    or_,
    select,
    union_all,
)

from engine._enums import RunStatus
from engine._ids import execution_id
from engine._storage import tables as t
from engine._storage.prepared import Prepared
from engine._storage.records import (
    LoadPlan,
    Phase,
    QueuedStep,
    RunInfo,
    Snapshot,
    StepState,
    StoredChannelMessage,
    StoredValue,
)
from engine._storage.unit_statements import filter_only

T = TypeVar("T")


class Reader(Protocol):
    """What these reads need of the database: reads of the last committed state."""

    async def read(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a short read, against the last committed state."""

    async def scan(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a read that may walk many rows, against the last committed
        state."""

    async def rows(
        self, statement: Prepared, params: Mapping[str, Any], *, grouped: bool = False
    ) -> list[Any]:
        """Run ``statement``, a short read, against the last committed state; return its
        rows (``grouped``: in any order, perhaps sent with others)."""


_RUN_COLUMNS = (
    "run_id",
    "flow_id",
    "flow_type",
    "status",
    "input",
    "request_id",
    "started_at",
    "closed_at",
    "timeout_at",
    "error_type",
    "error_message",
)


_STATUS = {status.value: status for status in RunStatus}


def _run_from(row: Any) -> RunInfo:
    columns = {c: getattr(row, c) for c in _RUN_COLUMNS}
    columns["status"] = _STATUS[columns["status"]]
    return RunInfo(**columns)


def run_from_record(record: Mapping[str, Any]) -> RunInfo:
    """Return the run of a row that has the run's columns by name (an asyncpg Record)."""
    columns = {c: record[c] for c in _RUN_COLUMNS}
    columns["status"] = _STATUS[columns["status"]]
    return RunInfo(**columns)


def target_run_statement(by_run_id: bool) -> Any:
    """A subquery yielding the run to read: :run_id of :flow_id, or the Flow's latest."""
    if by_run_id:
        return (
            select(t.runs.c.run_id)
            .where(
                t.runs.c.run_id == bindparam("run_id"),
                filter_only(t.runs.c.flow_id == bindparam("flow_id")),
            )
            .scalar_subquery()
        )
    return (
        select(t.flows.c.latest_run_id)
        .where(t.flows.c.flow_id == bindparam("flow_id"))
        .scalar_subquery()
    )


@lru_cache(maxsize=2)
def _run_statement(by_run_id: bool) -> Prepared:
    return Prepared(
        select(*[t.runs.c[c] for c in _RUN_COLUMNS]).where(
            t.runs.c.run_id == target_run_statement(by_run_id)
        )
    )


async def load_run(db: Reader, flow_id: str, run_id: str | None = None) -> RunInfo | None:
    """Return the given run, or the latest run of ``flow_id``; None when there is none."""
    query = _run_statement(run_id is not None)
    params = {"flow_id": flow_id, "run_id": run_id}
    found = await db.rows(query, params)
    return _run_from(found[0]) if found else None


Completion = tuple[str, str, str | None]


async def load_result(
    db: Reader, flow_id: str, run_id: str | None = None
) -> tuple[RunInfo, list[Completion]] | None:
    """Return the given run (or the latest of ``flow_id``) with its completions so far, in
    the order they closed, in one read; None when there is no such run."""
    query = _result_statement(run_id is not None)
    params = {"flow_id": flow_id, "run_id": run_id}
    rows = await db.rows(query, params, grouped=True)
    if not rows:
        return None
    # In the order the completions closed (by ID among equals): the statement leaves the
    # order open, since sent with others its rows could come in any order anyway.
    completed = sorted((r for r in rows if r.step_id), key=lambda r: (r.completed_at, r.step_id))
    done = [(r.step_type, execution_id(r.step_id), r.output) for r in completed]
    return _run_from(rows[0]), done


@lru_cache(maxsize=2)
def _result_statement(by_run_id: bool) -> Prepared:
    se = t.step_executions
    joined = t.runs.outerjoin(
        se, and_(se.c.run_id == t.runs.c.run_id, se.c.is_completion.is_(True))
    )
    return Prepared(
        select(
            *[t.runs.c[c] for c in _RUN_COLUMNS],
            se.c.step_type,
            se.c.id.label("step_id"),
            se.c.output,
            se.c.closed_at.label("completed_at"),
        )
        .select_from(joined)
        .where(t.runs.c.run_id == target_run_statement(by_run_id))
    )


def _null_like(column: Any) -> Any:
    """A NULL of ``column``'s type."""
    return cast(null(), column.type)


# Statements are built once per shape (which names, maps, instances and queues) and reused:
# building a union of selects costs more than running it (about 0.4 ms here, against one
# read of ~0.1 ms). A test keeps this cache in place.
@lru_cache(maxsize=512)
def _snapshot_statement(by_run_id: bool, plan: LoadPlan) -> Prepared:
    target = target_run_statement(by_run_id)
    run_cols = [t.runs.c[c] for c in _RUN_COLUMNS]
    a, cm = t.attributes, t.channel_messages
    # Typed NULLs: PostgreSQL types a UNION's columns from its first SELECT, where a bare NULL
    # would be text and then clash with the integers of the later parts.
    pad = [_null_like(t.runs.c[c]).label(c) for c in _RUN_COLUMNS[1:]]
    no_message = [
        _null_like(cm.c.seq).label("seq"),
        _null_like(cm.c.message_id).label("message_id"),
        _null_like(cm.c.published_at).label("published_at"),
    ]
    no_size = cast(null(), BigInteger).label("size")
    run_part = select(
        literal("r").label("kind"),
        *run_cols,
        _null_like(a.c.name).label("name"),
        _null_like(a.c.instance).label("instance"),
        _null_like(a.c.value).label("value"),
        false().label("blob"),
        *no_message,
        no_size,
    ).where(t.runs.c.run_id == target)
    parts: list[Any] = [run_part]

    def attr_select(condition: Any) -> Any:
        return select(
            literal("a").label("kind"),
            a.c.run_id,
            *pad,
            a.c.name,
            a.c.instance,
            a.c.value,
            a.c.blob,
            *no_message,
            no_size,
        ).where(a.c.run_id == target, condition)

    names, maps, exact = plan.names, plan.whole_maps, plan.instances
    if names is None:
        parts.append(attr_select(a.c.instance == ""))
    elif names:
        parts.append(attr_select(and_(a.c.instance == "", a.c.name.in_(names))))
    if maps:
        parts.append(attr_select(and_(a.c.instance != "", a.c.name.in_(maps))))
    if exact:
        parts.append(
            attr_select(
                or_(*[and_(a.c.instance == inst, a.c.name == name) for name, inst in exact])
            )
        )
    if plan.channel_sizes:
        parts.append(
            select(
                literal("s").label("kind"),
                cm.c.run_id,
                *pad,
                cm.c.channel.label("name"),
                cm.c.instance,
                _null_like(a.c.value).label("value"),
                false().label("blob"),
                *no_message,
                cast(func.count(), BigInteger).label("size"),
            )
            .where(cm.c.run_id == target)
            .group_by(cm.c.run_id, cm.c.channel, cm.c.instance)
        )
    queues = [cm.c.channel.in_(plan.channels)] if plan.channels else []
    queues += [
        and_(cm.c.channel == name, cm.c.instance == inst) for name, inst in plan.channel_instances
    ]
    if queues:
        parts.append(
            select(
                literal("m").label("kind"),
                cm.c.run_id,
                *pad,
                cm.c.channel.label("name"),
                cm.c.instance,
                cm.c.value,
                false().label("blob"),
                cm.c.seq,
                cm.c.message_id,
                cm.c.published_at,
                no_size,
            ).where(cm.c.run_id == target, or_(*queues))
        )
    return Prepared(union_all(*parts) if len(parts) > 1 else parts[0])


async def load_snapshot(
    db: Reader, flow_id: str, run_id: str | None, plan: LoadPlan
) -> Snapshot | None:
    """Return a run with the Attribute rows and Channel state ``plan`` names, read by one
    statement (so from one committed state)."""
    query = _snapshot_statement(run_id is not None, plan)
    params = {"flow_id": flow_id, "run_id": run_id}
    rows = await db.rows(query, params, grouped=True)
    run: RunInfo | None = None
    values: dict[tuple[str, str], StoredValue] = {}
    sizes: dict[tuple[str, str], int] = {}
    found: list[Any] = []
    for row in rows:
        if row.kind == "r":
            run = _run_from(row)
        elif row.kind == "a":
            values[(row.name, row.instance)] = StoredValue(row.value, bool(row.blob))
        elif row.kind == "s":
            sizes[(row.name, row.instance)] = row.size
        else:
            found.append(row)
    if run is None:
        return None
    messages: dict[tuple[str, str], list[StoredChannelMessage]] = {}
    for row in sorted(found, key=lambda r: r.seq):
        messages.setdefault((row.name, row.instance), []).append(
            StoredChannelMessage(row.message_id, row.value, row.published_at)
        )
    return Snapshot(run, values, sizes, messages)


async def history(
    db: Reader, run_id: str, after_id: int, limit: int
) -> list[tuple[int, str, int, str]]:
    """Return up to ``limit`` events of the run after ``after_id``, oldest first."""
    h = t.history
    query = (
        select(h.c.id, h.c.event_type, h.c.at, h.c.details)
        .where(h.c.run_id == run_id, h.c.id > after_id)
        .order_by(h.c.id)
        .limit(limit)
    )
    rows = await db.scan(lambda conn: conn.execute(query).all())
    return [(r.id, r.event_type, r.at, r.details) for r in rows]


async def pending_steps(db: Reader, run_id: str) -> list[tuple[Any, ...]]:
    """Return the run's pending Step executions, oldest first: (ID, Step type, phase, attempt,
    created at, due at, the JSON of its wait or None)."""
    se, sw = t.step_executions, t.step_waits
    query = (
        select(
            se.c.id,
            se.c.step_type,
            se.c.phase,
            se.c.attempt,
            se.c.created_at,
            se.c.due_at,
            sw.c.spec,
        )
        .outerjoin(sw, sw.c.step_id == se.c.id)
        .where(se.c.run_id == run_id, se.c.state == StepState.PENDING)
        .order_by(se.c.created_at, se.c.id)
    )
    rows = await db.scan(lambda conn: conn.execute(query).all())
    return [tuple(row) for row in rows]


async def running_runs(db: Reader) -> list[RunInfo]:
    """Return every open run (for recovery)."""
    query = select(*[t.runs.c[c] for c in _RUN_COLUMNS]).where(t.runs.c.status == RunStatus.RUNNING)
    rows = await db.scan(lambda conn: conn.execute(query).all())
    return [_run_from(r) for r in rows]


async def active_steps(db: Reader) -> list[tuple[QueuedStep, dict[str, Any] | None]]:
    """Return every active Step of every open run, oldest first (for recovery), each with the
    spec of its wait when it waits on Channel conditions."""
    se, r = t.step_executions, t.runs
    query = (
        _pending_steps()
        .where(se.c.state == StepState.PENDING, r.c.status == RunStatus.RUNNING)
        .order_by(se.c.created_at, se.c.id)
    )
    rows = await db.scan(lambda conn: conn.execute(query).all())
    found: list[tuple[QueuedStep, dict[str, Any] | None]] = []
    for row in rows:
        step = _queued_step(row)
        waiting = step.phase == Phase.WAITING and row.spec is not None
        found.append((step, json.loads(row.spec) if waiting else None))
    return found


def claimed_steps(conn: Connection, fences: dict[str, int]) -> list[QueuedStep]:
    """Return the executions ``fences`` names (ID -> its claim's token), oldest first."""
    se = t.step_executions
    query = _pending_steps().where(se.c.id.in_(list(fences))).order_by(se.c.created_at, se.c.id)
    return [_queued_step(row, fences[row.id]) for row in conn.execute(query)]


def _pending_steps() -> Any:
    """SELECT what a QueuedStep of each Step execution holds, with its run and its wait."""
    se, r, sw = t.step_executions, t.runs, t.step_waits
    return (
        select(
            se.c.id,
            se.c.run_id,
            r.c.flow_id,
            r.c.flow_type,
            se.c.step_type,
            se.c.input,
            se.c.phase,
            se.c.attempt,
            se.c.due_at,
            se.c.held_locks,
            sw.c.spec,
            sw.c.consumed,
        )
        .join(r, r.c.run_id == se.c.run_id)
        .outerjoin(sw, sw.c.step_id == se.c.id)
    )


def _queued_step(row: Any, fence: int = 0) -> QueuedStep:
    return QueuedStep(
        id=row.id,
        run_id=row.run_id,
        flow_id=row.flow_id,
        flow_type=row.flow_type,
        step_type=row.step_type,
        input=row.input,
        phase=Phase(row.phase),
        attempt=row.attempt,
        due_at=row.due_at,
        consumed=row.consumed,
        fence=fence,
        held_locks=tuple(json.loads(row.held_locks)) if row.held_locks else (),
    )


async def channel_page(
    db: Reader, run_id: str, channel: str, instance: str, after_seq: int, limit: int
) -> list[tuple[int, StoredChannelMessage]]:
    """Return up to ``limit`` pending messages of a queue after ``after_seq``, oldest first."""
    cm = t.channel_messages
    query = (
        select(cm.c.seq, cm.c.message_id, cm.c.value, cm.c.published_at)
        .where(
            cm.c.run_id == run_id,
            cm.c.channel == channel,
            cm.c.instance == instance,
            cm.c.seq > after_seq,
        )
        .order_by(cm.c.seq)
        .limit(limit)
    )
    rows = await db.scan(lambda conn: conn.execute(query).all())
    return [(r.seq, StoredChannelMessage(r.message_id, r.value, r.published_at)) for r in rows]


__all__: Sequence[str] = (
    "active_steps",
    "channel_page",
    "history",
    "load_result",
    "load_run",
    "load_snapshot",
    "pending_steps",
    "running_runs",
)


async def blob_instances(db: Reader, flow_id: str, names: list[str]) -> list[tuple[str, str]]:
    """Return the (map, instance) keys of hard-delete map values any run of ``flow_id`` wrote
    (their one stored value is shared by every run of the Flow ID)."""
    a, r = t.attributes, t.runs
    query = (
        select(a.c.name, a.c.instance)
        .join(r, r.c.run_id == a.c.run_id)
        .where(r.c.flow_id == flow_id, a.c.name.in_(names), a.c.blob.is_(True), a.c.instance != "")
        .distinct()
    )
    rows = await db.scan(lambda conn: conn.execute(query).all())
    return [(row.name, row.instance) for row in rows]
