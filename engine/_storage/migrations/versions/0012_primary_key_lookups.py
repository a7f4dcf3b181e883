"""The commit functions find the run and the Step execution by primary key alone.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06

``dexlite_end_step`` (0007) locked its run with ``WHERE run_id = ... AND status = 'RUNNING'``
and checked its attempt with ``WHERE id = ... AND state = 'PENDING' AND ...``;
``dexlite_keep_rpc_locks`` (0011) numbered its commit the same way. A plan made while a table
is small finds such a row through the index that leads with the status (``ix_runs_status``,
``ix_runs_timeout``) or the state (``ix_steps_claimable``) as readily as through the primary
key, and then reads every running run, or every pending Step, to find the one: measured on
3-Step Flows, 250 index entries read per look-up, about a tenth of the server's CPU. Here each
row is found by its key and then tested, which reads one entry whatever the plan. And a run
that closes because no Step is pending (the count says so) no longer looks for pending Steps
to cancel: that look-up, too, went through ``ix_steps_claimable``. What the functions do and
answer is unchanged.

SQLite has no use for it.
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_END_STEP = importlib.import_module(
    "engine._storage.migrations.versions.0007_step_end_function"
)._FUNCTION
_KEEP = importlib.import_module(
    "engine._storage.migrations.versions.0011_relayed_rpc_commits"
)._KEEP

#: 0007's look-ups, and what replaces them (a status or state NULL never occurs: the columns
#: are NOT NULL).
_END_STEP_LOOKUPS = (
    (
        """    logged boolean;
""",
        """    logged boolean;
    run_status text;
    step_state text;
    step_attempt integer;
    step_fence bigint;
""",
    ),
    (
        """    SELECT change_log INTO logged FROM runs
    WHERE run_id = p_run COLLATE "C" AND status = 'RUNNING' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- Read after the run's lock: the attempt as last committed.
    PERFORM 1 FROM step_executions
    WHERE id = p_step COLLATE "C" AND state = 'PENDING' AND attempt = p_attempt
        AND fence = p_fence;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
""",
        """    SELECT status, change_log INTO run_status, logged FROM runs
    WHERE run_id = p_run COLLATE "C" FOR UPDATE;
    IF NOT FOUND OR run_status <> 'RUNNING' THEN
        RETURN NULL;
    END IF;
    -- Read after the run's lock: the attempt as last committed.
    SELECT state, attempt, fence INTO step_state, step_attempt, step_fence
    FROM step_executions WHERE id = p_step COLLATE "C";
    IF NOT FOUND OR step_state <> 'PENDING' OR step_attempt <> p_attempt
        OR step_fence <> p_fence THEN
        RETURN NULL;
    END IF;
""",
    ),
    (
        """        WITH c AS (
            UPDATE step_executions
            SET state = 'CANCELED', closed_at = p_now, closed_commit = seq, due_at = NULL
            WHERE run_id = p_run COLLATE "C" AND state = 'PENDING'
            RETURNING id
        )
        SELECT coalesce(array_agg(id::text ORDER BY id), '{}') INTO canceled FROM c;
""",
        """        -- When the count above found no pending Step there is none to cancel.
        IF pending IS DISTINCT FROM 0 THEN
            WITH c AS (
                UPDATE step_executions
                SET state = 'CANCELED', closed_at = p_now, closed_commit = seq, due_at = NULL
                WHERE run_id = p_run COLLATE "C" AND state = 'PENDING'
                RETURNING id
            )
            SELECT coalesce(array_agg(id::text ORDER BY id), '{}') INTO canceled FROM c;
        END IF;
""",
    ),
)
_KEEP_LOOKUPS = (
    (
        """    WHERE run_id = run AND status = 'RUNNING'
""",
        """    WHERE run_id = run AND (status = 'RUNNING') IS TRUE
""",
    ),
)


def _replaced(text: str, replacements: tuple[tuple[str, str], ...]) -> str:
    for old, new in replacements:
        assert text.count(old) == 1, f"not found once: {old!r}"
        text = text.replace(old, new)
    return text


def upgrade() -> None:
    """Replace both functions (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_replaced(_END_STEP, _END_STEP_LOOKUPS))
    op.execute(_replaced(_KEEP, _KEEP_LOOKUPS))


def downgrade() -> None:
    """Put 0007's and 0011's back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_END_STEP)
    op.execute(_KEEP)
