"""The lock rows of a PostgreSQL database, and the one algorithm that reads and changes them.

Every function here runs inside a transaction that holds the Flow's advisory lock
(:func:`lock_flow`), so the grant order is the same whichever process asks; the
``PostgresLockTable`` (``locks``) decides when to run them and tells the waiting Steps of this
process what they were granted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, text

from engine._runtime.locks import RPC, STEP, grants
from engine._runtime.postgres.lease import live_processes
from engine._storage import tables as t
from engine._storage.prepared import Prepared
from engine._storage.records import Phase, StepState
from engine.errors import RPCLockConflictError

#: The channel a grant to another process's Step is announced on (the payload: the Flow ID).
CHANNEL = "dexlite_locks"
_l, _w, _se = t.attribute_locks, t.lock_waiters, t.step_executions
#: The phase of a lock row kept by a canceled attempt that is still running.
ENDING = "ENDING"


@dataclass(frozen=True)
class Holder:
    kind: str
    owner: str
    alive: bool


def lock_flow(conn: Connection, flow_id: str) -> None:
    LOCK_FLOW.tuples(conn, {"f": flow_id})


#: The Flow's transaction-scoped advisory lock, and the one-statement fast paths of an RPC's
#: locks (``engine/_storage/postgres/functions``): each answers false, having changed nothing, when
#: its common case does not hold (a row on a key to take; a Step waiting on the Flow).
LOCK_FLOW = Prepared(text("SELECT dexlite_lock_flow(:f)"))
TAKE_RPC_LOCKS = Prepared(text("SELECT dexlite_take_rpc_locks(:f, :keys, :owner, :kind, :process)"))
DROP_RPC_LOCKS = Prepared(text("SELECT dexlite_drop_rpc_locks(:f, :owner)"))


def holders_of(conn: Connection, flow_id: str, keys: list[str] | None) -> dict[str, Holder]:
    """Return the holder of each held key of ``flow_id`` (of ``keys`` only, when given)."""
    # An execute phase may run while the row still says wait_for: a wait that neither wrote
    # nor waits goes on to execute without a commit.
    same_phase = or_(
        _se.c.phase == _l.c.phase, and_(_l.c.phase == Phase.EXECUTE, _se.c.phase == Phase.WAIT_FOR)
    )
    step_alive = and_(_l.c.kind == STEP, _se.c.state == StepState.PENDING, same_phase)
    # A canceled attempt still running keeps its locks until its process lets go of them.
    ending = and_(_l.c.kind == STEP, _l.c.phase == ENDING, _l.c.process_id.in_(live_processes()))
    rpc_alive = and_(_l.c.kind == RPC, _l.c.process_id.in_(live_processes()))
    query = (
        select(
            _l.c.lock_key, _l.c.kind, _l.c.owner, or_(step_alive, ending, rpc_alive).label("alive")
        )
        .select_from(_l.outerjoin(_se, _se.c.id == _l.c.owner))
        .where(_l.c.flow_id == flow_id)
    )
    if keys is not None:
        query = query.where(_l.c.lock_key.in_(keys))
    return {
        row.lock_key: Holder(row.kind, row.owner, bool(row.alive)) for row in conn.execute(query)
    }


def clear_dead(conn: Connection, flow_id: str, holders: dict[str, Holder]) -> None:
    dead = [key for key, holder in holders.items() if not holder.alive]
    if dead:
        conn.execute(delete(_l).where(_l.c.flow_id == flow_id, _l.c.lock_key.in_(dead)))
        for key in dead:
            del holders[key]


def grant(conn: Connection, flow_id: str, me: str, mine: bool = True) -> list[str]:
    """Grant waiting Steps of ``flow_id`` in arrival order; return the owners granted, and
    (``mine``) this process's Steps holding locks on it.

    Waiters of processes that died are dropped (their Steps are taken over, and wait again).
    """
    waiters = conn.execute(
        select(_w.c.seq, _w.c.owner, _w.c.phase, _w.c.lock_keys, _w.c.process_id)
        .where(_w.c.flow_id == flow_id)
        .order_by(_w.c.seq)
    ).all()
    if not waiters and not mine:
        return []  # the common case of an RPC's release: nobody to grant to
    holders = holders_of(conn, flow_id, None)
    clear_dead(conn, flow_id, holders)
    live = set(conn.execute(live_processes()).scalars()) if waiters else set()
    gone = [w.seq for w in waiters if w.process_id not in live]
    waiting = [w for w in waiters if w.process_id in live]
    wanted = [(w.owner, json.loads(w.lock_keys)) for w in waiting]
    chosen = grants(wanted, {key: holder.owner for key, holder in holders.items()})
    granted, elsewhere = [], False
    for n in chosen:
        waiter, (_, keys) = waiting[n], wanted[n]
        conn.execute(delete(_l).where(_l.c.flow_id == flow_id, _l.c.lock_key.in_(keys)))
        conn.execute(
            insert(_l),
            [
                {
                    "flow_id": flow_id,
                    "lock_key": key,
                    "owner": waiter.owner,
                    "kind": STEP,
                    "phase": waiter.phase,
                    "process_id": waiter.process_id,
                }
                for key in keys
            ],
        )
        for key in keys:
            holders[key] = Holder(STEP, waiter.owner, True)
        gone.append(waiter.seq)
        granted.append(waiter.owner)
        elsewhere = elsewhere or waiter.process_id != me
    if gone:
        conn.execute(delete(_w).where(_w.c.seq.in_(gone)))
    if elsewhere:
        conn.execute(select(func.pg_notify(CHANNEL, flow_id)))
    if not mine:
        return granted
    # Also the Steps of this process granted earlier by another process's change: a waiter
    # holds nothing until it holds every key, so holding any means it was granted.
    held = conn.execute(
        select(_l.c.owner)
        .where(_l.c.flow_id == flow_id, _l.c.kind == STEP, _l.c.process_id == me)
        .distinct()
    ).scalars()
    return [*granted, *held]


def lost(conn: Connection, flow_id: str, keys: tuple[str, ...]) -> None:
    """Raise RPCLockConflictError for an RPC's commit that found fewer of its rows than it
    took ``keys``, naming a key someone else holds now when there is one (its own rows are
    dropped by then, so every row left on ``keys`` is another holder's)."""
    holders = holders_of(conn, flow_id, list(keys))
    key = next((k for k in keys if k in holders), keys[0])
    holder = holders[key].kind if key in holders else "nobody: this RPC's hold on it was lost"
    raise RPCLockConflictError(key, holder, flow_id=flow_id, operation="invokeRpc")


def release_all(
    conn: Connection, flow_id: str, owner: str, me: str, mine: bool
) -> tuple[int, list[str]]:
    """Under the Flow's advisory lock, drop ``owner``'s rows and grant the waiting Steps;
    return how many rows were dropped and the owners ``grant`` reports."""
    lock_flow(conn, flow_id)
    dropped = conn.execute(delete(_l).where(_l.c.flow_id == flow_id, _l.c.owner == owner))
    return dropped.rowcount, grant(conn, flow_id, me, mine)


def drop_rpc_locks(conn: Connection, flow_id: str, owner: str) -> int:
    """Drop ``owner``'s keys unless a Step waits on the Flow: the number of rows dropped, or
    -1 (nothing done: the full transaction must grant the waiters)."""
    return int(DROP_RPC_LOCKS.tuples(conn, {"f": flow_id, "owner": owner})[0][0])
