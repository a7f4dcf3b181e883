"""Row-level pieces of Channel state: the pending messages of each queue (durable waits on them
are ``durable_waits``).

Like ``rows``, these run inside the transaction of the unit that calls them and never commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select

from engine._storage import tables as t
from engine._storage.journal import CONSUME, DELETE, PUBLISH, journal
from engine._storage.prepared import Prepared

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
