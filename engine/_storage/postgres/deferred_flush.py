"""The end of a commit unit on PostgreSQL: what it writes last, sent as one statement.

A unit's last writes need no answer before the unit ends: its history events and change-log
rows (the journal), the close of a Step execution nothing in the unit reads again (see
``deferred``), and the release of an RPC's Attribute locks (whose count, the fence, is
checked after). On PostgreSQL every statement is a round trip to the server and about a tenth
of a millisecond of this process's CPU: here they are gathered while the unit runs and written
by one statement of fixed text (prepared once per connection), rows passed as arrays, just
before the transaction commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection

from engine._storage import sqlalchemy_internals as internals
from engine._storage.deferred import DEFERRED, Deferred

T = TypeVar("T")


#: Writes the gathered rows and drops an RPC's lock rows (the count it dropped, or -1 when a
#: Step waits on the Flow: see ``functions/dexlite_drop_rpc_locks.sql``), in one statement.
#: Rows keep their order: history IDs are assigned in it.
FLUSH = """
WITH h AS (
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    SELECT r, e, a, d, s
    FROM unnest($1::varchar[], $2::varchar[], $3::int8[], $4::text[], $5::int8[])
        WITH ORDINALITY AS u(r, e, a, d, s, n)
    ORDER BY n
), c AS (
    INSERT INTO change_log
        (run_id, commit_seq, pos, kind, name, instance, message_id, value, at, external)
    SELECT * FROM unnest(
        $6::varchar[], $7::int8[], $8::int4[], $9::varchar[], $10::varchar[],
        $11::varchar[], $12::varchar[], $13::text[], $14::int8[], $15::bool[])
), s AS (
    UPDATE step_executions AS se
    SET state = v.state, phase = v.phase, closed_at = v.at, closed_commit = v.cm,
        due_at = NULL, is_completion = v.done, output = v.out, error_type = v.et,
        error_message = v.em
    FROM unnest(
        $18::varchar[], $19::varchar[], $20::varchar[], $21::int8[], $22::int8[],
        $23::bool[], $24::text[], $25::varchar[], $26::text[])
        AS v(id, state, phase, at, cm, done, out, et, em)
    WHERE se.id = v.id
)
SELECT CASE WHEN $16::text IS NULL THEN NULL ELSE dexlite_drop_rpc_locks($16, $17) END
"""

_CLOSE = (
    "id",
    "state",
    "phase",
    "closed_at",
    "closed_commit",
    "is_completion",
    "output",
    "error_type",
    "error_message",
)
_HISTORY = ("run_id", "event_type", "at", "details", "commit_seq")
_LOG = (
    "run_id",
    "commit_seq",
    "pos",
    "kind",
    "name",
    "instance",
    "message_id",
    "value",
    "at",
    "external",
)


class DeferredFlush(Deferred):
    """The last writes of one unit, sent together by :meth:`flush`."""

    __slots__ = ("_after", "_drop")

    def __init__(self) -> None:
        super().__init__()
        self._drop: tuple[str, str] | None = None
        self._after: Callable[[Connection, int], None] | None = None

    def drop_rpc_locks(
        self, flow_id: str, owner: str, then: Callable[[Connection, int], None]
    ) -> None:
        """Drop ``owner``'s lock rows of ``flow_id`` unless a Step waits on the Flow, then call
        ``then(conn, dropped)`` in the same transaction (-1: nothing was done)."""
        assert self._drop is None, "one RPC's locks per unit"
        self._drop = (flow_id, owner)
        self._after = then

    def flush(self, conn: Connection) -> None:
        """Send everything gathered as one statement (none when nothing was)."""
        if not (self.history or self.log or self._drop or self.closes):
            return
        history = [[row[key] for row in self.history] for key in _HISTORY]
        log = [[row[key] for row in self.log] for key in _LOG]
        flow_id, owner = self._drop or (None, None)
        closes = [[row[key] for row in self.closes] for key in _CLOSE]
        params = (*history, *log, flow_id, owner, *closes)
        if internals.on_asyncpg(conn):
            row = internals.fetch(conn, FLUSH, params)[0]
        else:
            row = conn.exec_driver_sql(FLUSH, params).one()
        if self._after is not None:
            self._after(conn, int(row[0]))


def deferred_flush_of(conn: Connection) -> DeferredFlush | None:
    """Return the tail of the unit running on ``conn``, or None when it has none."""
    found = conn.info.get(DEFERRED)
    return found if isinstance(found, DeferredFlush) else None


def with_deferred_flush(conn: Connection, unit: Callable[[Connection], T]) -> T:
    """Run ``unit`` on ``conn`` gathering its last writes, then send them, before it commits."""
    info = conn.info  # held: a lost connection's info raises (see journal.journaled)
    tail = info[DEFERRED] = DeferredFlush()
    try:
        result = unit(conn)
        tail.flush(conn)
        return result
    finally:
        info.pop(DEFERRED, None)
