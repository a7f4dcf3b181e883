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

import importlib

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_TAKE_AND_LOAD_0009 = importlib.import_module(
    "engine._storage.migrations.versions.0009_rpc_take_and_load"
)._FUNCTION
#: 0012's rewrite of a function's text, each replaced text asserted found once.
_replaced = importlib.import_module(
    "engine._storage.migrations.versions.0012_primary_key_lookups"
)._replaced

# The columns compared are in the "C" collation (see tables._by_code_point); the parameters
# are given it explicitly, or PostgreSQL could not pick between the two implicit collations.
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

#: 0009's take and load with 0010's take (and 0005's Flow lock) written in, and the run's row
#: as the row that says the locks were taken: what replaces what.
_TAKE_IN_PLACE = (
    (
        """DECLARE
    target varchar;
""",
        """DECLARE
    target varchar;
    taken integer;
""",
    ),
    (
        """    IF NOT dexlite_take_rpc_locks(flow, keys, holder, holder_kind, process) THEN
        RETURN;
    END IF;
""",
        """    PERFORM pg_advisory_xact_lock(hashtextextended(flow, 7));
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
""",
    ),
    (
        "    RETURN QUERY SELECT 't'::text, NULL::varchar, NULL::varchar, NULL::varchar, "
        """NULL::varchar,
        NULL::text, NULL::varchar, NULL::bigint, NULL::bigint, NULL::bigint, NULL::varchar,
        NULL::text, NULL::varchar, NULL::varchar, NULL::text, NULL::boolean;
    IF target IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT 'r'::text, r.run_id::varchar,""",
        """    RETURN QUERY SELECT CASE WHEN r.run_id IS NULL THEN 't' ELSE 'r' END::text,
        r.run_id::varchar,""",
    ),
    (
        """    FROM runs AS r WHERE r.run_id = target;
""",
        """    FROM (SELECT 1) AS taken_row LEFT JOIN runs AS r ON r.run_id = target;
    IF target IS NULL THEN
        RETURN;
    END IF;
""",
    ),
)


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
    op.execute(_replaced(_TAKE_AND_LOAD_0009, _TAKE_IN_PLACE))


def downgrade() -> None:
    """Drop the commit function; put 0009's take back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {_COMMIT_NAME}")
    op.execute(_TAKE_AND_LOAD_0009)
