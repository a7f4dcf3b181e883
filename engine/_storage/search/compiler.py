"""Check a parsed query against the index keys' types and compile it to SQLAlchemy Core.

The result is one boolean condition on the ``runs`` table. System fields are columns of
``runs`` (ParentFlowId and ParentRunId of ``subflow_links``, compared like index keys); an index key
becomes ``run_id IN (SELECT run_id FROM search_values WHERE key = ...)`` (or the
KEYWORD_ARRAY / FULL_TEXT tables). Every value is a bound parameter: the query text
never reaches SQL.

Semantics, all two-valued so that NOT is an exact complement:

- A comparison, ``IN``, ``BETWEEN`` or ``STARTS_WITH`` on a key the run has no value for is
  false; that includes ``!=``, ``NOT IN`` and ``NOT BETWEEN`` (use ``IS NULL`` for "unset").
  ``NOT (...)`` negates its operand, so ``NOT keyword1 = 'a'`` also matches runs without it.
- KEYWORD_ARRAY: ``=``/``IN``/``STARTS_WITH`` hold when any element does; ``!=``/``NOT IN`` when
  the array is set and no element does.
- FULL_TEXT: ``=`` holds when the text contains the token (or phrase) of tokens as
  :mod:`.fulltext` defines them; ``!=`` when it is set and does not. A value without a token
  matches no text.
- Strings compare by code point (on PostgreSQL every string column has the "C" collation);
  DATETIME compares instants (ISO-8601 text; no offset = UTC).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, and_, bindparam, false, func, literal, not_, or_, select, true

from engine._enums import IndexType, RunStatus
from engine._storage import tables as t
from engine._storage.search import fulltext
from engine._storage.search.fields import SYSTEM_FIELDS
from engine._storage.search.parser import (
    And,
    Between,
    Compare,
    InList,
    IsNull,
    Literal,
    Node,
    Not,
    Or,
    OrderItem,
    Predicate,
    Query,
    StartsWith,
)
from engine._storage.search.shapes import slot_name
from engine.errors import InvalidQueryError

KEYWORD = IndexType.KEYWORD
FULL_TEXT = IndexType.FULL_TEXT
KEYWORD_ARRAY = IndexType.KEYWORD_ARRAY
INT = IndexType.INT
DOUBLE = IndexType.DOUBLE
BOOL = IndexType.BOOL
DATETIME = IndexType.DATETIME

STATUSES = tuple(RunStatus)
INT64_MAX = 2**63 - 1


def _system_column(name: str) -> Any:
    """The field's value for the run being matched (a correlated subquery for a linked row)."""
    field = SYSTEM_FIELDS[name]
    if field.table == "runs":
        return t.runs.c[field.column]
    links = t.subflow_links
    return (
        select(links.c[field.column])
        .where(links.c.child_run_id == t.runs.c.run_id)
        .scalar_subquery()
    )


def _linked_runs(name: str, condition: Any = None) -> Any:
    """``run_id IN`` the linked rows whose field meets ``condition`` (every one when None)."""
    links = t.subflow_links
    rows = select(links.c.child_run_id)
    if condition is not None:
        rows = rows.where(condition)
    return t.runs.c.run_id.in_(rows)


_ORDERED = ("=", "!=", "<", "<=", ">", ">=", "IN", "BETWEEN", "IS NULL")
_OPERATORS: dict[IndexType, tuple[str, ...]] = {
    KEYWORD: (*_ORDERED, "STARTS_WITH"),
    KEYWORD_ARRAY: ("=", "!=", "IN", "STARTS_WITH", "IS NULL"),
    FULL_TEXT: ("=", "!=", "IS NULL"),
    INT: _ORDERED,
    DOUBLE: _ORDERED,
    DATETIME: _ORDERED,
    BOOL: ("=", "!=", "IN", "IS NULL"),
}
# Which typed column of search_values holds each scalar type.
_VALUE_COLUMN = {
    KEYWORD: t.search_values.c.text_value,
    INT: t.search_values.c.int_value,
    BOOL: t.search_values.c.int_value,
    DATETIME: t.search_values.c.int_value,
    DOUBLE: t.search_values.c.real_value,
}


def value_column_of(kind: IndexType) -> Any:
    """The typed column of search_values that holds a scalar index type's values."""
    return _VALUE_COLUMN[kind]


@dataclass(frozen=True)
class OrderKey:
    """One sort key of a search: the SQL expression, its direction, its page-token kind."""

    field: str
    expression: Any
    descending: bool
    kind: type  # int or str: what the page token stores for it


@dataclass(frozen=True)
class Compiled:
    """A compiled query: the condition on ``runs`` and the full sort order (RunId last)."""

    where: Any
    order: tuple[OrderKey, ...]
    #: How to lead the search from one index key's rows instead (see ``driver``), or None.
    driver: Any = None


def compile_query(
    query: Query, key_types: Mapping[str, IndexType], slots: Mapping[int, int] | None = None
) -> Compiled:
    """Compile ``query``; ``key_types`` maps each declared index key to its IndexType (for
    ``slots`` see :class:`QueryCompiler`)."""
    compiler = QueryCompiler(key_types, slots)
    where = true() if query.where is None else compiler.node(query.where)
    return Compiled(where, order_keys(query.order))


def order_keys(items: tuple[OrderItem, ...]) -> tuple[OrderKey, ...]:
    """Return the sort keys: the requested ones (system fields only), then RunId as tiebreak.

    With no ORDER BY the order is StartTime descending, then RunId descending.
    """
    if not items:
        items = (OrderItem("StartTime", True, 0),)
    keys: list[OrderKey] = []
    seen: set[str] = set()
    for item in items:
        if item.field not in SYSTEM_FIELDS:
            raise InvalidQueryError(
                f"ORDER BY supports the system fields {', '.join(SYSTEM_FIELDS)}; "
                f"{item.field!r} at position {item.position} is not one",
                position=item.position,
                field="query",
            )
        if item.field in seen:
            raise InvalidQueryError(
                f"ORDER BY names {item.field} twice (position {item.position})",
                position=item.position,
                field="query",
            )
        seen.add(item.field)
        kind, column = SYSTEM_FIELDS[item.field].type, _system_column(item.field)
        if item.field == "CloseTime":
            # An open run has not closed yet: it sorts as if it closed at the end of time. (Typed:
            # a bare Python int would be bound as a 32-bit INTEGER on PostgreSQL.)
            column = func.coalesce(column, literal(INT64_MAX, BigInteger()))
        elif SYSTEM_FIELDS[item.field].nullable:
            column = func.coalesce(column, "")  # a run without a parent sorts first
        keys.append(OrderKey(item.field, column, item.descending, int if kind == DATETIME else str))
    if "RunId" not in seen:
        keys.append(OrderKey("RunId", t.runs.c.run_id, True, str))
    return tuple(keys)


class QueryCompiler:
    """Compiles the nodes of one query against the index keys' types.

    With ``slots`` (the ``id`` of each literal of the query -> its slot, see ``shapes``) each
    literal becomes the bound parameter of its slot instead of its value, once checked.
    """

    def __init__(
        self, key_types: Mapping[str, IndexType], slots: Mapping[int, int] | None = None
    ) -> None:
        self.key_types = key_types
        self.slots = slots

    # -- structure ----------------------------------------------------------------------------

    def node(self, node: Node) -> Any:
        if isinstance(node, And):
            return self.conjunction(node.items)
        if isinstance(node, Or):
            return or_(*[self.node(item) for item in node.items])
        if isinstance(node, Not):
            return not_(self.node(node.item))
        assert isinstance(node, Compare | InList | Between | StartsWith | IsNull)
        return self.predicate(node)

    def conjunction(self, items: tuple[Node, ...]) -> Any:
        """AND the items; conditions on one scalar index key share one subquery.

        A run has one row per scalar key, so ``int1 >= 5 AND int1 < 9`` is one range scan of
        the key's index instead of two half-table scans intersected. (Not for KEYWORD_ARRAY:
        ``tags = 'a' AND tags = 'b'`` needs two elements, not one equal to both.)
        """
        parts: list[Any] = []
        merged: dict[str, list[Any]] = {}
        for item in items:
            scalar = self.scalar_condition(item)
            if scalar is None:
                parts.append(self.node(item))
                continue
            field, condition = scalar
            if field not in merged:
                merged[field] = []
                parts.append(field)  # placeholder, keeps the written order
            merged[field].append(condition)
        return and_(
            *[
                self.key_rows(p, self.field_type(p, 0), and_(*merged[p]))
                if isinstance(p, str)
                else p
                for p in parts
            ]
        )

    def scalar_condition(self, node: Node) -> tuple[str, Any] | None:
        """Return (key, condition on its typed column) for a scalar index-key predicate."""
        if not isinstance(node, Compare | InList | Between | StartsWith):
            return None
        if node.field in SYSTEM_FIELDS:
            return None
        kind = self.field_type(node.field, node.position)
        if kind not in _VALUE_COLUMN:
            return None
        self.check_operator(node.field, kind, _operator_name(node), node.position)
        return node.field, self.condition(_VALUE_COLUMN[kind], node, kind)

    def key_rows(self, field: str, kind: IndexType, condition: Any) -> Any:
        """``run_id IN`` the runs whose ``field`` value satisfies ``condition``."""
        sv = t.search_values
        return t.runs.c.run_id.in_(
            select(sv.c.run_id).where(sv.c.key == field, sv.c.type == kind, condition)
        )

    # -- fields and values --------------------------------------------------------------------

    def field_type(self, name: str, position: int) -> IndexType:
        if name in SYSTEM_FIELDS:
            return SYSTEM_FIELDS[name].type
        found = self.key_types.get(name)
        if found is None:
            known = [*SYSTEM_FIELDS, *sorted(self.key_types)]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidQueryError(
                f"unknown field {name!r} at position {position}: it is neither a system field "
                f"nor an index key of a registered Flow type{hint}",
                position=position,
                field="query",
            )
        return found

    def value(self, field: str, kind: IndexType, lit: Literal) -> Any:
        """Convert a literal to the field's stored form (or its slot's parameter, compiling a
        shape), or raise a type mismatch."""
        converted = self.stored(field, kind, lit)
        if self.slots is None:
            return converted
        return bindparam(slot_name(self.slots[id(lit)]), required=True)

    def stored(self, field: str, kind: IndexType, lit: Literal) -> Any:
        """Convert a literal to the field's stored form, or raise a type mismatch."""
        v = lit.value
        if kind in (KEYWORD, KEYWORD_ARRAY, FULL_TEXT):
            if isinstance(v, str):
                if field == "Status" and v not in STATUSES:
                    raise _mismatch(field, lit, "one of " + ", ".join(STATUSES))
                return v
            raise _mismatch(field, lit, f"a quoted string ({kind})")
        if kind == INT:
            if isinstance(v, int) and not isinstance(v, bool):
                return v
            raise _mismatch(field, lit, "an integer (INT)")
        if kind == DOUBLE:
            if isinstance(v, int | float) and not isinstance(v, bool):
                return float(v)
            raise _mismatch(field, lit, "a number (DOUBLE)")
        if kind == BOOL:
            if isinstance(v, bool):
                return int(v)
            raise _mismatch(field, lit, "TRUE or FALSE (BOOL)")
        assert kind == DATETIME, kind
        if isinstance(v, str):
            micros = parse_datetime(v)
            if micros is not None:
                return micros
        raise _mismatch(field, lit, "an ISO-8601 date-time string such as '2025-01-31T12:00:00Z'")

    def check_operator(self, field: str, kind: IndexType, op: str, position: int) -> None:
        if op not in _OPERATORS[kind]:
            allowed = ", ".join(_OPERATORS[kind])
            raise InvalidQueryError(
                f"{op} cannot be used on {field} ({kind}) at position {position}; "
                f"it supports {allowed}",
                position=position,
                field="query",
            )

    # -- predicates ---------------------------------------------------------------------------

    def predicate(self, node: Predicate) -> Any:
        kind = self.field_type(node.field, node.position)
        op = _operator_name(node)
        self.check_operator(node.field, kind, op, node.position)
        if isinstance(node, IsNull):
            present = self.present(node.field, kind)
            return present if node.negated else not_(present)
        if node.field in SYSTEM_FIELDS:
            return self.system(node, kind)
        if kind == KEYWORD_ARRAY:
            return self.array(node)
        if kind == FULL_TEXT:
            return self.full_text(node)
        return self.key_rows(node.field, kind, self.condition(_VALUE_COLUMN[kind], node, kind))

    def present(self, field: str, kind: IndexType) -> Any:
        if field in SYSTEM_FIELDS:
            system = SYSTEM_FIELDS[field]
            if system.table != "runs":
                return _linked_runs(field)
            return _system_column(field).is_not(None) if system.nullable else true()
        sv = t.search_values
        return t.runs.c.run_id.in_(select(sv.c.run_id).where(sv.c.key == field, sv.c.type == kind))

    def condition(self, column: Any, node: Predicate, kind: IndexType) -> Any:
        """The comparison itself, on a column that holds the field's stored form."""
        if isinstance(node, Compare):
            value = self.value(node.field, kind, node.value)
            return {
                "=": column.__eq__,
                "!=": column.__ne__,
                "<": column.__lt__,
                "<=": column.__le__,
                ">": column.__gt__,
                ">=": column.__ge__,
            }[node.op](value)
        if isinstance(node, InList):
            values = [self.value(node.field, kind, v) for v in node.values]
            return column.not_in(values) if node.negated else column.in_(values)
        if isinstance(node, Between):
            low = self.value(node.field, kind, node.low)
            high = self.value(node.field, kind, node.high)
            inside = and_(column >= low, column <= high)
            return not_(inside) if node.negated else inside
        assert isinstance(node, StartsWith)
        return starts_with(column, self.value(node.field, kind, node.value))

    def system(self, node: Predicate, kind: IndexType) -> Any:
        assert not isinstance(node, IsNull)
        system = SYSTEM_FIELDS[node.field]
        if system.table != "runs":
            # Like an index key: false for a run without the row, so NOT is an exact complement.
            links = t.subflow_links
            return _linked_runs(node.field, self.condition(links.c[system.column], node, kind))
        column = _system_column(node.field)
        condition = self.condition(column, node, kind)
        if system.nullable:
            # Two-valued even for open runs (NULL), so NOT stays an exact complement.
            return and_(column.is_not(None), condition)
        return condition

    def array(self, node: Predicate) -> Any:
        kw = t.search_keywords
        if isinstance(node, Compare | InList):
            values = (
                [self.value(node.field, KEYWORD_ARRAY, node.value)]
                if isinstance(node, Compare)
                else [self.value(node.field, KEYWORD_ARRAY, v) for v in node.values]
            )
            negated = node.op == "!=" if isinstance(node, Compare) else node.negated
            hits = t.runs.c.run_id.in_(
                select(kw.c.run_id).where(kw.c.key == node.field, kw.c.value.in_(values))
            )
            if negated:
                return and_(self.present(node.field, KEYWORD_ARRAY), not_(hits))
            return hits
        assert isinstance(node, StartsWith)
        prefix = self.value(node.field, KEYWORD_ARRAY, node.value)
        return t.runs.c.run_id.in_(
            select(kw.c.run_id).where(kw.c.key == node.field, starts_with(kw.c.value, prefix))
        )

    def full_text(self, node: Predicate) -> Any:
        assert isinstance(node, Compare)
        text = self.value(node.field, FULL_TEXT, node.value)
        rows = fulltext.matching_runs(t.search_texts, node.field, text)
        hits = false() if rows is None else t.runs.c.run_id.in_(rows)
        if node.op == "!=":
            return and_(self.present(node.field, FULL_TEXT), not_(hits))
        return hits


def _operator_name(node: Predicate) -> str:
    if isinstance(node, Compare):
        return node.op
    if isinstance(node, InList):
        return "IN"
    if isinstance(node, Between):
        return "BETWEEN"
    if isinstance(node, StartsWith):
        return "STARTS_WITH"
    return "IS NULL"


def _mismatch(field: str, lit: Literal, wanted: str) -> InvalidQueryError:
    return InvalidQueryError(
        f"{field} compares with {wanted}; got {lit.kind} {lit.value!r} at position {lit.position}",
        position=lit.position,
        field="query",
    )


def parse_datetime(text: str) -> int | None:
    """Return the instant of an ISO-8601 string in microseconds (no offset = UTC), or None."""
    candidate = text.strip()
    if candidate[-1:] in ("Z", "z"):
        candidate = candidate[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def starts_with(column: Any, prefix: str) -> Any:
    """``column`` starts with ``prefix``, as an index-friendly range [prefix, successor)."""
    if prefix == "":
        return column.is_not(None)
    upper = _successor(prefix)
    lower = column >= prefix
    return lower if upper is None else and_(lower, column < upper)


def _successor(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``."""
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if code == 0xD800:  # surrogates cannot be stored; skip to the next scalar value
            code = 0xE000
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


__all__ = ["Compiled", "OrderKey", "compile_query", "order_keys"]
