"""Row-level pieces of Channel state: pending messages, and Step executions' durable waits.

Like ``rows``, these run inside the transaction of the unit that calls them and never commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from engine._storage import tables as t
from engine._storage.journal import CONSUME, DELETE, PUBLISH, journal
from engine._storage.prepared import Prepared
from engine._storage.records import Phase, QueuedStep, StepState
from engine._storage.rows import requeue_step

_se = t.step_executions


_cm = t.channel_messages
_INSERT_MESSAGES = Prepared(insert(_cm))
_DELETE_MESSAGE = Prepared(
    delete(_cm).where(
        _cm.c.run_id == bindparam("r"),
        _cm.c.channel == bindparam("c"),
        _cm.c.instance == bindparam("i"),
        _cm.c.message_id == bindparam("m"),
    )
)
_PENDING_IDS = select(_cm.c.message_id).where(
    _cm.c.run_id == bindparam("run_id"),
    _cm.c.message_id.in_(bindparam("ids", expanding=True)),
)
_QUEUE_SIZE = Prepared(
    select(func.count())
    .select_from(_cm)
    .where(
        _cm.c.run_id == bindparam("r"),
        _cm.c.channel == bindparam("c"),
        _cm.c.instance == bindparam("i"),
    )
)
_OLDEST = Prepared(
    select(_cm.c.seq, _cm.c.message_id, _cm.c.value)
    .where(
        _cm.c.run_id == bindparam("r"),
        _cm.c.channel == bindparam("c"),
        _cm.c.instance == bindparam("i"),
    )
    .order_by(_cm.c.seq)
    .limit(bindparam("n"))
)
_DELETE_SEQS = delete(_cm).where(_cm.c.seq.in_(bindparam("seqs", expanding=True)))
_sw = t.step_waits
_INSERT_WAIT = Prepared(insert(_sw))
_DELETE_WAIT = Prepared(delete(_sw).where(_sw.c.step_id == bindparam("step_id")))
_WAIT_SPEC = Prepared(select(_sw.c.spec).where(_sw.c.step_id == bindparam("step_id")))
_SET_CONSUMED = Prepared(
    update(_sw).where(_sw.c.step_id == bindparam("b_id")).values(consumed=bindparam("b_consumed"))
)
_STEP_PHASE = Prepared(select(_se.c.state, _se.c.phase).where(_se.c.id == bindparam("step_id")))


def insert_messages(
    conn: Connection,
    run_id: str,
    messages: Iterable[tuple[str, str, str, str]],
    now: int,
    *,
    published_at: Iterable[int] | None = None,
) -> None:
    """Append messages ``(channel, instance, message ID, JSON value)`` to their queues, each
    published ``now`` (or at its ``published_at``: a travel reapplying publications)."""
    found = list(messages)
    if not found:
        return
    times = list(published_at) if published_at is not None else [now] * len(found)
    _INSERT_MESSAGES.many(
        conn,
        [
            {
                "message_id": message_id,
                "run_id": run_id,
                "channel": channel,
                "instance": instance,
                "value": value,
                "published_at": at,
            }
            for (channel, instance, message_id, value), at in zip(found, times, strict=True)
        ],
    )
    log = journal(conn)
    for (channel, instance, message_id, value), at in zip(found, times, strict=True):
        log.log(conn, run_id, PUBLISH, channel, instance, message_id=message_id, value=value, at=at)


def pending_ids(conn: Connection, run_id: str, message_ids: Iterable[str]) -> set[str]:
    """Return which of ``message_ids`` are pending messages of the run."""
    ids = list(message_ids)
    if not ids:
        return set()
    return set(conn.execute(_PENDING_IDS, {"run_id": run_id, "ids": ids}).scalars())


def delete_message(
    conn: Connection, run_id: str, channel: str, instance: str, message_id: str
) -> bool:
    """Delete a pending message; return False when it was not pending."""
    params = {"r": run_id, "c": channel, "i": instance, "m": message_id}
    if not _DELETE_MESSAGE.run(conn, params):
        return False
    journal(conn).log(conn, run_id, DELETE, channel, instance, message_id=message_id)
    return True


def queue_sizes(conn: Connection, run_id: str, queues: Iterable[tuple[str, str]]) -> dict[Any, int]:
    """Return the pending count of each queue (channel, instance)."""
    return {
        (channel, instance): _QUEUE_SIZE.scalar(conn, {"r": run_id, "c": channel, "i": instance})
        for channel, instance in queues
    }


def take_messages(
    conn: Connection, run_id: str, channel: str, instance: str, count: int
) -> list[tuple[str, str]]:
    """Remove the ``count`` oldest messages of a queue; return their (ID, JSON value)."""
    params = {"r": run_id, "c": channel, "i": instance, "n": count}
    found = _OLDEST.rows(conn, params)
    if found:
        conn.execute(_DELETE_SEQS, {"seqs": [row.seq for row in found]})
        log = journal(conn)
        for row in found:
            log.log(conn, run_id, CONSUME, channel, instance, message_id=row.message_id)
    return [(row.message_id, row.value) for row in found]


def start_wait(conn: Connection, step: QueuedStep, spec: str) -> None:
    """Record a Step execution's durable wait (replacing one a failed attempt left)."""
    _DELETE_WAIT.run(conn, {"step_id": step.id})
    _INSERT_WAIT.many(conn, [{"step_id": step.id, "run_id": step.run_id, "spec": spec}])


def waiting_spec(conn: Connection, step_id: str) -> str | None:
    """Return the wait spec of a Step execution still waiting, or None."""
    row = _STEP_PHASE.first(conn, {"step_id": step_id})
    if row is None or row.state != StepState.PENDING or row.phase != Phase.WAITING:
        return None
    row = _WAIT_SPEC.first(conn, {"step_id": step_id})
    return None if row is None else str(row.spec)


_SET_SPEC = Prepared(
    update(_sw).where(_sw.c.step_id == bindparam("b_id")).values(spec=bindparam("b_spec"))
)


def update_wait(conn: Connection, step: QueuedStep, spec: str) -> None:
    """Record what a wait has seen so far (children seen closed) in its spec."""
    _SET_SPEC.run(conn, {"b_id": step.id, "b_spec": spec})


def end_wait(conn: Connection, step: QueuedStep, consumed: str) -> None:
    """Record what a completed wait consumed and move the execution to ``execute``."""
    _SET_CONSUMED.run(conn, {"b_id": step.id, "b_consumed": consumed})
    requeue_step(conn, step)
