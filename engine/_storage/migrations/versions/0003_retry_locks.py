"""A queued retry's lock keys on its Step execution row.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A retry keeps its phase's locks while it waits; the keys are stored with it so that a
process that no longer registers the Step type can still hold them until the Flow stops.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    """Add step_executions.held_locks."""
    with op.batch_alter_table("step_executions") as batch:
        batch.add_column(sa.Column("held_locks", TEXT, nullable=True))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table("step_executions") as batch:
        batch.drop_column("held_locks")
