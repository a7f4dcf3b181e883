"""Index rows: what makes an indexed Attribute searchable.

:func:`index_write` turns a staged value into an :class:`IndexWrite` (typed for comparison) before
the commit; :func:`apply_index_writes` runs inside the writer's transaction, from
``commits.apply_writes``, so index rows commit with the Attribute write they describe and a
SearchFlows call made after the write returns sees it.

One search value per run and key: an indexed AttributeMap's instances all write the same key,
so each instance write (or deletion) replaces the key's value; a KEYWORD_ARRAY is the list of
one write, never a union over instances.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select

from engine._enums import IndexType
from engine._storage import tables as t
from engine._storage.prepared import Prepared
from engine._storage.records import AttributeWrite, IndexWrite
from engine._storage.search import fulltext
from engine._storage.search.compiler import parse_datetime
from engine._storage.unit_statements import dialect_insert
from engine.errors import InvalidArgumentError

MAX_KEYWORD_LENGTH = 2048
MAX_TEXT_LENGTH = 65_536
_INT64 = (-(2**63), 2**63 - 1)
# PostgreSQL text cannot hold U+0000; refused on every database so that a value indexes (and
# searches) the same everywhere. A FULL_TEXT value may hold it: it separates tokens.
_NUL = "contains the NUL character (U+0000)"


def index_write(key: str, index_type: IndexType, value: Any, what: str) -> IndexWrite:
    """Return the index write for a staged ``value`` (None removes the key's value).

    ``value`` is the validated Python value the handler wrote; a value the index type cannot
    hold (possible only for loosely typed Attributes) raises InvalidArgumentError naming ``what``.
    """
    if value is None:
        return IndexWrite(key, index_type, None)

    def refuse(reason: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"{what}: cannot index {value!r} under {index_type} key {key!r}: {reason}", field=what
        )

    if index_type == IndexType.FULL_TEXT:
        if not isinstance(value, str):
            raise refuse("expected a string")
        if len(value) > MAX_TEXT_LENGTH:
            raise refuse(f"longer than {MAX_TEXT_LENGTH} characters")
        # Stored as its tokens, the form both databases index (see search.fulltext).
        return IndexWrite(key, index_type, _json(value), text=fulltext.normalize(value))
    if index_type == IndexType.KEYWORD:
        if not isinstance(value, str):
            raise refuse("expected a string")
        if len(value) > MAX_KEYWORD_LENGTH:
            raise refuse(f"longer than {MAX_KEYWORD_LENGTH} characters")
        if "\x00" in value:
            raise refuse(_NUL)
        return IndexWrite(key, index_type, _json(value), text=value)
    if index_type == IndexType.KEYWORD_ARRAY:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise refuse("expected a list of strings")
        if any(len(v) > MAX_KEYWORD_LENGTH for v in value):
            raise refuse(f"an element is longer than {MAX_KEYWORD_LENGTH} characters")
        if any("\x00" in v for v in value):
            raise refuse(_NUL)
        return IndexWrite(key, index_type, _json(list(value)), items=tuple(dict.fromkeys(value)))
    if index_type == IndexType.BOOL:
        if not isinstance(value, bool):
            raise refuse("expected a boolean")
        return IndexWrite(key, index_type, _json(value), number=int(value))
    if index_type == IndexType.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse("expected an integer")
        if not _INT64[0] <= value <= _INT64[1]:
            raise refuse("outside the 64-bit range")
        return IndexWrite(key, index_type, _json(value), number=value)
    if index_type == IndexType.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise refuse("expected a number")
        real = float(value)
        if not math.isfinite(real):
            raise refuse("numbers must be finite")
        return IndexWrite(key, index_type, _json(value), real=real)
    if index_type == IndexType.DATETIME:
        if isinstance(value, datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            micros = parse_datetime(moment.isoformat())
            shown = value.isoformat()
        elif isinstance(value, str):
            micros, shown = parse_datetime(value), value
        else:
            micros = None
        if micros is None:
            raise refuse("expected a date-time")
        return IndexWrite(key, index_type, _json(shown), number=micros)
    raise refuse("unknown index type")


_sv, _kw, _tx = t.search_values, t.search_keywords, t.search_texts
_DELETE_VALUES = Prepared(
    delete(_sv).where(_sv.c.run_id == bindparam("r"), _sv.c.key == bindparam("k"))
)
_DELETE_KEYWORDS = Prepared(
    delete(_kw).where(_kw.c.run_id == bindparam("r"), _kw.c.key == bindparam("k"))
)
_DELETE_TEXTS = Prepared(
    delete(_tx).where(_tx.c.run_id == bindparam("r"), _tx.c.key == bindparam("k"))
)
_INSERT_KEYWORDS = Prepared(insert(_kw))
_INSERT_TEXTS = Prepared(insert(_tx))
_upserts: dict[str, Prepared] = {}


def _upsert_values(conn: Connection) -> Prepared:
    """The dialect's upsert of search values, built on first use; each row copies its run's
    start time, which the indexes order by."""
    found = _upserts.get(conn.dialect.name)
    if found is None:
        runs = t.runs
        started = select(runs.c.started_at).where(runs.c.run_id == bindparam("b_run"))
        stmt = dialect_insert(conn)(_sv).values(
            run_id=bindparam("b_run"),
            key=bindparam("b_key"),
            type=bindparam("b_type"),
            value=bindparam("b_value"),
            text_value=bindparam("b_text"),
            int_value=bindparam("b_int"),
            real_value=bindparam("b_real"),
            started_at=started.scalar_subquery(),
        )
        found = _upserts[conn.dialect.name] = Prepared(
            stmt.on_conflict_do_update(
                index_elements=[_sv.c.run_id, _sv.c.key],
                set_={
                    c: stmt.excluded[c]
                    for c in ("type", "value", "text_value", "int_value", "real_value")
                },
            )
        )
    return found


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def apply_index_writes(conn: Connection, run_id: str, writes: Iterable[AttributeWrite]) -> None:
    """Set or remove the search values the writes carry; the last write to a key wins."""
    latest: dict[str, IndexWrite] = {}
    for w in writes:
        if w.index is not None:
            latest.pop(w.index.key, None)  # re-insert so the dict keeps the final write order
            latest[w.index.key] = w.index
    if not latest:
        return
    removed = [{"r": run_id, "k": w.key} for w in latest.values() if w.value is None]
    sets = [w for w in latest.values() if w.value is not None]
    if removed:
        _DELETE_VALUES.many(conn, removed)
    if sets:
        _upsert_values(conn).many(
            conn,
            [
                {
                    "b_run": run_id,
                    "b_key": w.key,
                    "b_type": w.type,
                    "b_value": w.value,
                    "b_text": w.text if w.type == IndexType.KEYWORD else None,
                    "b_int": w.number,
                    "b_real": w.real,
                }
                for w in sets
            ],
        )
    arrays = [w for w in latest.values() if w.type == IndexType.KEYWORD_ARRAY]
    if arrays:
        _DELETE_KEYWORDS.many(conn, [{"r": run_id, "k": w.key} for w in arrays])
        items = [{"run_id": run_id, "key": w.key, "value": v} for w in arrays for v in w.items]
        _INSERT_KEYWORDS.many(conn, items)
    texts = [w for w in latest.values() if w.type == IndexType.FULL_TEXT]
    if texts:
        # Delete then insert (not update) so the full-text index sees one plain change per row.
        _DELETE_TEXTS.many(conn, [{"r": run_id, "k": w.key} for w in texts])
        bodies = [{"run_id": run_id, "key": w.key, "body": w.text} for w in texts if w.text]
        _INSERT_TEXTS.many(conn, bodies)
