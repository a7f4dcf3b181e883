"""A locked RPC's lock take and snapshot read as one call on PostgreSQL.

The call is ``dexlite_take_rpc_locks_and_load`` (``functions/dexlite_take_rpc_locks_and_load.sql``).

An RPC that takes locks reads its snapshot only once it holds them, so that it sees every
commit of the keys' earlier holders. Taking and reading were two round trips, both inside the
time the RPC holds its keys; ``dexlite_take_rpc_locks_and_load`` does both in one call, each
of its statements reading afresh (see the migration for why one SQL statement could not).

Only plans that read Attributes alone go this way; a plan that reads Channels takes its locks
and then reads as before (:func:`take_and_load` answers None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine._storage.reads import run_from_record
from engine._storage.records import Args, LoadPlan, RunInfo, Snapshot, StoredValue

SQL = "SELECT * FROM dexlite_take_rpc_locks_and_load($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"


@dataclass(frozen=True)
class Loaded:
    """The snapshot read with the locks: None when there is no such run."""

    snapshot: Snapshot | None


def take_and_load(
    *,
    flow_id: str,
    keys: Sequence[str],
    owner: str,
    kind: str,
    process: str,
    run_id: str | None,
    plan: LoadPlan,
) -> Args | None:
    """The call's arguments, or None when ``plan`` reads Channels (it reads on its own)."""
    if plan.channel_sizes or plan.channels or plan.channel_instances:
        return None
    return (
        flow_id,
        list(keys),
        owner,
        kind,
        process,
        run_id,
        plan.names is None,
        list(plan.names or ()),
        list(plan.whole_maps),
        [name for name, _ in plan.instances],
        [instance for _, instance in plan.instances],
    )


def loaded(rows: Sequence[Any]) -> Loaded | None:
    """Read the call's rows: None when the locks were not taken (nothing changed)."""
    if not rows:
        return None
    run: RunInfo | None = None
    values: dict[tuple[str, str], StoredValue] = {}
    for row in rows:
        kind = row["kind"]
        if kind == "a":
            values[(row["name"], row["instance"])] = StoredValue(row["value"], bool(row["blob"]))
        elif kind == "r":
            run = run_from_record(row)
    return Loaded(None if run is None else Snapshot(run, values))
