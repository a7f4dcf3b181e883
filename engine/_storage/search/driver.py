"""Leading a search from one index key's rows, in SearchFlows' default order.

A search compiles to a condition on ``runs``; an index key in it is ``run_id IN (rows of that
key)``. With the default order (StartTime, then RunId, both descending) SQLite and PostgreSQL
then look up every matching run to sort them before they can cut a page: 1,000 lookups for a
key that 1% of 100,000 runs match, 10,000 at 1,000,000. Each search value row carries its
run's start time and every value index ends in ``(started_at, run_id)``, so when the query is a
conjunction with a scalar index key in it, the search can walk that key's rows in order
instead and stop after one page:

- an equality (``key = v``) reads the page straight off the index, however many runs match;
- a range or list reads only the covering index to sort, and looks up one page of runs.

The other conjuncts (``rest``) are checked on each run as it is met. The rows a driver yields
are exactly the runs the plain condition matches: a run has at most one row per key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_

from engine._storage import tables as t
from engine._storage.search.compiler import (
    OrderKey,
    QueryCompiler,
    value_column_of,
)
from engine._storage.search.parser import And, Compare, Node, Predicate

#: The search value rows a driven search walks (an alias: ``rest`` may query the same table).
DRIVER = t.search_values.alias("driver")
_ORDER = (
    OrderKey("StartTime", DRIVER.c.started_at, True, int),
    OrderKey("RunId", DRIVER.c.run_id, True, str),
)


@dataclass(frozen=True)
class Driver:
    """One index key's rows to walk, and what else each run must meet."""

    #: The key's rows that match, on DRIVER's columns.
    condition: Any
    #: The other conjuncts, on ``runs``; None when there are none.
    rest: Any
    #: The default order on DRIVER's columns (what page tokens compare with).
    order: tuple[OrderKey, ...] = _ORDER


def choose(compiler: QueryCompiler, where: Node | None, order: tuple[OrderKey, ...]) -> Any:
    """Return the Driver of a query, or None when it cannot lead from one key's rows.

    It can when the order is the default one and the query is a conjunction (or a single
    predicate) with a scalar index key among its conjuncts; an equality is preferred, as it
    reads its page in order.
    """
    if where is None or [(k.field, k.descending) for k in order] != [
        ("StartTime", True),
        ("RunId", True),
    ]:
        return None
    items = _conjuncts(where)
    scalars: list[tuple[int, Predicate]] = [
        (n, item)
        for n, item in enumerate(items)
        if isinstance(item, Predicate) and compiler.scalar_condition(item)
    ]
    if not scalars:
        return None
    equal = [s for s in scalars if isinstance(s[1], Compare) and s[1].op == "="]
    field = (equal or scalars)[0][1].field
    taken = {n for n, item in scalars if item.field == field}
    chosen = [item for n, item in scalars if n in taken]
    others = tuple(item for n, item in enumerate(items) if n not in taken)
    kind = compiler.field_type(field, 0)
    column = DRIVER.c[value_column_of(kind).key]
    condition = and_(
        DRIVER.c.key == field,
        DRIVER.c.type == kind,
        *[compiler.condition(column, item, kind) for item in chosen],
    )
    rest = compiler.conjunction(others) if others else None
    return Driver(condition, rest)


def _conjuncts(node: Node) -> list[Node]:
    """The items of a (nested) conjunction, or the node itself."""
    if isinstance(node, And):
        return [leaf for item in node.items for leaf in _conjuncts(item)]
    return [node]
