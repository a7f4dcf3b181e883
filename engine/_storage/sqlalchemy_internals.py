"""Prepared statements straight on asyncpg, inside a SQLAlchemy Connection's transaction; and
the one module of ``engine`` that touches SQLAlchemy's internals.

SQLAlchemy spends about 70 microseconds of CPU on each statement it runs through asyncpg
beyond asyncpg's own work (an execution context, a cursor adapter, parameter and result
processing), more than a round trip to a local server costs asyncpg itself. A
:class:`~engine._storage.prepared.Prepared` statement is compiled once; here it runs on the
asyncpg connection under the SQLAlchemy one (asyncpg keeps it prepared per connection), in the
transaction SQLAlchemy began, which is started first if the unit has not run a statement yet.

Errors come back as SQLAlchemy's: the driver's error translated as SQLAlchemy would, wrapped
in ``DBAPIError`` (so replays after a deadlock and the outage rules see what they expect), and
a lost connection is invalidated, so the pool never hands it out again.

No public API of SQLAlchemy reaches these figures, so this module uses, and is the only one in
``engine`` to use, these internals of SQLAlchemy:

- the asyncpg adapter's ``_transaction`` (the asyncpg transaction SQLAlchemy tracks, None until
  a unit's first statement) and ``_start_transaction()`` (begins it as SQLAlchemy does, so that
  SQLAlchemy's COMMIT or ROLLBACK ends it);
- the adapter's ``_handle_exception()`` (translates a driver error into the adapter's DB-API
  error, forgetting a lost connection's transaction) and the undocumented
  ``DBAPIError.instance()`` (wraps it as ``Connection.execute`` does);
- ``_has_events`` and ``dispatch`` of a Connection and an Engine: :func:`announce` and
  :func:`announce_outside` tell ``before_cursor_execute`` listeners of a statement run outside
  ``Connection.execute``, at the cost of two attribute reads when nothing listens;
- ``sqlalchemy.util.greenlet_spawn``: :data:`run_in_greenlet` runs a synchronous unit on an async
  engine's connection, check-out and check-in included, in one greenlet (an AsyncConnection
  spawns one per call: about 0.1 ms of CPU per unit more, measured).

The awaits go through the adapter's documented ``run_async``. Should a release of SQLAlchemy
lack the adapter's members, :data:`AVAILABLE` is False and statements go through SQLAlchemy as
before. ``tests/postgres/test_sqlalchemy_internals.py`` exercises each internal above against
the installed SQLAlchemy and asyncpg, and says which one changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.util import greenlet_spawn

try:
    from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection as _Adapter

    AVAILABLE = all(
        hasattr(_Adapter, name)
        for name in ("_transaction", "_start_transaction", "_handle_exception", "run_async")
    )
except ImportError:  # pragma: no cover - asyncpg is a dependency
    AVAILABLE = False

#: Run ``fn(*args)``, synchronous code that uses a Connection of an async engine, and return
#: its result: its statements await the driver from inside ``fn`` (SQLAlchemy's greenlet).
run_in_greenlet = greenlet_spawn


def on_asyncpg(conn: Connection) -> bool:
    """True when ``conn`` is SQLAlchemy's asyncpg dialect and statements may go direct."""
    dialect = conn.dialect
    return AVAILABLE and dialect.name == "postgresql" and dialect.driver == "asyncpg"


def fetch(conn: Connection, sql: str, args: Sequence[Any]) -> list[Any]:
    """Run ``sql`` with positional ``args`` and return its rows (asyncpg Records)."""
    adapter = _begun(conn, sql, args)
    try:
        rows: list[Any] = adapter.run_async(lambda driver: driver.fetch(sql, *args))
    except Exception as error:
        _raise(conn, adapter, error, sql, args)
    return rows


def execute(conn: Connection, sql: str, args: Sequence[Any]) -> int:
    """Run ``sql``, which returns no rows, and return how many rows it changed."""
    adapter = _begun(conn, sql, args)
    try:
        status: str = adapter.run_async(lambda driver: driver.execute(sql, *args))
    except Exception as error:
        _raise(conn, adapter, error, sql, args)
    count = status.rsplit(" ", 1)[-1]
    return int(count) if count.isdigit() else -1


def executemany(conn: Connection, sql: str, args: Sequence[Sequence[Any]]) -> None:
    """Run ``sql`` once per argument list, all sent in one round trip."""
    adapter = _begun(conn, sql, args)
    try:
        adapter.run_async(lambda driver: driver.executemany(sql, args))
    except Exception as error:
        _raise(conn, adapter, error, sql, args)


def announce(conn: Connection, sql: str, parameters: Any, many: bool) -> None:
    """Call the ``before_cursor_execute`` listeners of ``conn``, if it has any, as
    ``Connection.execute`` would (``cursor`` and ``context`` None: there are none here)."""
    # Both flags stay False until a listener is added (to the engine or its class): the
    # common case reads two attributes and goes on.
    if (conn._has_events or conn.engine._has_events) and conn.dispatch.before_cursor_execute:
        conn.dispatch.before_cursor_execute(conn, None, sql, parameters, None, many)


def announce_outside(engine: Engine, sql: str, args: Sequence[Any]) -> None:
    """Call ``engine``'s ``before_cursor_execute`` listeners, if it has any, for a statement
    run outside SQLAlchemy (``conn``, ``cursor`` and ``context`` None: there are none)."""
    if engine._has_events and engine.dispatch.before_cursor_execute:
        engine.dispatch.before_cursor_execute(None, None, sql, args, None, False)


def _begun(conn: Connection, sql: str, args: Any) -> Any:
    """Return SQLAlchemy's adapter of the asyncpg connection, with the transaction SQLAlchemy
    tracks begun (unless the connection runs each statement on its own)."""
    adapter: Any = conn.connection.dbapi_connection  # raises, as a statement would, if invalid
    if adapter._transaction is None:
        try:
            adapter.run_async(lambda _driver: adapter._start_transaction())  # not in autocommit
        except Exception as error:
            _raise(conn, adapter, error, sql, args)
    return adapter


def _raise(conn: Connection, adapter: Any, error: Exception, sql: str, args: Any) -> None:
    """Raise ``error`` as SQLAlchemy raises a driver's error, invalidating a lost connection."""
    try:
        adapter._handle_exception(error)
    except Exception as translated:
        dialect = conn.dialect
        lost = dialect.is_disconnect(translated, adapter, None)  # type: ignore[arg-type]
        if lost:
            conn.invalidate(translated)
        raise DBAPIError.instance(
            sql,
            args,
            translated,
            dialect.loaded_dbapi.Error,
            connection_invalidated=lost,
            dialect=dialect,
        ) from error
    raise error  # pragma: no cover - the adapter always raises
