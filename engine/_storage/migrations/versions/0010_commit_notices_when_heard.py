"""Commit notices are sent only when another process may hear them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

Every commit sent a ``pg_notify`` for the other processes on the database, and a process that
is alone on it paid for its own notices twice: PostgreSQL queued each and woke the process's
listener to read it, and the process received and dropped it (about 120 us of the server's CPU
and 60 us of the process's per locked RPC). ``dexlite_announce`` sends the notice unless one
process holds the "alone" advisory lock, which a process takes only while no other listens
(``engine._runtime.multiprocess.notify`` says how a process joins one that is alone). Every
commit that skips its notice first takes the "fence" lock, shared, until it ends, so a process
that joins waits, on the fence, for the commits it was not told of before it reads anything.

Both locks are in the two-key advisory lock space (class 1685613684, "dxlt" in ASCII), apart
from the one-key locks of Flows and schema changes. ``dexlite_end_step`` (0007) calls it too.

SQLite has no use for it.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# The fence first: a joining process that passed the fence before this commit took it has
# released the alone lock already, so the try below succeeds and the notice goes out.
_FUNCTION = """
CREATE OR REPLACE FUNCTION dexlite_announce(channel text, payload text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1685613684, 1);
    IF pg_try_advisory_xact_lock_shared(1685613684, 2) THEN
        PERFORM pg_notify(channel, payload);
    END IF;
END $$
"""

# dexlite_end_step's definition with its notice sent one way or the other (its body is 0007's,
# read back from the server rather than repeated here).
_REWRITE = """
DO $$
DECLARE
    body text := pg_get_functiondef('dexlite_end_step(text, text, integer, bigint, text, text,
        boolean, text, text, text, bigint, text, text, text, text, text)'::regprocedure);
    changed text := replace(body, 'PERFORM {old}(p_channel, payload::text)',
        'PERFORM {new}(p_channel, payload::text)');
BEGIN
    IF changed = body THEN
        RAISE EXCEPTION 'dexlite_end_step does not call {old} as 0007 wrote it';
    END IF;
    EXECUTE changed;
END $$
"""


def upgrade() -> None:
    """Create the function and let dexlite_end_step use it (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)
    op.execute(_REWRITE.format(old="pg_notify", new="dexlite_announce"))


def downgrade() -> None:
    """Send every notice again, and drop the function."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_REWRITE.format(old="dexlite_announce", new="pg_notify"))
    op.execute("DROP FUNCTION IF EXISTS dexlite_announce(text, text)")
