CREATE OR REPLACE FUNCTION dexlite_move_step(
    p_run text, p_step text, p_attempt integer, p_fence bigint,
    p_types varchar[], p_inputs text[], p_phases varchar[], p_attempts integer[],
    p_dues bigint[], p_places integer[], p_counts integer[], p_prefixes varchar[],
    p_now bigint, p_claimant varchar, p_state text, p_phase text, p_completion boolean,
    p_output text, p_error_type text, p_error_message text, p_details text
) RETURNS text[] LANGUAGE plpgsql AS $$
-- A Step decision that closes its execution and creates the next ones. Answers NULL, having
-- written nothing, when the run is not open or the attempt not current; else the new
-- executions' IDs, in the order given. Each new execution is the p_places-th of the
-- p_counts new ones of its type: its number counts on from the run's counter of the type.
DECLARE
    logged boolean;
    run_status text;
    step_state text;
    step_attempt integer;
    step_fence bigint;
    seq bigint;
    ids text[];
BEGIN
    SELECT status, change_log INTO run_status, logged FROM runs
    WHERE run_id = p_run COLLATE "C" FOR UPDATE;
    IF NOT FOUND OR run_status <> 'RUNNING' THEN
        RETURN NULL;
    END IF;
    -- Read after the run's lock: the attempt as last committed.
    SELECT state, attempt, fence INTO step_state, step_attempt, step_fence
    FROM step_executions WHERE id = p_step COLLATE "C" FOR UPDATE;
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
    WITH v AS MATERIALIZED (
        SELECT * FROM unnest(
            p_types, p_inputs, p_phases, p_attempts, p_dues, p_places, p_counts, p_prefixes
        ) WITH ORDINALITY AS v(t, inp, ph, att, due, nth, k, pre, ord)
    ), c AS (
        INSERT INTO step_counters (run_id, step_type, count)
        SELECT p_run, x.t, x.k FROM (SELECT DISTINCT t, k FROM v) AS x
        ON CONFLICT (run_id, step_type) DO UPDATE
            SET count = step_counters.count + excluded.count
        RETURNING step_type, count
    ), n AS MATERIALIZED (
        SELECT v.*, v.pre || (c.count - v.k + v.nth)::text AS id
        FROM v JOIN c ON c.step_type = v.t COLLATE "C"
    ), s AS (
        INSERT INTO step_executions (id, run_id, step_type, input, state, phase, attempt,
            due_at, created_at, is_completion, created_commit, execute_commit, claimed_by,
            fence)
        SELECT n.id, p_run, n.t, n.inp, 'PENDING', n.ph, n.att, n.due, p_now, false, seq,
            CASE WHEN n.ph = 'EXECUTE' THEN seq END, p_claimant, 1
        FROM n
    )
    SELECT array_agg(n.id ORDER BY n.ord) INTO ids FROM n;
    UPDATE step_executions
    SET state = p_state, phase = p_phase, closed_at = p_now, closed_commit = seq,
        due_at = NULL, is_completion = p_completion, output = p_output,
        error_type = p_error_type, error_message = p_error_message
    WHERE id = p_step COLLATE "C";
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    VALUES (p_run, 'STEP_CLOSED', p_now, p_details, seq);
    RETURN ids;
END $$;
