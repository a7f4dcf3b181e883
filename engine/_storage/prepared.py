"""Hot statements compiled once and run on the driver's own connection.

``Connection.execute`` costs SQLAlchemy tens of microseconds per statement beyond the driver's
own work (an execution context, parameter and result processing, result metadata). On the hot
path every commit unit pays that several times over. A :class:`Prepared` statement is a Core
statement compiled once per set of parameter keys, and run by the :class:`Driver` the
database registered for its engine (:func:`use_driver`): SQLite's runs it on the ``sqlite3``
connection under the SQLAlchemy one, PostgreSQL's on asyncpg, both inside the same
transaction (``sqlite/prepared_driver.py``, ``postgres/prepared_driver.py``). On an engine
with no driver (a tool's, a test's, or with the acceleration off) it goes through
``Connection.execute``.
Rows come back as tuples that also name their columns.

A prepared statement bypasses ``Connection.execute``, so its driver tells SQLAlchemy's
``before_cursor_execute`` listeners itself (with ``cursor`` and ``context`` None): SQL tracing,
the bench and tests see every statement through the usual event, without patching this module.
Without a listener that costs two attribute reads.

Only statements whose every parameter is either given or a literal bound in the statement are
prepared: a column default computed in Python would be skipped by the driver, so compiling one
raises at once (the tests run every prepared statement).
"""

from __future__ import annotations

import weakref
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import Connection, Engine
from sqlalchemy.sql import ClauseElement


class CompiledStatement:
    """One statement's SQLite text, the order of its parameters and how to fill them."""

    __slots__ = ("columns", "fixed", "order", "processors", "row", "sql")

    def __init__(self, statement: ClauseElement, dialect: Any, keys: Iterable[str] | None) -> None:
        compiled: Any = statement.compile(
            dialect=dialect, column_keys=None if keys is None else list(keys)
        )
        if compiled.insert_prefetch or compiled.update_prefetch:
            raise ValueError(f"a prepared statement cannot run Python column defaults: {compiled}")
        given = set(keys or ())
        required = given | {name for name, bind in compiled.binds.items() if bind.required}
        if any(compiled.binds[name].expanding for name in required if name in compiled.binds):
            raise ValueError(f"a prepared statement cannot take a list parameter: {compiled}")
        # Expanding IN lists of literal values become one placeholder per value here, once.
        expanded = compiled.construct_expanded_state(dict.fromkeys(required))
        self.sql: str = expanded.statement
        self.order: tuple[str, ...] = tuple(expanded.positiontup or ())
        self.fixed: dict[str, Any] = {
            name: expanded.parameters[name] for name in self.order if name not in required
        }
        self.processors: dict[str, Callable[[Any], Any]] = dict(expanded.processors)
        self.row: Any = None

    def arguments(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        fixed, processors = self.fixed, self.processors
        values = []
        for name in self.order:
            value = params[name] if name not in fixed else fixed[name]
            if name in processors and value is not None:
                value = processors[name](value)
            values.append(value)
        return tuple(values)

    def named_records(self, records: list[Any]) -> list[Any]:
        """Return asyncpg Records as tuples that also name their columns."""
        if self.row is None:
            self.row = namedtuple("Row", list(records[0].keys()), rename=True)  # type: ignore[misc]
        make = self.row._make
        return [make(r) for r in records]

    def named(self, description: Any, rows: list[tuple[Any, ...]]) -> list[Any]:
        if self.row is None:
            self.row = namedtuple("Row", [d[0] for d in description], rename=True)  # type: ignore[misc]
        make = self.row._make
        return [make(r) for r in rows]


class Driver(Protocol):
    """How prepared statements run on the connections of one engine (see :func:`use_driver`).

    Each method runs ``compiled`` with ``arguments`` (in the text's order) on the driver
    connection under ``conn``, in its transaction, having told the ``before_cursor_execute``
    listeners of ``conn``."""

    def rows(
        self, conn: Connection, compiled: CompiledStatement, arguments: Any
    ) -> tuple[list[Any], Any]:
        """Return every row, and the cursor's description of their columns (None when the
        rows name their columns themselves)."""

    def tuples(self, conn: Connection, compiled: CompiledStatement, arguments: Any) -> list[Any]:
        """Return every row as a plain tuple."""

    def run(self, conn: Connection, compiled: CompiledStatement, arguments: Any) -> int:
        """Run a statement that returns no rows; return how many rows it changed."""

    def many(self, conn: Connection, compiled: CompiledStatement, rows: list[Any]) -> None:
        """Run the statement once per arguments of ``rows``."""


#: The driver of each engine's connections, by its dialect (each engine has its own).
_DRIVERS: weakref.WeakKeyDictionary[Any, Driver] = weakref.WeakKeyDictionary()


def use_driver(engine: Engine, driver: Driver | None) -> None:
    """Run prepared statements on ``engine``'s connections with ``driver``; None: through
    ``Connection.execute`` like any other statement."""
    if driver is None:
        _DRIVERS.pop(engine.dialect, None)
    else:
        _DRIVERS[engine.dialect] = driver


class Prepared:
    """A Core statement compiled once per key set, run by its engine's driver."""

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        # By dialect too: one process may reach SQLite and PostgreSQL (the bench does).
        self._compiled: dict[tuple[str, tuple[str, ...] | None], CompiledStatement] = {}

    def _for(self, conn: Connection, keys: tuple[str, ...] | None) -> CompiledStatement:
        key = (conn.dialect.name, keys)
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = CompiledStatement(self.statement, conn.dialect, keys)
        return found

    def compiled(self, dialect: Any) -> CompiledStatement:
        """The statement compiled for ``dialect``: its text (``sql``), ``arguments(params)``
        in the text's order, and ``named_records(records)`` for asyncpg's rows."""
        key = (dialect.name, None)
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = CompiledStatement(self.statement, dialect, None)
        return found

    def rows(self, conn: Connection, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run the statement and return all its rows."""
        driver = _DRIVERS.get(conn.dialect)
        if driver is None:
            return list(conn.execute(self.statement, dict(params or {})).all())
        compiled = self._for(conn, None)
        found, description = driver.rows(conn, compiled, compiled.arguments(params or {}))
        if not found:
            return []
        if description is None:
            return compiled.named_records(found)
        return compiled.named(description, found)

    def tuples(self, conn: Connection, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run the statement and return its rows as plain tuples, in the statement's column
        order (cheaper than :meth:`rows` for many rows)."""
        driver = _DRIVERS.get(conn.dialect)
        if driver is None:
            return [tuple(row) for row in conn.execute(self.statement, dict(params or {}))]
        compiled = self._for(conn, None)
        return driver.tuples(conn, compiled, compiled.arguments(params or {}))

    def first(self, conn: Connection, params: Mapping[str, Any] | None = None) -> Any:
        """Run the statement and return its first row, or None."""
        found = self.rows(conn, params)
        return found[0] if found else None

    def scalar(self, conn: Connection, params: Mapping[str, Any] | None = None) -> Any:
        """Run the statement and return the first column of its one row."""
        row = self.first(conn, params)
        if row is None:
            raise LookupError(f"no row from {self.statement}")
        return row[0]

    def run(self, conn: Connection, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement that returns no rows; return how many rows it changed."""
        driver = _DRIVERS.get(conn.dialect)
        if driver is None:
            return int(conn.execute(self.statement, dict(params or {})).rowcount)
        compiled = self._for(conn, None)
        return driver.run(conn, compiled, compiled.arguments(params or {}))

    def many(self, conn: Connection, params: Sequence[Mapping[str, Any]]) -> None:
        """Run an INSERT (or another statement) once per parameter set, all with the same keys.

        An INSERT compiles to the columns its parameters name, as ``Connection.execute`` would.
        """
        if not params:
            return
        driver = _DRIVERS.get(conn.dialect)
        if driver is None:
            conn.execute(self.statement, [dict(p) for p in params])
            return
        compiled = self._for(conn, tuple(sorted(params[0])))
        driver.many(conn, compiled, [compiled.arguments(p) for p in params])
