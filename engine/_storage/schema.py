"""Creating and upgrading the schema, on either database, by versioned migrations (Alembic).

Every start applies the migrations the database has not seen yet, in one transaction with the
check. On PostgreSQL several processes may start at once on one database: the upgrade runs
under a transaction-scoped advisory lock, so one process migrates while the others wait for it
and then find nothing left to do. On SQLite the writer's connection runs it before it takes
its first unit.

A SQLite file made by a build from before the migrations (tables, no version row) is adopted:
the baseline tables it lacks are created, its FULL_TEXT index is rebuilt in the baseline's
form (normalized tokens, see ``search.fulltext``), and it is stamped with the baseline
revision; the later revisions then apply as usual.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text

from engine._storage.search import fulltext
from engine._storage.tables import metadata

#: The advisory lock key of schema upgrades (any fixed 64-bit number: "dexlite" in ASCII).
SCHEMA_LOCK_KEY = 0x6465786C697465
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
#: The first revision: the schema the builds before migrations created (completed).
BASELINE = "0001"
#: The tables of the baseline revision. Adoption creates the missing ones from the models, so
#: a later revision that changes one of them must accept it already in its new shape (0004
#: does, for search_values).
BASELINE_TABLES = (
    "runs",
    "flows",
    "attributes",
    "step_executions",
    "step_counters",
    "step_waits",
    "channel_messages",
    "history",
    "subflow_links",
    "search_values",
    "search_keywords",
    "search_texts",
)


def upgrade(conn: Connection) -> None:
    """Bring the schema up to date inside the caller's transaction, on either database."""
    if conn.dialect.name == "postgresql":
        # A migration of a large database may take longer than any request's limit, and the
        # processes starting beside it wait for it on the advisory lock.
        conn.execute(text("SET LOCAL statement_timeout = 0"))
        conn.execute(text("SET LOCAL lock_timeout = 0"))
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
    current = current_revision(conn)
    if current == head_revision():
        return  # the common start: nothing to apply, no need to load the migrations' scripts
    config = _config(conn)
    legacy = conn.dialect.name == "sqlite" and current is None
    if legacy and inspect(conn).has_table("runs"):
        _adopt_sqlite(conn)
        command.stamp(config, BASELINE)
    command.upgrade(config, "head")


def upgrade_postgres(conn: Connection) -> None:
    """Bring a PostgreSQL database's schema up to date inside the caller's transaction."""
    upgrade(conn)


def upgrade_sqlite(conn: Connection) -> None:
    """Bring a SQLite database's schema up to date, in one transaction of its own.

    ``conn`` is the writer's connection, which manages its transactions by hand (AUTOCOMMIT
    at the driver); SQLite's DDL is transactional, so a crash leaves the old schema whole.
    """
    conn.exec_driver_sql("BEGIN IMMEDIATE")
    try:
        upgrade(conn)
    except BaseException:
        conn.exec_driver_sql("ROLLBACK")
        raise
    conn.exec_driver_sql("COMMIT")


def current_revision(conn: Connection) -> str | None:
    """Return the revision the database is at (None before any migration)."""
    return MigrationContext.configure(conn).get_current_revision()


@functools.cache
def head_revision() -> str:
    """Return the newest revision this build knows (read once per process)."""
    head = ScriptDirectory.from_config(_config(None)).get_current_head()
    assert head is not None, "no migrations found"
    return head


def _adopt_sqlite(conn: Connection) -> None:
    """Complete a pre-migration file to the baseline revision's schema."""
    present = set(inspect(conn).get_table_names())
    missing = [metadata.tables[name] for name in BASELINE_TABLES if name not in present]
    metadata.create_all(conn, tables=missing)
    # Those builds indexed raw text with FTS5's unicode61 tokenizer; the baseline indexes the
    # normalized tokens. Drop the old index (its triggers go with it), normalize, rebuild.
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {fulltext.FTS_TABLE}")
    for trigger in ("search_texts_ai", "search_texts_ad", "search_texts_au"):
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {trigger}")
    rows = conn.exec_driver_sql("SELECT id, body FROM search_texts").all()
    if rows:
        conn.exec_driver_sql(
            "UPDATE search_texts SET body = ? WHERE id = ?",
            [(fulltext.normalize(body), row_id) for row_id, body in rows],
        )
    for statement in _baseline()._SQLITE_FULL_TEXT:
        conn.exec_driver_sql(statement)
    fts = fulltext.FTS_TABLE
    conn.exec_driver_sql(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")


def _baseline() -> Any:
    """Return the baseline revision's module (its name starts with a digit)."""
    return importlib.import_module("engine._storage.migrations.versions.0001_baseline")


def _config(conn: Connection | None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config
