"""Prepared statements on SQLite's own ``sqlite3`` cursor (see ``prepared``).

The statement runs on the stdlib connection under the SQLAlchemy one, inside the transaction
that connection's unit is in: it skips SQLAlchemy's per-statement work, which was the largest
part of the writer's time.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from engine._storage.prepared import CompiledStatement
from engine._storage.sqlalchemy_internals import announce


class CursorDriver:
    """Runs prepared statements on the ``sqlite3`` connection under a SQLAlchemy one."""

    def rows(
        self, conn: Connection, compiled: CompiledStatement, arguments: Any
    ) -> tuple[list[Any], Any]:
        """Return every row, and the cursor's description of their columns."""
        cursor = _cursor(conn, compiled, arguments)
        return cursor.fetchall(), cursor.description

    def tuples(self, conn: Connection, compiled: CompiledStatement, arguments: Any) -> list[Any]:
        """Return every row as a plain tuple."""
        fetched: list[Any] = _cursor(conn, compiled, arguments).fetchall()
        return fetched

    def run(self, conn: Connection, compiled: CompiledStatement, arguments: Any) -> int:
        """Run a statement that returns no rows; return how many rows it changed."""
        return int(_cursor(conn, compiled, arguments).rowcount)

    def many(self, conn: Connection, compiled: CompiledStatement, rows: list[Any]) -> None:
        """Run the statement once per arguments of ``rows``."""
        announce(conn, compiled.sql, rows, True)
        conn.connection.driver_connection.executemany(  # type: ignore[union-attr]
            compiled.sql, rows
        )


def _cursor(conn: Connection, compiled: CompiledStatement, arguments: Any) -> Any:
    announce(conn, compiled.sql, arguments, False)
    return conn.connection.driver_connection.execute(  # type: ignore[union-attr]
        compiled.sql, arguments
    )


#: The one driver every SQLite engine of the database uses.
CURSOR = CursorDriver()
