"""The settings every database takes: how to reach it and how to tune it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine._storage.outage import PostgresTimeouts


@dataclass(frozen=True)
class DatabaseSettings:
    """How to reach and tune the database."""

    url: str
    sqlite_synchronous: str = "FULL"
    busy_timeout_ms: int = 10_000
    max_batch: int = 128
    read_pool_size: int = 8
    #: PostgreSQL: the size of each of the two pools (commit units; one-statement transactions).
    pool_size: int = 20
    #: PostgreSQL: how long to wait for the server before a call fails as unavailable.
    timeouts: PostgresTimeouts = PostgresTimeouts()
    #: PostgreSQL: one-statement commits that arrive together go together (commit_groups).
    group_commits: bool = True
    #: PostgreSQL: snapshot reads that arrive together go together (read_groups).
    group_reads: bool = True
    #: SQLite: told how many units each group commit carried (called on the event loop).
    on_batch: Callable[[int], None] | None = None
    #: SQLite: given each committed unit's result, in commit order, before its caller hears.
    on_committed: Callable[[Any], None] | None = None
    #: SQLite: told, as a batch's COMMIT is handed to the writer's thread, the results of its
    #: units (None when they ran on the thread: unknown); then ``on_settled`` once the batch
    #: ended and its committed results went to ``on_committed``. Between the two, reads of the
    #: database may already see what those units wrote.
    on_committing: Callable[[list[Any] | None], None] | None = None
    on_settled: Callable[[], None] | None = None
    #: SQLite: short reads on the event loop's connection (False: on reader threads).
    reads_on_loop: bool = True
    #: SQLite: prepared statements on the driver's cursor (False: through SQLAlchemy).
    prepared_statements: bool = True
