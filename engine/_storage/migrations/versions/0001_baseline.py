"""The baseline schema: Flows, runs, Steps, Attributes, Channels, SubFlows, history, search.

Revision ID: 0001
Revises: -
Create Date: 2026-12-01

Written out in full (not derived from the models at run time), so that this revision creates
the same tables forever; later revisions change them. Times are integer microseconds. Every
string column uses the "C" collation on PostgreSQL, so strings order by code point as on
SQLite (SearchFlows' comparisons, STARTS_WITH ranges and page tokens rely on it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STR = sa.String().with_variant(sa.String(collation="C"), "postgresql")
TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
MICROS = sa.BigInteger()
# INTEGER PRIMARY KEY on SQLite (the rowid), a 64-bit serial on PostgreSQL.
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# FULL_TEXT on SQLite: an external-content FTS5 table over the normalized bodies of
# search_texts (tokens joined by single spaces, so the ascii tokenizer only splits on them),
# kept in step by triggers.
_SQLITE_FULL_TEXT = (
    "CREATE VIRTUAL TABLE search_texts_fts USING fts5("
    "body, content='search_texts', content_rowid='id', tokenize='ascii')",
    "CREATE TRIGGER search_texts_ai AFTER INSERT ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER search_texts_ad AFTER DELETE ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(search_texts_fts, rowid, body) "
    "VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER search_texts_au AFTER UPDATE ON search_texts BEGIN "
    "INSERT INTO search_texts_fts(search_texts_fts, rowid, body) "
    "VALUES ('delete', old.id, old.body); "
    "INSERT INTO search_texts_fts(rowid, body) VALUES (new.id, new.body); END",
)
# FULL_TEXT on PostgreSQL: a generated tsvector of the tokens, made without the text-search
# parser (array_to_tsvector), each token cut to 255 characters (a lexeme holds at most 2047
# bytes), with a GIN index. E'' keeps the back-reference's backslash whatever
# standard_conforming_strings says.
_POSTGRES_FULL_TEXT = (
    "ALTER TABLE search_texts ADD COLUMN lexemes tsvector GENERATED ALWAYS AS "
    "(array_to_tsvector(string_to_array("
    "regexp_replace(body, '([^ ]{255})[^ ]+', E'\\\\1', 'g'), ' '))) STORED",
    "CREATE INDEX ix_search_texts_lexemes ON search_texts USING gin (lexemes)",
)


def upgrade() -> None:
    """Create every table of the baseline."""
    op.create_table(
        "runs",
        sa.Column("run_id", STR, primary_key=True),
        sa.Column("flow_id", STR, nullable=False),
        sa.Column("flow_type", STR, nullable=False),
        sa.Column("status", STR, nullable=False),
        sa.Column("input", TEXT, nullable=False),
        sa.Column("request_id", STR),
        sa.Column("started_at", MICROS, nullable=False),
        sa.Column("closed_at", MICROS),
        sa.Column("timeout_at", MICROS),
        sa.Column("error_type", STR),
        sa.Column("error_message", TEXT),
    )
    op.create_index("ix_runs_flow_started", "runs", ["flow_id", "started_at"])
    op.create_index("ix_runs_started", "runs", ["started_at", "run_id"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "flows",
        sa.Column("flow_id", STR, primary_key=True),
        sa.Column("flow_type", STR, nullable=False),
        sa.Column("latest_run_id", STR, sa.ForeignKey("runs.run_id"), nullable=False),
    )
    op.create_table(
        "attributes",
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("instance", STR, primary_key=True),
        sa.Column("name", STR, primary_key=True),
        sa.Column("value", TEXT),
        sa.Column("blob", sa.Boolean(), nullable=False),
        sa.Column("updated_at", MICROS, nullable=False),
    )
    _create_steps()
    _create_channels_history_and_links()
    _create_search()


def _create_steps() -> None:
    op.create_table(
        "step_executions",
        sa.Column("id", STR, primary_key=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("step_type", STR, nullable=False),
        sa.Column("input", TEXT, nullable=False),
        sa.Column("state", STR, nullable=False),
        sa.Column("phase", STR, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("due_at", MICROS),
        sa.Column("created_at", MICROS, nullable=False),
        sa.Column("closed_at", MICROS),
        sa.Column("is_completion", sa.Boolean(), nullable=False),
        sa.Column("output", TEXT),
        sa.Column("error_type", STR),
        sa.Column("error_message", TEXT),
    )
    op.create_index("ix_steps_run_state", "step_executions", ["run_id", "state"])
    op.create_index("ix_steps_state", "step_executions", ["state"])
    op.create_table(
        "step_counters",
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("step_type", STR, primary_key=True),
        sa.Column("count", sa.Integer(), nullable=False),
    )
    op.create_table(
        "step_waits",
        sa.Column("step_id", STR, sa.ForeignKey("step_executions.id"), primary_key=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("spec", TEXT, nullable=False),
        sa.Column("consumed", TEXT),
    )
    op.create_index("ix_step_waits_run_id", "step_waits", ["run_id"])


def _create_channels_history_and_links() -> None:
    op.create_table(
        "channel_messages",
        sa.Column("seq", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("message_id", TEXT, nullable=False, unique=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("channel", STR, nullable=False),
        sa.Column("instance", STR, nullable=False),
        sa.Column("value", TEXT, nullable=False),
        sa.Column("published_at", MICROS, nullable=False),
    )
    op.create_index(
        "ix_channel_messages_queue", "channel_messages", ["run_id", "channel", "instance", "seq"]
    )
    op.create_table(
        "history",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("event_type", STR, nullable=False),
        sa.Column("at", MICROS, nullable=False),
        sa.Column("details", TEXT, nullable=False),
    )
    op.create_index("ix_history_run", "history", ["run_id", "id"])
    op.create_table(
        "subflow_links",
        sa.Column("child_run_id", STR, sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("parent_flow_id", STR, nullable=False),
        sa.Column("parent_run_id", STR, nullable=False),
        sa.Column("parent_step_execution_id", STR, nullable=False),
        sa.Column("condition_index", sa.Integer(), nullable=False),
    )
    op.create_index("ix_subflow_links_parent_flow_id", "subflow_links", ["parent_flow_id"])
    op.create_index("ix_subflow_links_parent_run_id", "subflow_links", ["parent_run_id"])


def _create_search() -> None:
    op.create_table(
        "search_values",
        sa.Column("run_id", STR, primary_key=True),
        sa.Column("key", STR, primary_key=True),
        sa.Column("type", STR, nullable=False),
        sa.Column("value", TEXT, nullable=False),
        sa.Column("text_value", TEXT),
        sa.Column("int_value", sa.BigInteger()),
        sa.Column("real_value", sa.Float()),
    )
    for kind in ("int", "real", "text"):
        op.create_index(
            f"ix_search_values_{kind}", "search_values", ["key", "type", f"{kind}_value", "run_id"]
        )
    op.create_table(
        "search_keywords",
        sa.Column("run_id", STR, primary_key=True),
        sa.Column("key", STR, primary_key=True),
        sa.Column("value", STR, primary_key=True),
    )
    op.create_index("ix_search_keywords_value", "search_keywords", ["key", "value", "run_id"])
    op.create_table(
        "search_texts",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", STR, nullable=False),
        sa.Column("key", STR, nullable=False),
        sa.Column("body", TEXT, nullable=False),
        sa.UniqueConstraint("run_id", "key", name="uq_search_texts_run_key"),
    )
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_FULL_TEXT if dialect == "sqlite" else _POSTGRES_FULL_TEXT:
        op.execute(statement)


def downgrade() -> None:
    """Drop every table of the baseline (children first)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE search_texts_fts")  # its triggers go with search_texts
    for table in (
        "search_texts",
        "search_keywords",
        "search_values",
        "subflow_links",
        "history",
        "channel_messages",
        "step_waits",
        "step_counters",
        "step_executions",
        "attributes",
        "flows",
        "runs",
    ):
        op.drop_table(table)
