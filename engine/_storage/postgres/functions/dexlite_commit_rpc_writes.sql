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
END $$;
