"""The choice of database by URL: SQLite or PostgreSQL."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from engine._storage.database_settings import DatabaseSettings
from engine._storage.postgres.database import PostgresDatabase
from engine._storage.sqlite.database import SQLiteDatabase
from engine.errors import InvalidArgumentError

__all__ = ["DatabaseSettings", "open_database"]


def open_database(
    settings: DatabaseSettings, claimant: str = ""
) -> SQLiteDatabase | PostgresDatabase:
    """Return the Database for ``settings.url``: SQLite, or PostgreSQL (``postgresql+asyncpg``).

    ``claimant`` names this process on a PostgreSQL database (its commits claim their Steps).
    Raises InvalidArgumentError naming ``databaseUrl`` for any other URL.
    """
    try:
        backend = make_url(settings.url).get_backend_name()
    except Exception as exc:  # an unparsable URL is the caller's input error
        raise InvalidArgumentError(
            f"databaseUrl is not a database URL: {exc}", field="databaseUrl"
        ) from None
    if backend == "sqlite":
        return SQLiteDatabase(settings)
    if backend == "postgresql":
        return PostgresDatabase(
            settings.url,
            claimant=claimant,
            pool_size=settings.pool_size,
            timeouts=settings.timeouts,
            group_commits=settings.group_commits,
            group_reads=settings.group_reads,
        )
    raise InvalidArgumentError(
        f"databaseUrl must be sqlite+aiosqlite:///... or postgresql+asyncpg://..., got {backend}",
        field="databaseUrl",
    )
