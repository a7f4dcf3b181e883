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

from sqlalchemy import Connection, bindparam, delete, insert

from engine._storage import tables as t
from engine._storage.records import AttributeWrite, IndexWrite
from engine._storage.search import fulltext
from engine._storage.search.compiler import parse_datetime
from engine.attribute import IndexType
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


def _upsert(conn: Connection, table: Any) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


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
    sv, kw, tx = t.search_values, t.search_keywords, t.search_texts
    removed = [{"r": run_id, "k": w.key} for w in latest.values() if w.value is None]
    sets = [w for w in latest.values() if w.value is not None]
    if removed:
        conn.execute(
            delete(sv).where(sv.c.run_id == bindparam("r"), sv.c.key == bindparam("k")), removed
        )
    if sets:
        stmt = _upsert(conn, sv)
        stmt = stmt.on_conflict_do_update(
            index_elements=[sv.c.run_id, sv.c.key],
            set_={
                c: stmt.excluded[c]
                for c in ("type", "value", "text_value", "int_value", "real_value")
            },
        )
        conn.execute(
            stmt,
            [
                {
                    "run_id": run_id,
                    "key": w.key,
                    "type": w.type,
                    "value": w.value,
                    "text_value": w.text if w.type == IndexType.KEYWORD else None,
                    "int_value": w.number,
                    "real_value": w.real,
                }
                for w in sets
            ],
        )
    arrays = [w for w in latest.values() if w.type == IndexType.KEYWORD_ARRAY]
    if arrays:
        conn.execute(
            delete(kw).where(kw.c.run_id == bindparam("r"), kw.c.key == bindparam("k")),
            [{"r": run_id, "k": w.key} for w in arrays],
        )
        items = [{"run_id": run_id, "key": w.key, "value": v} for w in arrays for v in w.items]
        if items:
            conn.execute(insert(kw), items)
    texts = [w for w in latest.values() if w.type == IndexType.FULL_TEXT]
    if texts:
        # Delete then insert (not update) so the full-text index sees one plain change per row.
        conn.execute(
            delete(tx).where(tx.c.run_id == bindparam("r"), tx.c.key == bindparam("k")),
            [{"r": run_id, "k": w.key} for w in texts],
        )
        bodies = [{"run_id": run_id, "key": w.key, "body": w.text} for w in texts if w.text]
        if bodies:
            conn.execute(insert(tx), bodies)
