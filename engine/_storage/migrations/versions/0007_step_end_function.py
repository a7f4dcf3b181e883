"""A PostgreSQL function that commits a Step's decision that may close its run, in one call.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04

A Step decision with no next Step (the last Step of a Flow, a failure, ``force_complete``) may
close its run, and whether it does depends on rows other commits write (is any Step still
pending? was a completion recorded?). Committed as a unit it took eight round trips. One SQL
statement cannot do it safely: in READ COMMITTED a statement reads as of its start, so a Step
another commit queued while this one waited for the run's lock would be missed and the run
closed under it. A PL/pgSQL function can: each statement in it reads afresh, after the run is
locked. ``dexlite_end_step`` does what ``commits.commit_step`` does for such a decision
(``engine/_storage/step_ends.py`` says which qualify), in the same order, and answers NULL,
having changed nothing, when the run is not open or the attempt is no longer current.

SQLite has no use for it.
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The columns compared are in the "C" collation (see tables._by_code_point); the parameters
# are given it explicitly, or PostgreSQL could not pick between the two implicit collations.
_FUNCTION = """
CREATE OR REPLACE FUNCTION dexlite_end_step(
    p_run text, p_step text, p_attempt integer, p_fence bigint,
    p_state text, p_phase text, p_completion boolean, p_output text,
    p_error_type text, p_error_message text, p_now bigint,
    p_closes text, p_step_details text, p_flow_details text,
    p_channel text, p_payload text
) RETURNS text[] LANGUAGE plpgsql AS $$
-- p_closes: the status the decision closes the run with (COMPLETED, FAILED), or NULL when
-- it closes it as COMPLETED only if no Step is pending and a completion was recorded.
-- Answers NULL when nothing was written; else the status the run closed with ('' when it
-- stays open) followed by the IDs of the Steps the close canceled.
DECLARE
    logged boolean;
    seq bigint;
    pending bigint;
    completions bigint;
    canceled text[] := '{}';
    payload jsonb;
BEGIN
    SELECT change_log INTO logged FROM runs
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
    IF logged THEN
        UPDATE runs SET commit_seq = commit_seq + 1 WHERE run_id = p_run COLLATE "C"
        RETURNING commit_seq INTO seq;
    ELSE
        seq := 0;
    END IF;
    UPDATE step_executions
    SET state = p_state, phase = p_phase, closed_at = p_now, closed_commit = seq,
        due_at = NULL, is_completion = p_completion, output = p_output,
        error_type = p_error_type, error_message = p_error_message
    WHERE id = p_step COLLATE "C";
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    VALUES (p_run, 'STEP_CLOSED', p_now, p_step_details, seq);
    IF p_closes IS NULL THEN
        SELECT count(*) FILTER (WHERE state = 'PENDING'),
               count(*) FILTER (WHERE is_completion)
        INTO pending, completions
        FROM step_executions WHERE run_id = p_run COLLATE "C";
        IF pending = 0 AND completions > 0 THEN
            p_closes := 'COMPLETED';
        END IF;
    END IF;
    IF p_closes IS NOT NULL THEN
        WITH c AS (
            UPDATE step_executions
            SET state = 'CANCELED', closed_at = p_now, closed_commit = seq, due_at = NULL
            WHERE run_id = p_run COLLATE "C" AND state = 'PENDING'
            RETURNING id
        )
        SELECT coalesce(array_agg(id::text ORDER BY id), '{}') INTO canceled FROM c;
        UPDATE runs
        SET status = p_closes, closed_at = p_now,
            error_type = CASE WHEN p_closes = 'FAILED' THEN p_error_type END,
            error_message = CASE WHEN p_closes = 'FAILED' THEN p_error_message END
        WHERE run_id = p_run COLLATE "C";
        INSERT INTO history (run_id, event_type, at, details, commit_seq)
        VALUES (p_run, 'FLOW_CLOSED', p_now,
                p_flow_details, seq);
    END IF;
    IF p_channel IS NOT NULL THEN
        -- The notice was written for a run that stays open; say what the close ended.
        payload := p_payload::jsonb;
        IF p_closes IS NOT NULL THEN
            payload := jsonb_set(payload, '{c,0,c}', 'true');
            payload := jsonb_set(payload, '{c,0,e}', (payload #> '{c,0,e}') || to_jsonb(canceled));
            IF octet_length(payload::text) > 7900 THEN
                payload := jsonb_set(payload, '{c,0,e}', '[]');
            END IF;
        END IF;
        PERFORM pg_notify(p_channel, payload::text);
    END IF;
    RETURN array_prepend(coalesce(p_closes, ''), canceled);
END $$
"""
_NAME = (
    "dexlite_end_step(text, text, integer, bigint, text, text, boolean, text, text, text, "
    "bigint, text, text, text, text, text)"
)


def upgrade() -> None:
    """Create the function (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)


def downgrade() -> None:
    """Drop it."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {_NAME}")
