"""When the database is unavailable: how long to wait for it, and which of its errors mean it.

A caller can do nothing about a server that is down, restarting, out of connections or disk,
a statement or lock wait that ran past its timeout, or an SQLite file that cannot be written:
it should retry later. Those become :class:`UnavailableError` (``UNAVAILABLE``, HTTP 503 with
``Retry-After``) at the database's edge, so every caller of the engine sees one retryable error
instead of a driver exception it would report as a bug. Anything else (a constraint violated, a
corrupt file) is left alone: it is not an outage.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from engine.errors import EngineError, UnavailableError


@dataclass(frozen=True)
class PostgresTimeouts:
    """How long the engine waits on PostgreSQL before answering UnavailableError (seconds;
    0 turns a server-side limit off)."""

    #: Reaching the server and logging in.
    connect: float = 5.0
    #: Waiting for a free pooled connection when every one is in use.
    pool: float = 10.0
    #: One statement (the server cancels it: ``statement_timeout``).
    statement: float = 30.0
    #: One wait for a row or advisory lock (``lock_timeout``).
    lock: float = 10.0


#: SQLSTATE classes and codes of an unavailable PostgreSQL server, with what each means.
_CLASSES = {
    "08": "the connection to the database failed",
}
_STATES = {
    "53000": "the database ran out of a resource",
    "53100": "the database's disk is full",
    "53200": "the database ran out of memory",
    "53300": "the database has no free connection slot",
    "57014": "a database statement ran past the statement timeout",
    "57P01": "the database is shutting down",
    "57P02": "the database is restarting after a crash",
    "57P03": "the database is starting up and cannot accept connections yet",
    "55P03": "a database lock wait ran past the lock timeout",
    "58030": "the database had an I/O error",
    "25006": "the database is read-only (a standby)",
}
#: SQLite result codes (the primary code: the low byte of an extended one) of a file that
#: cannot be written or reached now; a corrupt file (SQLITE_CORRUPT) is not among them.
_SQLITE_CODES = {
    sqlite3.SQLITE_IOERR: "the database file had an I/O error",
    sqlite3.SQLITE_FULL: "the disk holding the database is full",
    sqlite3.SQLITE_READONLY: "the database file is read-only",
    sqlite3.SQLITE_CANTOPEN: "the database file cannot be opened",
    sqlite3.SQLITE_BUSY: "another process held the database's lock past the busy timeout",
}


def unavailable(exc: BaseException, *, connecting: bool = False) -> UnavailableError | None:
    """Return the UnavailableError ``exc`` amounts to, or None when it is not an outage.

    ``connecting``: ``exc`` came out of reaching the database (a pool checkout, a connect), so
    a plain OSError or TimeoutError there means the server cannot be reached.
    """
    if isinstance(exc, EngineError):
        return exc if isinstance(exc, UnavailableError) else None
    reason = _reason(exc, connecting)
    if reason is None:
        return None
    error = UnavailableError(f"{reason}; retry shortly ({type(exc).__name__}: {_first_line(exc)})")
    error.__cause__ = exc
    return error


def raise_if_unavailable(exc: BaseException, *, connecting: bool = False) -> None:
    """Raise the UnavailableError ``exc`` amounts to, if it is an outage; else return (the
    caller raises ``exc`` itself)."""
    error = unavailable(exc, connecting=connecting)
    if error is exc:
        raise exc
    if error is not None:
        raise error from exc


def _reason(exc: BaseException, connecting: bool) -> str | None:
    if isinstance(exc, PoolTimeoutError):
        return "no database connection became free within the pool timeout"
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return "the connection to the database was lost"
        return _reason(exc.orig, connecting) if exc.orig is not None else None
    state = _sqlstate(exc)
    if state is not None:
        return _STATES.get(state) or _CLASSES.get(state[:2])
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return None if code is None else _SQLITE_CODES.get(code & 0xFF)
    if isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc):
        return "the connection to the database was lost"
    if isinstance(exc, ConnectionError):
        return "the connection to the database was lost"
    if connecting and isinstance(exc, (OSError, TimeoutError)):
        return "the database cannot be reached"
    return None


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE a PostgreSQL driver reported for ``exc``, if any."""
    candidate: Any = exc
    for _ in range(3):  # the driver's error may sit behind an adapter's
        if candidate is None:
            return None
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str) and len(code) == 5:
            return code
        candidate = candidate.__cause__
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else "no detail"
