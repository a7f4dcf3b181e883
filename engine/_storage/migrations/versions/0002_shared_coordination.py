"""Coordination of several processes on one database: process leases, Step claims with
fencing tokens, Attribute lock rows and their FIFO waiters, an index for due Flow timeouts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Only PostgreSQL runs several processes; SQLite gets the same tables (empty) so that both
databases have one schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

STR = sa.String().with_variant(sa.String(collation="C"), "postgresql")
TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add the lease, claim and lock structures."""
    op.create_table(
        "processes",
        sa.Column("process_id", STR, primary_key=True),
        sa.Column("host", STR, nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "attribute_locks",
        sa.Column("flow_id", STR, primary_key=True),
        sa.Column("lock_key", STR, primary_key=True),
        sa.Column("owner", STR, nullable=False),
        sa.Column("kind", STR, nullable=False),
        sa.Column("phase", STR, nullable=False),
        sa.Column("process_id", STR, nullable=False),
    )
    op.create_index("ix_attribute_locks_owner", "attribute_locks", ["flow_id", "owner"])
    op.create_table(
        "lock_waiters",
        sa.Column("seq", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("flow_id", STR, nullable=False),
        sa.Column("owner", STR, nullable=False),
        sa.Column("phase", STR, nullable=False),
        sa.Column("lock_keys", TEXT, nullable=False),
        sa.Column("process_id", STR, nullable=False),
    )
    op.create_index("ix_lock_waiters_flow", "lock_waiters", ["flow_id", "seq"])
    with op.batch_alter_table("step_executions") as batch:
        batch.add_column(sa.Column("claimed_by", STR, nullable=True))
        batch.add_column(
            sa.Column("fence", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    op.create_index("ix_steps_claimable", "step_executions", ["state", "due_at"])
    op.create_index("ix_runs_timeout", "runs", ["status", "timeout_at"])


def downgrade() -> None:
    """Remove them again."""
    op.drop_index("ix_runs_timeout", "runs")
    op.drop_index("ix_steps_claimable", "step_executions")
    with op.batch_alter_table("step_executions") as batch:
        batch.drop_column("fence")
        batch.drop_column("claimed_by")
    op.drop_table("lock_waiters")
    op.drop_table("attribute_locks")
    op.drop_table("processes")
