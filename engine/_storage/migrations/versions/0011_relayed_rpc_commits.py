"""A locked RPC's commit that keeps its lock rows, for RPCs that pass their locks on in process.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

When one process's RPCs follow each other on the same keys (registrations on one Flow), the
rows stay on the keys from one RPC to the next and their commits go in batches (see
``engine/_runtime/multiprocess/relay.py``). Each commit of a batch first calls
``dexlite_keep_rpc_locks``: it locks the rows the relay holds (a process that judges them dead
waits until the batch has committed), raises unless every one of them is still there (the
fence), and takes the run's next commit number as ``rpc_writes``' statement does, raising
unless the run is open. An error aborts the whole batch, which commits as one transaction.

SQLite has no use for it.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_KEEP = """
CREATE OR REPLACE FUNCTION dexlite_keep_rpc_locks(
    flow text, holder text, taken integer, run varchar
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    held integer;
    seq bigint;
BEGIN
    SELECT count(*) INTO held FROM (
        SELECT 1 FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C"
        FOR UPDATE
    ) AS rows_held;
    IF held <> taken THEN
        RAISE EXCEPTION 'the RPC locks of % on Flow % were lost', holder, flow
            USING ERRCODE = 'DXL01';
    END IF;
    UPDATE runs SET commit_seq = commit_seq + CASE WHEN change_log THEN 1 ELSE 0 END
    WHERE run_id = run AND status = 'RUNNING'
    RETURNING CASE WHEN change_log THEN commit_seq ELSE 0 END INTO seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % is not open', run USING ERRCODE = 'DXL02';
    END IF;
    RETURN seq;
END $$
"""


def upgrade() -> None:
    """Create the function (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_KEEP)


def downgrade() -> None:
    """Drop it."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP FUNCTION IF EXISTS dexlite_keep_rpc_locks(text, text, integer, varchar)")
