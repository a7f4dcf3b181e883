"""Prepared statements straight on asyncpg (see ``prepared``): asyncpg keeps each prepared
per connection, and the statement runs in the transaction SQLAlchemy began
(``sqlalchemy_internals`` says how)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from engine._storage import sqlalchemy_internals as internals
from engine._storage.prepared import CompiledStatement


class AsyncpgDriver:
    """Runs prepared statements on the asyncpg connection under a SQLAlchemy one."""

    def rows(
        self, conn: Connection, compiled: CompiledStatement, arguments: Any
    ) -> tuple[list[Any], None]:
        """Return every row (asyncpg's records name their columns)."""
        internals.announce(conn, compiled.sql, arguments, False)
        return internals.fetch(conn, compiled.sql, arguments), None

    def tuples(self, conn: Connection, compiled: CompiledStatement, arguments: Any) -> list[Any]:
        """Return every row as a plain tuple."""
        internals.announce(conn, compiled.sql, arguments, False)
        return [tuple(record) for record in internals.fetch(conn, compiled.sql, arguments)]

    def run(self, conn: Connection, compiled: CompiledStatement, arguments: Any) -> int:
        """Run a statement that returns no rows; return how many rows it changed."""
        internals.announce(conn, compiled.sql, arguments, False)
        return internals.execute(conn, compiled.sql, arguments)

    def many(self, conn: Connection, compiled: CompiledStatement, rows: list[Any]) -> None:
        """Run the statement once per arguments of ``rows``, in one round trip."""
        internals.announce(conn, compiled.sql, rows, True)
        internals.executemany(conn, compiled.sql, rows)


#: The one driver every PostgreSQL engine of the database uses (when the internals it relies
#: on are there: ``sqlalchemy_internals.AVAILABLE``).
ASYNCPG = AsyncpgDriver()
