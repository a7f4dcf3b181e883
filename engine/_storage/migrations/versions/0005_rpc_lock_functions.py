"""PostgreSQL functions that take and drop an RPC's Attribute locks in one statement.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

An RPC on a shared database took its locks in a transaction of five round trips (BEGIN, the
Flow's advisory lock, the holders' read, the insert, COMMIT) and dropped them in another five.
In the common case (no row on the keys to take; no Step waiting on the Flow when dropping)
each is now one call of a function that does the same under the same advisory lock, as one
statement and so one transaction of its own (dropping also runs inside an RPC's commit). A
function answers false (taking) or -1 (dropping, else the number of rows dropped), having
changed nothing, whenever the common case does not hold; the caller then runs the full
transaction (engine/_runtime/multiprocess/lock_table.py), which also judges holders alive or
dead and grants waiters.

``dexlite_lock_flow`` is that advisory lock, for the Python side to take too, so that the
lock's key is written down once. SQLite has no use for any of it.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The columns compared are in the "C" collation (see tables._by_code_point); the parameters
# are given it explicitly, or PostgreSQL could not pick between the two implicit collations.
_FUNCTIONS = (
    """
    CREATE OR REPLACE FUNCTION dexlite_lock_flow(flow text) RETURNS void
    LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(hashtextextended(flow, 7)) $$
    """,
    """
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
        -- No WAL flush of its own: the RPC's commit drops these rows and fails unless it
        -- dropped every one of them, so a row lost to a crash of the server fails the RPC.
        PERFORM set_config('synchronous_commit', 'off', true);
        INSERT INTO attribute_locks (flow_id, lock_key, owner, kind, phase, process_id)
        SELECT flow, key, holder, holder_kind, '', process FROM unnest(keys) AS key;
        RETURN true;
    END $$
    """,
    """
    CREATE OR REPLACE FUNCTION dexlite_drop_rpc_locks(flow text, holder text) RETURNS integer
    LANGUAGE plpgsql AS $$
    DECLARE
        dropped integer;
    BEGIN
        PERFORM dexlite_lock_flow(flow);
        IF EXISTS (SELECT 1 FROM lock_waiters WHERE flow_id = flow COLLATE "C") THEN
            RETURN -1;
        END IF;
        DELETE FROM attribute_locks WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        GET DIAGNOSTICS dropped = ROW_COUNT;
        RETURN dropped;
    END $$
    """,
)
_NAMES = (
    "dexlite_drop_rpc_locks(text, text)",
    "dexlite_take_rpc_locks(text, text[], text, text, text)",
    "dexlite_lock_flow(text)",
)


def upgrade() -> None:
    """Create the functions (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _FUNCTIONS:
        op.execute(statement)


def downgrade() -> None:
    """Drop them."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for name in _NAMES:
        op.execute(f"DROP FUNCTION IF EXISTS {name}")
