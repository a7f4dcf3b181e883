"""Prepared statements straight on asyncpg, inside a SQLAlchemy Connection's transaction.

SQLAlchemy spends about 70 microseconds of CPU on each statement it runs through asyncpg
beyond asyncpg's own work (an execution context, a cursor adapter, parameter and result
processing), more than a round trip to a local server costs asyncpg itself. A
:class:`~engine._storage.prepared.Prepared` statement is compiled once; here it runs on the
asyncpg connection under the SQLAlchemy one (asyncpg keeps it prepared per connection), in the
transaction SQLAlchemy began, which is started first if the unit has not run a statement yet.

Errors come back as SQLAlchemy's: the driver's error translated as SQLAlchemy would, wrapped
in ``DBAPIError`` (so replays after a deadlock and the outage rules see what they expect), and
a lost connection is invalidated, so the pool never hands it out again.

This reaches two private members of SQLAlchemy's asyncpg adapter (the transaction it tracks,
and how it starts one); :data:`AVAILABLE` is False, and statements go through SQLAlchemy as
before, should a release of SQLAlchemy lack them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.util import await_

try:
    from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection as _Adapter

    AVAILABLE = all(hasattr(_Adapter, name) for name in ("_start_transaction", "_handle_exception"))
except ImportError:  # pragma: no cover - asyncpg is a dependency
    AVAILABLE = False


def on_asyncpg(conn: Connection) -> bool:
    """True when ``conn`` is SQLAlchemy's asyncpg dialect and statements may go direct."""
    dialect = conn.dialect
    return AVAILABLE and dialect.name == "postgresql" and dialect.driver == "asyncpg"


def fetch(conn: Connection, sql: str, args: Sequence[Any]) -> list[Any]:
    """Run ``sql`` with positional ``args`` and return its rows (asyncpg Records)."""
    driver, adapter = _begun(conn, sql, args)
    try:
        rows: list[Any] = await_(driver.fetch(sql, *args))
    except Exception as error:
        _raise(conn, adapter, error, sql, args)
    return rows


def execute(conn: Connection, sql: str, args: Sequence[Any]) -> int:
    """Run ``sql``, which returns no rows, and return how many rows it changed."""
    driver, adapter = _begun(conn, sql, args)
    try:
        status: str = await_(driver.execute(sql, *args))
    except Exception as error:
        _raise(conn, adapter, error, sql, args)
    count = status.rsplit(" ", 1)[-1]
    return int(count) if count.isdigit() else -1


def executemany(conn: Connection, sql: str, args: Sequence[Sequence[Any]]) -> None:
    """Run ``sql`` once per argument list, all sent in one round trip."""
    driver, adapter = _begun(conn, sql, args)
    try:
        await_(driver.executemany(sql, args))
    except Exception as error:
        _raise(conn, adapter, error, sql, args)


def _begun(conn: Connection, sql: str, args: Any) -> tuple[Any, Any]:
    """Return the asyncpg connection and SQLAlchemy's adapter of it, with the transaction
    SQLAlchemy tracks begun (unless the connection runs each statement on its own)."""
    fairy: Any = conn.connection  # raises, as any statement would, on an invalidated one
    adapter = fairy.dbapi_connection
    if adapter._transaction is None:
        try:
            await_(adapter._start_transaction())  # nothing to do in autocommit
        except Exception as error:
            _raise(conn, adapter, error, sql, args)
    return fairy.driver_connection, adapter


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
