CREATE OR REPLACE FUNCTION dexlite_take_rpc_locks(
    flow text, keys text[], holder text, holder_kind text, process text
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    taken integer;
BEGIN
    PERFORM dexlite_lock_flow(flow);
    -- No WAL flush of its own: the RPC's commit drops these rows and fails unless it
    -- dropped every one of them, so a row lost to a crash of the server fails the RPC.
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO attribute_locks (flow_id, lock_key, owner, kind, phase, process_id)
    SELECT flow, key, holder, holder_kind, '', process FROM unnest(keys) AS key
    ON CONFLICT (flow_id, lock_key) DO NOTHING;
    GET DIAGNOSTICS taken = ROW_COUNT;
    IF taken < cardinality(keys) THEN
        DELETE FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        RETURN false;
    END IF;
    RETURN true;
END $$;
