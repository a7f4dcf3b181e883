"""FULL_TEXT search: the one dialect-specific piece of SearchFlows (SQLite FTS5 here).

``search_texts`` (in ``tables``) holds one row per run and FULL_TEXT key with the text; it is
plain, dialect-neutral SQL. On SQLite an FTS5 index over it, kept in step by triggers, answers
token queries. A PostgreSQL version would replace :func:`attach` with a generated ``tsvector``
column and a GIN index, and :func:`matching_runs` with ``@@ plainto_tsquery(...)``; nothing
else in the compiler or the index writer needs to change.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import DDL, Table, column, event, select, table

FTS_TABLE = "search_texts_fts"

# External-content FTS5: the text is stored once (in search_texts) and the index follows it
# through triggers, so the index writer only ever upserts or deletes search_texts rows.
# unicode61 folds case and (with remove_diacritics 2) accents, so 'Cafe' finds 'café'.
_SQLITE_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    "body, content='search_texts', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS search_texts_ai AFTER INSERT ON search_texts BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER IF NOT EXISTS search_texts_ad AFTER DELETE ON search_texts BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, body) VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER IF NOT EXISTS search_texts_au AFTER UPDATE ON search_texts BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, body) VALUES ('delete', old.id, old.body); "
    f"INSERT INTO {FTS_TABLE}(rowid, body) VALUES (new.id, new.body); END",
)

_fts = table(FTS_TABLE, column("rowid"), column("body"))


def attach(texts: Table) -> None:
    """Create the full-text index right after ``texts`` is created (SQLite only)."""
    for statement in _SQLITE_DDL:
        ddl = DDL(statement).execute_if(dialect="sqlite")  # type: ignore[no-untyped-call]
        event.listen(texts, "after_create", ddl)


def phrase(text: str) -> str:
    """Return an FTS5 query matching ``text`` as a token (or a phrase of several tokens).

    The whole value becomes one quoted FTS5 string, so operators or column filters in it are
    just text; the result is still passed as a bound parameter, never spliced into SQL.
    """
    return '"' + text.replace('"', '""') + '"'


def matching_runs(texts: Table, key: str, text: str) -> Any:
    """Return a SELECT of the run IDs whose FULL_TEXT ``key`` contains the token(s) ``text``."""
    return (
        select(texts.c.run_id)
        .select_from(texts.join(_fts, _fts.c.rowid == texts.c.id))
        .where(_fts.c.body.match(phrase(text)), texts.c.key == key)
    )
