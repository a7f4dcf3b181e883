"""SearchFlows and FlowInfo reads. Each is one SQL statement, so a page of runs and their
indexed values come from one committed state."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from sqlalchemy import and_, bindparam, select

from engine._enums import IndexType
from engine._storage import tables as t
from engine._storage.prepared import Prepared
from engine._storage.reads import Reader, target_run_statement
from engine._storage.search import driver, paging
from engine._storage.search.compiler import Compiled, OrderKey, QueryCompiler, compile_query
from engine._storage.search.parser import And, Compare, Literal, Query, parse
from engine._storage.search.shapes import shape_of, slot_name
from engine.errors import InvalidArgumentError, InvalidQueryError


@dataclass(frozen=True)
class FoundRun:
    """What FlowInfo shows of a run: identity, status, times (µs) and indexed values."""

    run_id: str
    flow_id: str
    flow_type: str
    status: str
    started_at: int
    closed_at: int | None
    indexed: dict[str, Any]
    parent_flow_id: str | None = None
    parent_run_id: str | None = None


@dataclass(frozen=True)
class SearchResult:
    """One page of runs and the token of the next page ("" after the last)."""

    runs: list[FoundRun]
    next_page_token: str


def prepare(text: str, key_types: dict[str, IndexType], flow_type: str | None = None) -> Compiled:
    """Parse and compile ``text``; with ``flow_type`` the filter is confined to that Flow type.

    The scope is combined with the parsed filter as a tree (``FlowType = x AND (filter)``), so
    no text of the caller's filter, balanced or not, can widen it. Results are cached: paging
    repeats the same query, and compiled conditions hold only bound values.
    """
    if not isinstance(text, str):
        raise InvalidQueryError("query must be a string", position=0, field="query")
    if flow_type is not None and (not isinstance(flow_type, str) or not flow_type):
        raise InvalidArgumentError("flow_type must be a non-empty string", field="flowType")
    return _prepare(text, tuple(sorted(key_types.items())), flow_type)


@lru_cache(maxsize=256)
def _prepare(
    text: str, key_types: tuple[tuple[str, IndexType], ...], flow_type: str | None
) -> Compiled:
    return _compile(_scoped(text, flow_type), dict(key_types))


@lru_cache(maxsize=1024)
def _scoped(text: str, flow_type: str | None) -> Query:
    """Parse ``text``, confined to ``flow_type`` when given."""
    query = parse(text)
    if flow_type is not None:
        scope = Compare("FlowType", "=", Literal(flow_type, 0), 0)
        where = scope if query.where is None else And((scope, query.where))
        query = type(query)(where, query.order)
    return query


def _compile(
    query: Query, key_types: dict[str, IndexType], slots: dict[int, int] | None = None
) -> Compiled:
    compiled = compile_query(query, key_types, slots)
    lead = driver.choose(QueryCompiler(key_types, slots), query.where, compiled.order)
    return replace(compiled, driver=lead)


#: Compiled shapes, least recently used first out (see ``shapes``).
_SHAPES: OrderedDict[Any, Compiled] = OrderedDict()
SHAPES_KEPT = 256


def prepare_bound(
    text: str, key_types: dict[str, IndexType], flow_type: str | None = None
) -> tuple[Compiled, dict[str, Any]]:
    """Like :func:`prepare`, for running: the compiled query of ``text``'s shape and the
    values of its slots (see ``shapes``), or the compiled text and no values."""
    if not isinstance(text, str):
        raise InvalidQueryError("query must be a string", position=0, field="query")
    if flow_type is not None and (not isinstance(flow_type, str) or not flow_type):
        raise InvalidArgumentError("flow_type must be a non-empty string", field="flowType")
    key_tuple = tuple(sorted(key_types.items()))
    query = _scoped(text, flow_type)
    found = shape_of(query, key_types)
    if found is None:
        return _prepare(text, key_tuple, flow_type), {}
    shape, slots = found
    cache_key = (shape, key_tuple)
    compiled = _SHAPES.get(cache_key)
    if compiled is None:
        # Compiling checks the query as a whole (fields, operators, order) and its values.
        compiled = _compile(query, key_types, {id(lit): i for i, (_, lit) in enumerate(slots)})
        _SHAPES[cache_key] = compiled
        if len(_SHAPES) > SHAPES_KEPT:
            _SHAPES.popitem(last=False)
    else:
        _SHAPES.move_to_end(cache_key)
    compiler = QueryCompiler(key_types)
    values = {
        slot_name(i): compiler.stored(field, compiler.field_type(field, lit.position), lit)
        for i, (field, lit) in enumerate(slots)
    }
    return compiled, values


async def search_runs(
    db: Reader,
    text: str,
    key_types: dict[str, IndexType],
    *,
    page_size: int,
    page_token: str,
    flow_type: str | None = None,
) -> SearchResult:
    """Return one page of the runs matching ``text``, in the query's order."""
    compiled, values = prepare_bound(text, key_types, flow_type)
    digest = paging.query_digest(text, flow_type)
    position = paging.decode_token(page_token, digest, compiled.order)
    order = compiled.order if compiled.driver is None else compiled.driver.order
    params: dict[str, Any] = {"limit": page_size + 1, **values}
    params.update({f"p{i}": value for i, value in enumerate(position or ())})
    statement = _search_statement(compiled, position is not None)
    rows = await _with_details(db, statement, params, order)
    more = len(rows) > page_size
    rows = rows[:page_size]
    token = paging.encode_token(digest, rows[-1][1]) if more else ""
    return SearchResult([found for found, _ in rows], token)


def search_statement(
    text: str, key_types: dict[str, IndexType], flow_type: str | None = None, *, paged: bool = False
) -> Any:
    """Return the Core statement SearchFlows runs for ``text`` (to EXPLAIN it). Its parameters
    are ``limit`` and, when ``paged``, the position ``p0``, ``p1``, ... of the page before."""
    return _search_statement(prepare(text, key_types, flow_type), paged).statement


async def load_flow_info(db: Reader, flow_id: str, run_id: str | None) -> FoundRun | None:
    """Return the given run (or the Flow's latest) with its indexed values."""
    params = {"flow_id": flow_id, "run_id": run_id, "limit": 1}
    rows = await _with_details(db, _flow_info_statement(run_id is not None), params, ())
    return rows[0][0] if rows else None


_COLUMNS = ("run_id", "flow_id", "flow_type", "status", "started_at", "closed_at")


# A query's statement is built once (the compiled query is cached too, so paging through its
# results repeats the same object): building a select with its joins costs more than SQLite
# takes to run a small page of it. The page's position and size are bound parameters.
@lru_cache(maxsize=256)
def _search_statement(compiled: Compiled, paged: bool) -> Prepared:
    if compiled.driver is not None:
        return _with_details_statement(_driven_page(compiled.driver, paged))
    where = compiled.where
    if paged:
        where = and_(where, paging.after_parameters(compiled.order))
    return _with_details_statement(_page(where, compiled.order))


@lru_cache(maxsize=2)
def _flow_info_statement(by_run_id: bool) -> Prepared:
    return _with_details_statement(_page(t.runs.c.run_id == target_run_statement(by_run_id), ()))


def _page(where: Any, order: Sequence[OrderKey]) -> Any:
    """Up to ``:limit`` runs meeting ``where``, in ``order``."""
    keys = [k.expression.label(f"k{i}") for i, k in enumerate(order)]
    return (
        select(*[t.runs.c[c] for c in _COLUMNS], *keys)
        .where(where)
        .order_by(*[k.expression.desc() if k.descending else k.expression.asc() for k in order])
        .limit(bindparam("limit"))
        .cte("page")
    )


def _driven_page(lead: driver.Driver, paged: bool) -> Any:
    """Up to ``:limit`` runs, walking one index key's rows in the default order."""
    rows, runs = driver.DRIVER, t.runs
    condition = lead.condition
    if paged:
        condition = and_(condition, paging.after_parameters(lead.order))
    newest_first = (rows.c.started_at.desc(), rows.c.run_id.desc())
    if lead.rest is None:
        # Only the key's rows decide: sort them on the covering index, look up one page.
        hits = (
            select(rows.c.run_id, rows.c.started_at)
            .where(condition)
            .order_by(*newest_first)
            .limit(bindparam("limit"))
            .subquery("hits")
        )
        return (
            select(
                *[runs.c[c] for c in _COLUMNS],
                hits.c.started_at.label("k0"),
                hits.c.run_id.label("k1"),
            )
            .select_from(hits.join(runs, runs.c.run_id == hits.c.run_id))
            .cte("page")
        )
    return (
        select(
            *[runs.c[c] for c in _COLUMNS],
            rows.c.started_at.label("k0"),
            rows.c.run_id.label("k1"),
        )
        .select_from(rows.join(runs, runs.c.run_id == rows.c.run_id))
        .where(condition, lead.rest)
        .order_by(*newest_first)
        .limit(bindparam("limit"))
        .cte("page")
    )


def _with_details_statement(page: Any) -> Prepared:
    """The page's runs joined with their parents and indexed values."""
    sv, links = t.search_values, t.subflow_links
    return Prepared(
        select(
            page,
            links.c.parent_flow_id,
            links.c.parent_run_id,
            sv.c.key.label("index_key"),
            sv.c.value.label("index_value"),
        ).select_from(
            page.outerjoin(links, links.c.child_run_id == page.c.run_id).outerjoin(
                sv, sv.c.run_id == page.c.run_id
            )
        )
    )


async def _with_details(
    db: Reader, statement: Prepared, params: dict[str, Any], order: Sequence[OrderKey]
) -> list[tuple[FoundRun, list[Any]]]:
    """Run a page's statement and gather each run with its indexed values, in ``order``."""
    # One hand-off to a reader thread, where the statement runs on a plain connection.
    rows = await db.scan(lambda conn: statement.tuples(conn, params))
    # The statement's columns: the page's (_COLUMNS, then a sort key per order key), then the
    # parent's IDs, then one indexed value (key and JSON) per row.
    keys = slice(len(_COLUMNS), len(_COLUMNS) + len(order))
    parent = len(_COLUMNS) + len(order)
    found: dict[str, tuple[FoundRun, list[Any]]] = {}
    for row in rows:
        entry = found.get(row[0])
        if entry is None:
            run_id, flow_id, flow_type, status, started_at, closed_at = row[: len(_COLUMNS)]
            run = FoundRun(
                run_id,
                flow_id,
                flow_type,
                status,
                started_at,
                closed_at,
                {},
                row[parent],
                row[parent + 1],
            )
            entry = found[row[0]] = (run, list(row[keys]))
        if row[parent + 2] is not None:
            entry[0].indexed[row[parent + 2]] = _index_value(row[parent + 3])
    # The page is small: order it here rather than have SQL sort the joined rows again.
    entries = list(found.values())
    for i in reversed(range(len(order))):
        entries.sort(key=lambda e: e[1][i], reverse=order[i].descending)
    for run, _ in entries:  # indexedAttributes in key order, whatever order the join gave
        if len(run.indexed) > 1:
            items = sorted(run.indexed.items())
            run.indexed.clear()
            run.indexed.update(items)
    return entries


def _index_value(text: str) -> Any:
    """Decode an indexed value's JSON; a KEYWORD_ARRAY's list is decoded anew each time (the
    caller may change it), other values, immutable, come from a memo (a page repeats them)."""
    if text.startswith("["):
        return json.loads(text)
    return _scalar(text)


@lru_cache(maxsize=4096)
def _scalar(text: str) -> Any:
    return json.loads(text)
