"""Search indexes end in SearchFlows' default order (StartTime, then RunId).

Search values carry their run's start time for it; the runs' Status index and a new FlowType
index end in the same columns.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

A search led by one index key used to look up every matching run to sort them by StartTime
before it could cut the first page; with ``(key, type, value, started_at, run_id)`` an
equality reads its page in order off the index and stops, so its cost does not grow with the
number of runs that match.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_INDEXES = {
    "ix_search_values_text": "text_value",
    "ix_search_values_int": "int_value",
    "ix_search_values_real": "real_value",
}


def upgrade() -> None:
    """Add search_values.started_at (copied from runs) and end the indexes in the order."""
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("search_values")}
    # A pre-migration SQLite file adopted at the baseline may have some of this already: its
    # missing tables come from the models (see schema.BASELINE_TABLES).
    if "started_at" not in columns:
        op.add_column("search_values", sa.Column("started_at", sa.BigInteger(), nullable=True))
        op.execute(
            "UPDATE search_values SET started_at = "
            "(SELECT runs.started_at FROM runs WHERE runs.run_id = search_values.run_id)"
        )
        op.execute("UPDATE search_values SET started_at = 0 WHERE started_at IS NULL")
        with op.batch_alter_table("search_values") as batch:
            batch.alter_column("started_at", existing_type=sa.BigInteger(), nullable=False)
        for name, column in _INDEXES.items():
            op.drop_index(name, table_name="search_values")
            op.create_index(name, "search_values", ["key", "type", column, "started_at", "run_id"])
    indexes = {i["name"]: i["column_names"] for i in sa.inspect(op.get_bind()).get_indexes("runs")}
    if indexes.get("ix_runs_status") != ["status", "started_at", "run_id"]:
        op.drop_index("ix_runs_status", table_name="runs")
        op.create_index("ix_runs_status", "runs", ["status", "started_at", "run_id"])
    if "ix_runs_type_started" not in indexes:
        op.create_index("ix_runs_type_started", "runs", ["flow_type", "started_at", "run_id"])


def downgrade() -> None:
    """Put the indexes back without the start time and drop the column."""
    op.drop_index("ix_runs_type_started", table_name="runs")
    op.drop_index("ix_runs_status", table_name="runs")
    op.create_index("ix_runs_status", "runs", ["status"])
    for name, column in _INDEXES.items():
        op.drop_index(name, table_name="search_values")
        op.create_index(name, "search_values", ["key", "type", column, "run_id"])
    with op.batch_alter_table("search_values") as batch:
        batch.drop_column("started_at")
