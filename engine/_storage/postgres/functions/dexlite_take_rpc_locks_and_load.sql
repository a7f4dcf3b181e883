CREATE OR REPLACE FUNCTION dexlite_take_rpc_locks_and_load(
    flow text, keys text[], holder text, holder_kind text, process text, run text,
    all_names boolean, names text[], maps text[], pair_names text[], pair_instances text[]
) RETURNS TABLE (
    kind text, run_id varchar, flow_id varchar, flow_type varchar, status varchar,
    input text, request_id varchar, started_at bigint, closed_at bigint, timeout_at bigint,
    error_type varchar, error_message text, name varchar, instance varchar, value text,
    blob boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    target varchar;
    taken integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(flow, 7));
    -- As 0010's dexlite_take_rpc_locks: no WAL flush of its own (the commit's fence fails an
    -- RPC whose rows a crash lost), and a key taken already refuses them all.
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO attribute_locks (flow_id, lock_key, owner, kind, phase, process_id)
    SELECT flow, key, holder, holder_kind, '', process FROM unnest(keys) AS key
    ON CONFLICT (flow_id, lock_key) DO NOTHING;
    GET DIAGNOSTICS taken = ROW_COUNT;
    IF taken < cardinality(keys) THEN
        DELETE FROM attribute_locks
        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";
        RETURN;
    END IF;
    IF run IS NULL THEN
        SELECT f.latest_run_id INTO target FROM flows AS f WHERE f.flow_id = flow COLLATE "C";
    ELSE
        SELECT r.run_id INTO target FROM runs AS r
        WHERE r.run_id = run COLLATE "C" AND r.flow_id = flow COLLATE "C";
    END IF;
    RETURN QUERY SELECT CASE WHEN r.run_id IS NULL THEN 't' ELSE 'r' END::text,
        r.run_id::varchar, r.flow_id::varchar, r.flow_type::varchar,
        r.status::varchar, r.input::text, r.request_id::varchar, r.started_at::bigint,
        r.closed_at::bigint, r.timeout_at::bigint, r.error_type::varchar,
        r.error_message::text, NULL::varchar, NULL::varchar, NULL::text, NULL::boolean
    FROM (SELECT 1) AS taken_row LEFT JOIN runs AS r ON r.run_id = target;
    IF target IS NULL THEN
        RETURN;
    END IF;
    IF all_names OR cardinality(names) > 0 THEN
        RETURN QUERY SELECT 'a'::text, NULL::varchar, NULL::varchar, NULL::varchar,
            NULL::varchar, NULL::text, NULL::varchar, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::varchar, NULL::text, a.name::varchar, a.instance::varchar, a.value::text,
            a.blob
        FROM attributes AS a
        WHERE a.run_id = target AND a.instance = ''
            AND (all_names OR a.name = ANY (names COLLATE "C"));
    END IF;
    IF cardinality(maps) > 0 THEN
        RETURN QUERY SELECT 'a'::text, NULL::varchar, NULL::varchar, NULL::varchar,
            NULL::varchar, NULL::text, NULL::varchar, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::varchar, NULL::text, a.name::varchar, a.instance::varchar, a.value::text,
            a.blob
        FROM attributes AS a
        WHERE a.run_id = target AND a.instance <> '' AND a.name = ANY (maps COLLATE "C");
    END IF;
    IF cardinality(pair_names) > 0 THEN
        RETURN QUERY SELECT 'a'::text, NULL::varchar, NULL::varchar, NULL::varchar,
            NULL::varchar, NULL::text, NULL::varchar, NULL::bigint, NULL::bigint, NULL::bigint,
            NULL::varchar, NULL::text, a.name::varchar, a.instance::varchar, a.value::text,
            a.blob
        FROM unnest(pair_names, pair_instances) AS p(n, i)
        JOIN attributes AS a
            ON a.run_id = target AND a.instance = p.i COLLATE "C" AND a.name = p.n COLLATE "C";
    END IF;
END $$;
