"""A PostgreSQL function that takes an RPC's locks and reads its snapshot in one call.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06

A locked RPC took its locks (``dexlite_take_rpc_locks``), then read its snapshot: two round
trips before its handler could run, both inside the time it holds its keys. One statement
cannot do both: in READ COMMITTED it reads as of its start, so an RPC whose commit released
the keys while this one waited for the Flow's advisory lock would be taken after but read
before, and its writes lost. A PL/pgSQL function can: each statement in it reads afresh, so
the snapshot it reads once it holds the keys includes every commit that released them.

``dexlite_take_rpc_locks_and_load`` answers no row when the keys could not be taken the quick
way (changing nothing: the caller runs the full transaction, then reads); otherwise a first
row of kind ``t``, the run's row (kind ``r``) if the run exists, and the Attribute rows the
RPC's plan loads (kind ``a``): the singletons named (or all of them), whole maps, and exact
map instances, each part a prefix lookup of the Attribute key as ``reads`` reads them. Plans
that read Channels read as before, after taking the locks.

SQLite has no use for it.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# The columns compared are in the "C" collation (see tables._by_code_point); the parameters
# are given it explicitly, or PostgreSQL could not pick between the two implicit collations.
# ``#variable_conflict use_column``: the result's column names are also table columns.
_FUNCTION = """
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
_NAME = (
    "dexlite_take_rpc_locks_and_load(text, text[], text, text, text, text, boolean, text[], "
    "text[], text[], text[])"
)


def upgrade() -> None:
    """Create the function (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)


def downgrade() -> None:
    """Drop it."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP FUNCTION IF EXISTS {_NAME}")
