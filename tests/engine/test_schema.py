"""The schema comes from the migrations on both databases, matches the models, and a SQLite
file from the builds before migrations is adopted with its data searchable."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from engine import (
    Attribute,
    AttributeIndex,
    EngineConfig,
    Flow,
    IndexType,
    StartFlowOptions,
    StepList,
)
from engine._storage import schema
from engine._storage.tables import metadata
from tests.conftest import running_engine
from tests.support.backends import ON_POSTGRES, sqlite_only


class NoteFlow(Flow[None]):
    note = Attribute("note", str, index=AttributeIndex(IndexType.FULL_TEXT, "text1"))

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


def _differences(conn: Connection) -> list[Any]:
    """What the migrated schema lacks or has beyond the models (the full-text index
    structures live only in the migrations: the FTS5 tables, the ``lexemes`` column)."""

    def include(obj: Any, name: str | None, kind: str, reflected: bool, other: Any) -> bool:
        if kind == "table" and (name or "").startswith("search_texts_fts"):
            return False
        return not (kind in ("column", "index") and name in ("lexemes", "ix_search_texts_lexemes"))

    context = MigrationContext.configure(
        conn, opts={"compare_type": True, "include_object": include}
    )
    return list(compare_metadata(context, metadata))


async def test_the_migrated_schema_is_the_models_schema_at_the_head_revision(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([NoteFlow()], engine_config):
        pass  # starting applies the migrations
    db = create_async_engine(engine_config.database_url)
    try:
        async with db.connect() as conn:
            found = await conn.run_sync(_differences)
            revision = await conn.run_sync(schema.current_revision)
    finally:
        await db.dispose()
    assert found == []
    assert revision == schema.head_revision()


async def test_a_restart_finds_nothing_to_migrate_and_keeps_the_data(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([NoteFlow()], engine_config) as eng:
        options = StartFlowOptions(initial_attributes={"note": "Crème brûlée, twice"})
        await eng.start_flow(NoteFlow, "dessert", options=options)
    async with running_engine([NoteFlow()], engine_config) as eng:
        page = await eng.search_flows("text1 = 'creme brulee'")
    assert [f.flow_id for f in page.flows] == ["dessert"]


# What the builds before migrations created for FULL_TEXT: FTS5 over the raw text.
_LEGACY_FTS = (
    "CREATE VIRTUAL TABLE search_texts_fts USING fts5(body, content='search_texts', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER search_texts_ai AFTER INSERT ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(rowid, body) VALUES (new.id, new.body); END",
)


# What revisions after the baseline added (a pre-migration file has none of it).
_LATER_REVISIONS_UNDONE = (
    "DROP INDEX ix_steps_claimable",
    "DROP INDEX ix_runs_timeout",
    "ALTER TABLE step_executions DROP COLUMN claimed_by",
    "ALTER TABLE step_executions DROP COLUMN fence",
    "ALTER TABLE step_executions DROP COLUMN held_locks",
    "DROP TABLE processes",
    "DROP TABLE attribute_locks",
    "DROP TABLE lock_waiters",
)


@sqlite_only("adopting a file made before migrations existed (PostgreSQL never had one)")
async def test_a_file_from_before_migrations_is_adopted_and_its_text_stays_searchable(
    engine_config: EngineConfig, tmp_path: Path
) -> None:
    async with running_engine([NoteFlow()], engine_config) as eng:
        options = StartFlowOptions(initial_attributes={"note": "Café-CRÈME №5"})
        await eng.start_flow(NoteFlow, "coffee", options=options)
    # Turn the file back into what an old build left: raw text, the old index, no version.
    path = engine_config.database_url.split("///", 1)[1]
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE alembic_version")
        raw.execute("DROP TABLE search_texts_fts")
        for trigger in ("search_texts_ai", "search_texts_ad", "search_texts_au"):
            raw.execute(f"DROP TRIGGER {trigger}")
        raw.execute("UPDATE search_texts SET body = 'Café-CRÈME №5'")
        raw.execute("DROP TABLE subflow_links")  # a table those builds did not have yet
        for statement in _LATER_REVISIONS_UNDONE:
            raw.execute(statement)
        for statement in _LEGACY_FTS:
            raw.execute(statement)
        raw.execute("INSERT INTO search_texts_fts(search_texts_fts) VALUES ('rebuild')")
    async with running_engine([NoteFlow()], engine_config) as eng:
        by_token = await eng.search_flows("text1 = 'cafe'")
        by_phrase = await eng.search_flows("text1 = 'creme no5'")
        missing = await eng.search_flows("text1 = 'tea'")
    with sqlite3.connect(path) as raw:
        revision = raw.execute("SELECT version_num FROM alembic_version").fetchall()
        body = raw.execute("SELECT body FROM search_texts").fetchall()
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert [f.flow_id for f in by_token.flows] == ["coffee"]
    assert [f.flow_id for f in by_phrase.flows] == ["coffee"]
    assert missing.flows == []
    assert revision == [(schema.head_revision(),)]
    assert body == [("cafe creme no5",)]
    assert "subflow_links" in tables
    assert not ON_POSTGRES
