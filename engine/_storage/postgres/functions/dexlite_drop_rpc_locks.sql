CREATE OR REPLACE FUNCTION dexlite_drop_rpc_locks(flow text, holder text) RETURNS integer
    LANGUAGE plpgsql AS $$
    DECLARE
        dropped integer;
    BEGIN
        PERFORM dexlite_lock_flow(flow);
        IF EXISTS (SELECT 1 FROM lock_waiters WHERE flow_id = flow COLLATE "C") THEN
            RETURN -1;
        END IF;
        DELETE FROM attribute_locks WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        GET DIAGNOSTICS dropped = ROW_COUNT;
        RETURN dropped;
    END $$;
