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
END $$;
