"""Queries that differ only in their values share one compiled statement.

Compiling a query (the condition, the driver, the statement with its joins, its SQL) costs
several times what SQLite takes to run a page of it, and queries seldom repeat their text:
``keyword1 = 'a'`` and ``keyword1 = 'b'`` are two texts. Their *shape* is the same: the query
with each literal replaced by a slot that keeps only its kind. A shape is compiled once, each
literal becoming the bound parameter ``q<slot>``; each query then only converts its own
literals to their stored form, which also checks them against their field's type.

A value that decides the form of the SQL keeps the query out of this (it is compiled per text,
as before): a ``STARTS_WITH`` prefix (an empty one matches every value; the others become a
range) and a FULL_TEXT value (its token count).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine._enums import IndexType
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
    Query,
)

Slots = list[tuple[str, Literal]]


def shape_of(
    query: Query, key_types: Mapping[str, IndexType]
) -> tuple[tuple[Any, ...], Slots] | None:
    """Return the query's shape and its literals in slot order, each with its field; None when
    a value decides the form of the SQL."""
    slots: Slots = []
    where = None if query.where is None else _node(query.where, key_types, slots)
    if where is _VALUE_SHAPED:
        return None
    order = tuple((item.field, item.descending) for item in query.order)
    return (where, order), slots


class _ValueShaped:
    """A part of a query whose SQL depends on its value."""


_VALUE_SHAPED = _ValueShaped()


def _node(node: Node, key_types: Mapping[str, IndexType], slots: Slots) -> Any:
    if isinstance(node, And | Or):
        items = tuple(_node(item, key_types, slots) for item in node.items)
        if _VALUE_SHAPED in items:
            return _VALUE_SHAPED
        return (type(node).__name__, items)
    if isinstance(node, Not):
        item = _node(node.item, key_types, slots)
        return _VALUE_SHAPED if item is _VALUE_SHAPED else ("Not", item)
    if isinstance(node, IsNull):
        return ("IsNull", node.field, node.negated)
    if key_types.get(node.field) == IndexType.FULL_TEXT:
        return _VALUE_SHAPED
    if isinstance(node, Compare):
        slots.append((node.field, node.value))
        return ("Compare", node.field, node.op, node.value.kind)
    if isinstance(node, InList):
        slots.extend((node.field, value) for value in node.values)
        return ("InList", node.field, node.negated, tuple(v.kind for v in node.values))
    if isinstance(node, Between):
        slots.extend(((node.field, node.low), (node.field, node.high)))
        return ("Between", node.field, node.negated, node.low.kind, node.high.kind)
    return _VALUE_SHAPED  # STARTS_WITH


def slot_name(index: int) -> str:
    """The bound parameter of a slot."""
    return f"q{index}"
