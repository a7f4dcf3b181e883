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

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# Frozen copies: what this revision installs, and what its downgrade puts back (0007's and
# 0011's texts). The functions' current texts are engine/_storage/postgres/functions/*.sql.

_END_STEP = """
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
    run_status text;
    step_state text;
    step_attempt integer;
    step_fence bigint;
    seq bigint;
    pending bigint;
    completions bigint;
    canceled text[] := '{}';
    payload jsonb;
BEGIN
    SELECT status, change_log INTO run_status, logged FROM runs
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
        -- When the count above found no pending Step there is none to cancel.
        IF pending IS DISTINCT FROM 0 THEN
            WITH c AS (
                UPDATE step_executions
                SET state = 'CANCELED', closed_at = p_now, closed_commit = seq, due_at = NULL
                WHERE run_id = p_run COLLATE "C" AND state = 'PENDING'
                RETURNING id
            )
            SELECT coalesce(array_agg(id::text ORDER BY id), '{}') INTO canceled FROM c;
        END IF;
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
    WHERE run_id = run AND (status = 'RUNNING') IS TRUE
    RETURNING CASE WHEN change_log THEN commit_seq ELSE 0 END INTO seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % is not open', run USING ERRCODE = 'DXL02';
    END IF;
    RETURN seq;
END $$
"""

_END_STEP_0007 = """
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

_KEEP_0011 = """
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
    """Replace both functions (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_END_STEP)
    op.execute(_KEEP)


def downgrade() -> None:
    """Put 0007's and 0011's back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_END_STEP_0007)
    op.execute(_KEEP_0011)
