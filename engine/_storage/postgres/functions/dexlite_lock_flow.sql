CREATE OR REPLACE FUNCTION dexlite_lock_flow(flow text) RETURNS void
    LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(hashtextextended(flow, 7)) $$;
