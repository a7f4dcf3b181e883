"""Schedules: their specs and firing state, the actions they started, and runs' ScheduleId.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05

A Schedule's row holds its spec as JSON and the earliest time it has not acted on yet; the
commit that acts on a time moves that on under the row's lock, so each time fires once. The
last few actions are kept for describeSchedule. A run a Schedule started names it in
``runs.schedule_id`` (the search field ScheduleId, and the overlap policy's question: is the
previous action still running?).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

STR = sa.String().with_variant(sa.String(collation="C"), "postgresql")
TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
MICROS = sa.BigInteger()
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add the schedules and schedule_actions tables and runs.schedule_id."""
    inspector = sa.inspect(op.get_bind())
    if "schedule_id" not in {c["name"] for c in inspector.get_columns("runs")}:
        with op.batch_alter_table("runs") as batch:
            batch.add_column(sa.Column("schedule_id", STR, nullable=True))
        op.create_index("ix_runs_schedule", "runs", ["schedule_id", "status"])
    if not inspector.has_table("schedules"):
        op.create_table(
            "schedules",
            sa.Column("schedule_id", STR, primary_key=True),
            sa.Column("flow_type", STR, nullable=False),
            sa.Column("spec", TEXT, nullable=False),
            sa.Column("paused", sa.Boolean(), nullable=False),
            sa.Column("note", TEXT, nullable=False),
            sa.Column("next_time", MICROS, nullable=False),
            sa.Column("buffered", MICROS, nullable=True),
            sa.Column("last_flow_id", STR, nullable=True),
            sa.Column("skipped", sa.BigInteger(), nullable=False),
            sa.Column("created_at", MICROS, nullable=False),
            sa.Column("updated_at", MICROS, nullable=False),
        )
        op.create_index("ix_schedules_due", "schedules", ["paused", "next_time"])
    if not inspector.has_table("schedule_actions"):
        op.create_table(
            "schedule_actions",
            sa.Column("seq", ROW_ID, primary_key=True, autoincrement=True),
            sa.Column("schedule_id", STR, nullable=False),
            sa.Column("scheduled_at", MICROS, nullable=False),
            sa.Column("started_at", MICROS, nullable=False),
            sa.Column("flow_id", STR, nullable=False),
            sa.Column("run_id", STR, nullable=False),
        )
        op.create_index("ix_schedule_actions_schedule", "schedule_actions", ["schedule_id", "seq"])


def downgrade() -> None:
    """Drop the Schedules' tables and runs.schedule_id."""
    op.drop_table("schedule_actions")
    op.drop_table("schedules")
    op.drop_index("ix_runs_schedule", "runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("schedule_id")
