"""An RPC's quick lock take inserts its rows in one statement, without a check before it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

``dexlite_take_rpc_locks`` (0005) looked for a row on any of the keys, then inserted one per
key: two index scans of ``attribute_locks`` per take, the check about a quarter of the server's
time for a locked RPC. Now the insert skips the keys a row is on (``ON CONFLICT DO NOTHING``,
on the primary key) and counts what it inserted: every key, and they are taken; fewer, and the
rows it did insert are deleted again, so the function has changed nothing, as before. A take
that finds a key held costs a little more, and the common one a little less.

SQLite has no use for it.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# The caller gives the keys once each (a repeated key would conflict with itself).
_TAKE = """
CREATE OR REPLACE FUNCTION dexlite_take_rpc_locks(
    flow text, keys text[], holder text, holder_kind text, process text
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    taken integer;
BEGIN
    PERFORM dexlite_lock_flow(flow);
    -- No WAL flush of its own: the RPC's commit drops these rows and fails unless it
    -- dropped every one of them, so a row lost to a crash of the server fails the RPC.
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO attribute_locks (flow_id, lock_key, owner, kind, phase, process_id)
    SELECT flow, key, holder, holder_kind, '', process FROM unnest(keys) AS key
    ON CONFLICT (flow_id, lock_key) DO NOTHING;
    GET DIAGNOSTICS taken = ROW_COUNT;
    IF taken < cardinality(keys) THEN
        DELETE FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        RETURN false;
    END IF;
    RETURN true;
END $$
"""

# 0005's definition.
_CHECK_FIRST = """
CREATE OR REPLACE FUNCTION dexlite_take_rpc_locks(
    flow text, keys text[], holder text, holder_kind text, process text
) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dexlite_lock_flow(flow);
    IF EXISTS (
        SELECT 1 FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND lock_key = ANY (keys COLLATE "C")
    ) THEN
        RETURN false;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO attribute_locks (flow_id, lock_key, owner, kind, phase, process_id)
    SELECT flow, key, holder, holder_kind, '', process FROM unnest(keys) AS key;
    RETURN true;
END $$
"""


def upgrade() -> None:
    """Replace the function (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_TAKE)


def downgrade() -> None:
    """Put 0005's back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_CHECK_FIRST)
