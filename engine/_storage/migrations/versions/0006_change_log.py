"""What time travel needs: commit numbers, the change log, and message IDs unique per run.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

Every commit that changes a run takes the run's next commit number (``runs.commit_seq``);
history events and Step executions' transitions record it, and the new ``change_log`` table
keeps each Attribute write and Channel publication, deletion and consumption under it. The
state of a run right after any of its commits is then a read, and a traveled run (or a fork)
restores pending messages under their IDs, so those are unique per run, not everywhere.

Runs that exist before this revision keep no log (``change_log`` false): their past cannot be
restored, so time travel refuses them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

STR = sa.String().with_variant(sa.String(collation="C"), "postgresql")
TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
MICROS = sa.BigInteger()
ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _channel_messages(unique: sa.Constraint | None, message_unique: bool) -> sa.Table:
    """The channel_messages table's shape, for SQLite's table rebuild."""
    columns: list[Any] = [
        sa.Column("seq", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("message_id", TEXT, nullable=False, unique=message_unique),
        sa.Column("run_id", STR, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("channel", STR, nullable=False),
        sa.Column("instance", STR, nullable=False),
        sa.Column("value", TEXT, nullable=False),
        sa.Column("published_at", MICROS, nullable=False),
        sa.Index("ix_channel_messages_queue", "run_id", "channel", "instance", "seq"),
    ]
    if unique is not None:
        columns.append(unique)
    return sa.Table("channel_messages", sa.MetaData(), *columns)


def upgrade() -> None:
    """Add the commit numbers and the change log; make message IDs unique per run."""
    inspector = sa.inspect(op.get_bind())

    def missing(table: str, *names: str) -> list[str]:
        # A pre-migration SQLite file adopted at the baseline may have some of this already:
        # its missing tables come from the models (see schema.BASELINE_TABLES).
        present = {c["name"] for c in inspector.get_columns(table)}
        return [name for name in names if name not in present]

    with op.batch_alter_table("runs") as batch:
        if missing("runs", "commit_seq"):
            batch.add_column(
                sa.Column(
                    "commit_seq", sa.BigInteger(), nullable=False, server_default=sa.text("0")
                )
            )
        if missing("runs", "change_log"):
            batch.add_column(
                sa.Column("change_log", sa.Boolean(), nullable=False, server_default=sa.false())
            )
    if missing("history", "commit_seq"):
        with op.batch_alter_table("history") as batch:
            batch.add_column(sa.Column("commit_seq", sa.BigInteger(), nullable=True))
    steps = missing("step_executions", "created_commit", "execute_commit", "closed_commit")
    if steps:
        with op.batch_alter_table("step_executions") as batch:
            for name in steps:
                batch.add_column(sa.Column(name, sa.BigInteger(), nullable=True))
    if not inspector.has_table("change_log"):
        op.create_table(
            "change_log",
            sa.Column("run_id", STR, primary_key=True),
            sa.Column("commit_seq", sa.BigInteger(), primary_key=True),
            sa.Column("pos", sa.Integer(), primary_key=True),
            sa.Column("kind", STR, nullable=False),
            sa.Column("name", STR, nullable=False),
            sa.Column("instance", STR, nullable=False),
            sa.Column("message_id", STR, nullable=True),
            sa.Column("value", TEXT, nullable=True),
            sa.Column("at", sa.BigInteger(), nullable=True),
            sa.Column("external", sa.Boolean(), nullable=False),
        )
    names = {u["name"] for u in inspector.get_unique_constraints("channel_messages")}
    if "uq_channel_messages_run_message" in names:
        return
    unique = sa.UniqueConstraint("run_id", "message_id", name="uq_channel_messages_run_message")
    if op.get_bind().dialect.name == "sqlite":
        # SQLite cannot drop the unnamed UNIQUE of message_id in place: rebuild the table
        # from its new shape (rows are copied by column name).
        with op.batch_alter_table(
            "channel_messages",
            copy_from=_channel_messages(unique, message_unique=False),
            recreate="always",
        ):
            pass
    else:
        op.drop_constraint("channel_messages_message_id_key", "channel_messages", type_="unique")
        op.create_unique_constraint(
            "uq_channel_messages_run_message", "channel_messages", ["run_id", "message_id"]
        )


def downgrade() -> None:
    """Drop the log and the commit numbers; message IDs unique everywhere again."""
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table(
            "channel_messages",
            copy_from=_channel_messages(None, message_unique=True),
            recreate="always",
        ):
            pass
    else:
        op.drop_constraint("uq_channel_messages_run_message", "channel_messages", type_="unique")
        op.create_unique_constraint(
            "channel_messages_message_id_key", "channel_messages", ["message_id"]
        )
    op.drop_table("change_log")
    with op.batch_alter_table("step_executions") as batch:
        for name in ("created_commit", "execute_commit", "closed_commit"):
            batch.drop_column(name)
    with op.batch_alter_table("history") as batch:
        batch.drop_column("commit_seq")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("change_log")
        batch.drop_column("commit_seq")
