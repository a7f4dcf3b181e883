"""A locked RPC's writes commit through one function; its lock take calls no other function.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07

``rpc_writes`` committed a writes-only RPC as one statement of six common table expressions
(the lock drop, the run's commit number, the Attribute upserts and deletes, the history event,
the change-log rows). PostgreSQL initialises every node of that plan on each run, the deletes
and change-log rows included when there are none, and profiles of locked RPCs put a quarter of
the server's CPU in that initialisation. ``dexlite_commit_rpc_writes`` does the same steps in
order and skips those with nothing to do: an RPC's commit then cost the server about a sixth
less, measured with pgbench on the bench's counter RPC. It answers ``{dropped, committed}``:
``dropped`` as ``dexlite_drop_rpc_locks`` answers it (-1 when a Step waits on the Flow, nothing
done), ``committed`` 1 when the writes were made (the lock rows were all there and the run
open), 0 when not. With ``keep``, the commit of an RPC that passes its lock rows on in process
(the relay, 0011), it keeps the rows instead and raises as ``dexlite_keep_rpc_locks`` does; the
relay's commits used the same writes as a statement of common table expressions.

``dexlite_take_rpc_locks_and_load`` (0009) called ``dexlite_take_rpc_locks`` (0010), which
called ``dexlite_lock_flow`` (0005): three function calls per take. Here it does the take
itself, the same steps as 0010's, and answers the run in the row that says the locks were
taken (a run not found leaves that row's run columns NULL), one query fewer. What both answer
is unchanged.

SQLite has no use for it.
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Frozen copies: what this revision installs, and what its downgrade puts back (0009's take).
# The functions' current texts are engine/_storage/postgres/functions/*.sql. The columns
# compared are in the "C" collation (see tables._by_code_point); the parameters are given it
# explicitly, or PostgreSQL could not pick between the two implicit collations.

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

_TAKE_AND_LOAD = """
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
END $$
"""

_TAKE_AND_LOAD_0009 = """
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
BEGIN
    IF NOT dexlite_take_rpc_locks(flow, keys, holder, holder_kind, process) THEN
        RETURN;
    END IF;
    IF run IS NULL THEN
        SELECT f.latest_run_id INTO target FROM flows AS f WHERE f.flow_id = flow COLLATE "C";
    ELSE
        SELECT r.run_id INTO target FROM runs AS r
        WHERE r.run_id = run COLLATE "C" AND r.flow_id = flow COLLATE "C";
    END IF;
    RETURN QUERY SELECT 't'::text, NULL::varchar, NULL::varchar, NULL::varchar, NULL::varchar,
        NULL::text, NULL::varchar, NULL::bigint, NULL::bigint, NULL::bigint, NULL::varchar,
        NULL::text, NULL::varchar, NULL::varchar, NULL::text, NULL::boolean;
    IF target IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT 'r'::text, r.run_id::varchar, r.flow_id::varchar, r.flow_type::varchar,
        r.status::varchar, r.input::text, r.request_id::varchar, r.started_at::bigint,
        r.closed_at::bigint, r.timeout_at::bigint, r.error_type::varchar,
        r.error_message::text, NULL::varchar, NULL::varchar, NULL::text, NULL::boolean
    FROM runs AS r WHERE r.run_id = target;
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
END $$
"""

_COMMIT_NAME = (
    "dexlite_commit_rpc_writes(text, text, varchar, integer, bigint, varchar[], varchar[], "
    "text[], boolean[], varchar[], varchar[], varchar, text, varchar[], varchar[], text[], "
    "boolean)"
)


def upgrade() -> None:
    """Create the commit function and replace the take (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_COMMIT)
    op.execute(_TAKE_AND_LOAD)


def downgrade() -> None:
    """Drop the commit function; put 0009's take back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {_COMMIT_NAME}")
    op.execute(_TAKE_AND_LOAD_0009)
