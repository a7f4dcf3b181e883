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
END $$;
