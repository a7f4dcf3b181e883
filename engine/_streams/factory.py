"""Chooses the Stream Store a config's backend names and checks where it would live."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from engine._streams.memory_store import MemoryStreamStore
from engine._streams.store_interface import StreamStore
from engine.errors import InvalidArgumentError
from engine.stream import StreamStoreConfig

if TYPE_CHECKING:
    from engine.clock import Clock

POSTGRES_URL_FIELD = "streamPostgresUrl"


def stream_store(
    config: StreamStoreConfig,
    clock: Clock,
    database_url: str | None = None,
    on_trim_done: Callable[[], None] = lambda: None,
) -> StreamStore | None:
    """Return the store ``config.backend`` names, not yet open (None when disabled).

    ``database_url`` is the engine's database: the ``postgres`` store lives there unless
    ``config.postgres_url`` names another. Raises InvalidArgumentError naming
    ``streamPostgresUrl`` when the ``postgres`` store has no PostgreSQL database to use.
    """
    if config.backend == "disabled":
        return None
    if config.backend == "memory":
        return MemoryStreamStore(config, clock, on_trim_done)
    # Imported here: a server on the memory store never loads a network client.
    if config.backend == "redis":
        from engine._streams.redis_store import RedisStreamStore

        return RedisStreamStore(config, clock, on_trim_done)
    from engine._streams.postgres_store import PostgresStreamStore

    return PostgresStreamStore(config, clock, postgres_dsn(config, database_url), on_trim_done)


def postgres_dsn(config: StreamStoreConfig, database_url: str | None) -> str:
    """Return the asyncpg DSN of the ``postgres`` store's database: ``config.postgres_url``,
    else the engine's ``database_url`` (``postgresql+asyncpg://`` becomes ``postgresql://``)."""
    chosen = config.postgres_url or database_url
    if not chosen:
        raise InvalidArgumentError(
            "the postgres Stream Store needs a PostgreSQL database: set its postgres_url "
            "(DEXLITE_STREAM__POSTGRES_URL)",
            field=POSTGRES_URL_FIELD,
        )
    try:
        url = make_url(chosen)
    except ArgumentError as exc:
        raise InvalidArgumentError(
            f"the postgres Stream Store's database URL is not a URL: {exc}",
            field=POSTGRES_URL_FIELD,
        ) from None
    backend = url.get_backend_name()
    if backend != "postgresql":
        if config.postgres_url:
            detail = f"the Stream Store's postgres_url must be a postgresql:// URL, not {backend}"
        else:
            detail = (
                f"the postgres Stream Store cannot live in the engine's {backend} database: "
                "set its postgres_url (DEXLITE_STREAM__POSTGRES_URL) to a PostgreSQL "
                "database, or choose stream store backend 'memory' or 'redis'"
            )
        raise InvalidArgumentError(detail, field=POSTGRES_URL_FIELD)
    return url.set(drivername="postgresql").render_as_string(hide_password=False)
