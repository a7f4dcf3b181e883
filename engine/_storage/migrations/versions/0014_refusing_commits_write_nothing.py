"""A Step's move is one function that writes nothing when it refuses; a refused RPC commit
says the run is not open before it says the locks were lost.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07

A Step decision that moves its Flow on was one statement of common table expressions whose
first updated the run's commit number: a commit refused for a stale attempt wrote nothing
else, but had taken a number its plain unit (which rolls back) never takes.
``dexlite_move_step`` locks the run, checks the attempt, and only then takes the number, as
``dexlite_end_step`` does.

``dexlite_commit_rpc_writes`` and ``dexlite_keep_rpc_locks`` answered "the locks were lost"
for an RPC whose run had also closed; the plain commit checks the run first and answers that
it is not open. Both now say so in the same order (``dexlite_commit_rpc_writes`` answers -1 in
its second element for lost locks). What they write is unchanged.

The functions' current texts are engine/_storage/postgres/functions/*.sql; the texts here are
frozen copies. SQLite has no use for them.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_MOVE = """
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
        -- As the plain commit: a run no longer open is said first, whatever the rows.
        IF NOT EXISTS (
            SELECT 1 FROM runs WHERE run_id = run AND (status = 'RUNNING') IS TRUE
        ) THEN
            RAISE EXCEPTION 'run % is not open', run USING ERRCODE = 'DXL02';
        END IF;
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

_COMMIT = """
CREATE OR REPLACE FUNCTION dexlite_commit_rpc_writes(
    flow text, holder text, run varchar, taken integer, now_at bigint,
    put_names varchar[], put_instances varchar[], put_values text[], put_blobs boolean[],
    gone_names varchar[], gone_instances varchar[], event varchar, details text,
    log_names varchar[], log_instances varchar[], log_values text[], keep boolean
) RETURNS integer[] LANGUAGE plpgsql AS $$
DECLARE
    dropped integer;
    seq bigint;
    logged boolean;
BEGIN
    IF keep THEN
        -- The relay's commit: it raises unless the run and the rows are there.
        seq := dexlite_keep_rpc_locks(flow, holder, taken, run);
        logged := seq > 0;
        dropped := taken;
    ELSE
        -- As dexlite_drop_rpc_locks: the Flow's lock, then a Step waiting on it wins.
        PERFORM pg_advisory_xact_lock(hashtextextended(flow, 7));
        IF EXISTS (SELECT 1 FROM lock_waiters WHERE flow_id = flow COLLATE "C") THEN
            RETURN ARRAY[-1, 0];
        END IF;
        DELETE FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        GET DIAGNOSTICS dropped = ROW_COUNT;
        IF dropped <> taken THEN
            -- As the plain commit: a run no longer open is said first (0), else the rows
            -- were lost (-1).
            IF EXISTS (
                SELECT 1 FROM runs WHERE run_id = run AND (status = 'RUNNING') IS TRUE
            ) THEN
                RETURN ARRAY[dropped, -1];
            END IF;
            RETURN ARRAY[dropped, 0];
        END IF;
        -- The run found by its key, its status a filter (a plan through the status index
        -- would read every running run).
        UPDATE runs SET commit_seq = commit_seq + CASE WHEN change_log THEN 1 ELSE 0 END
        WHERE run_id = run AND (status = 'RUNNING') IS TRUE
        RETURNING CASE WHEN change_log THEN commit_seq ELSE 0 END, change_log
        INTO seq, logged;
        IF NOT FOUND THEN
            RETURN ARRAY[dropped, 0];
        END IF;
    END IF;
    IF cardinality(put_names) > 0 THEN
        INSERT INTO attributes (run_id, instance, name, value, blob, updated_at)
        SELECT run, i, nm, v, b, now_at
        FROM unnest(put_names, put_instances, put_values, put_blobs) AS x(nm, i, v, b)
        ON CONFLICT (run_id, instance, name) DO UPDATE
            SET value = excluded.value, blob = excluded.blob, updated_at = excluded.updated_at;
    END IF;
    IF cardinality(gone_names) > 0 THEN
        DELETE FROM attributes AS a
        USING unnest(gone_names, gone_instances) AS y(nm, i)
        WHERE a.run_id = run AND a.name = y.nm AND a.instance = y.i;
    END IF;
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    VALUES (run, event, now_at, details, seq);
    IF logged AND cardinality(log_names) > 0 THEN
        INSERT INTO change_log
            (run_id, commit_seq, pos, kind, name, instance, message_id, value, at, external)
        SELECT run, seq, z.p, 'W', z.nm, z.i, NULL, z.v, NULL, true
        FROM unnest(log_names, log_instances, log_values) WITH ORDINALITY AS z(nm, i, v, p);
    END IF;
    RETURN ARRAY[dropped, 1];
END $$
"""

_KEEP_0012 = """
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

_COMMIT_0013 = """
CREATE OR REPLACE FUNCTION dexlite_commit_rpc_writes(
    flow text, holder text, run varchar, taken integer, now_at bigint,
    put_names varchar[], put_instances varchar[], put_values text[], put_blobs boolean[],
    gone_names varchar[], gone_instances varchar[], event varchar, details text,
    log_names varchar[], log_instances varchar[], log_values text[], keep boolean
) RETURNS integer[] LANGUAGE plpgsql AS $$
DECLARE
    dropped integer;
    seq bigint;
    logged boolean;
BEGIN
    IF keep THEN
        -- The relay's commit (0011, 0012): it raises unless the rows and the run are there.
        seq := dexlite_keep_rpc_locks(flow, holder, taken, run);
        logged := seq > 0;
        dropped := taken;
    ELSE
        -- As dexlite_drop_rpc_locks (0005): the Flow's lock, then a Step waiting on it wins.
        PERFORM pg_advisory_xact_lock(hashtextextended(flow, 7));
        IF EXISTS (SELECT 1 FROM lock_waiters WHERE flow_id = flow COLLATE "C") THEN
            RETURN ARRAY[-1, 0];
        END IF;
        DELETE FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        GET DIAGNOSTICS dropped = ROW_COUNT;
        IF dropped <> taken THEN
            RETURN ARRAY[dropped, 0];
        END IF;
        -- The run found by its key, its status a filter (see 0012).
        UPDATE runs SET commit_seq = commit_seq + CASE WHEN change_log THEN 1 ELSE 0 END
        WHERE run_id = run AND (status = 'RUNNING') IS TRUE
        RETURNING CASE WHEN change_log THEN commit_seq ELSE 0 END, change_log
        INTO seq, logged;
        IF NOT FOUND THEN
            RETURN ARRAY[dropped, 0];
        END IF;
    END IF;
    IF cardinality(put_names) > 0 THEN
        INSERT INTO attributes (run_id, instance, name, value, blob, updated_at)
        SELECT run, i, nm, v, b, now_at
        FROM unnest(put_names, put_instances, put_values, put_blobs) AS x(nm, i, v, b)
        ON CONFLICT (run_id, instance, name) DO UPDATE
            SET value = excluded.value, blob = excluded.blob, updated_at = excluded.updated_at;
    END IF;
    IF cardinality(gone_names) > 0 THEN
        DELETE FROM attributes AS a
        USING unnest(gone_names, gone_instances) AS y(nm, i)
        WHERE a.run_id = run AND a.name = y.nm AND a.instance = y.i;
    END IF;
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    VALUES (run, event, now_at, details, seq);
    IF logged AND cardinality(log_names) > 0 THEN
        INSERT INTO change_log
            (run_id, commit_seq, pos, kind, name, instance, message_id, value, at, external)
        SELECT run, seq, z.p, 'W', z.nm, z.i, NULL, z.v, NULL, true
        FROM unnest(log_names, log_instances, log_values) WITH ORDINALITY AS z(nm, i, v, p);
    END IF;
    RETURN ARRAY[dropped, 1];
END $$
"""

_MOVE_NAME = (
    "dexlite_move_step(text, text, integer, bigint, varchar[], text[], varchar[], integer[], "
    "bigint[], integer[], integer[], varchar[], bigint, varchar, text, text, boolean, text, "
    "text, text, text)"
)


def upgrade() -> None:
    """Create the move function; replace the RPC commit and keep functions (PostgreSQL)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_MOVE)
    op.execute(_KEEP)
    op.execute(_COMMIT)


def downgrade() -> None:
    """Drop the move function; put 0012's keep and 0013's commit back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {_MOVE_NAME}")
    op.execute(_KEEP_0012)
    op.execute(_COMMIT_0013)
