"""Attribute locks as rows of a PostgreSQL database, so that every process sees every holder.

The rules are those of the in-process table (``engine._runtime.locks``): RPCs never queue,
Steps queue first come first served behind earlier Steps wanting any of the same keys, and a
waiting Step holds nothing. Every change to one Flow ID's locks runs in one transaction under
a transaction-scoped advisory lock on the Flow ID, so the grant order is the same whichever
process asks.

A holder's row is alive while its holder is: a Step's while its execution is still pending in
the phase it took the lock for (or, for ``execute``, still in ``wait_for``: see
``holders_of``), so a commit that ends the execution or moves it to another phase frees the
lock in the same transaction, whoever applies the release afterwards; an RPC's while its
process's lease lasts. Dead rows are removed by the next change on the Flow.
Another process learns that a Step of its own was granted through ``NOTIFY dexlite_locks``
or, at the latest, the next poll.

An RPC's locks take the fast path first: one statement, under the same advisory lock, takes
keys no row is on, or drops the keys of a Flow no Step waits on. Otherwise it changes nothing
and the full transaction runs, so either way the outcome is the full transaction's.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from sqlalchemy import Connection, delete, insert, update

from engine._runtime.locks import RPC, STEP
from engine._runtime.postgres.lease import ProcessLease
from engine._runtime.postgres.lock_rows import (
    DROP_RPC_LOCKS,
    ENDING,
    TAKE_RPC_LOCKS,
    clear_dead,
    grant,
    holders_of,
    lock_flow,
    lost,
    release_all,
)
from engine._runtime.postgres.relay import Relays
from engine._runtime.workload import Workload
from engine._storage import tables as t
from engine._storage.postgres.database import PostgresDatabase
from engine._storage.postgres.rpc_loads import SQL as TAKE_AND_LOAD
from engine._storage.postgres.rpc_loads import Loaded, loaded, take_and_load
from engine._storage.records import LoadPlan
from engine.errors import RPCLockConflictError, UnavailableError

log = logging.getLogger("dexlite.locks")

LOCK_CHANGES = "Attribute lock changes"
_l, _w = t.attribute_locks, t.lock_waiters


class PostgresLockTable:
    """The LockTable of a PostgreSQL database."""

    def __init__(self, database: PostgresDatabase, lease: ProcessLease, workload: Workload) -> None:
        self._database = database
        self._lease = lease
        self._workload = workload
        # (Flow ID, owner) -> the future of a Step of this process waiting for its locks.
        self._waiting: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._order: dict[str, tuple[asyncio.Lock, int]] = {}
        # (Flow ID, owner) of this process's Steps that asked for locks or kept them.
        self._holding: set[tuple[str, str]] = set()  # and how many tasks use it
        # The keys each RPC invocation of this process holds, by owner token.
        self._rpc_keys: dict[str, tuple[str, ...]] = {}
        # The Flow ID of each RPC invocation whose rows may be left behind: its take or its
        # release met an unavailable database (the statement may have run all the same).
        # The poll drops them once the database answers; until then the keys stay held.
        self._unreleased: dict[str, str] = {}
        self._relays = Relays(
            write_batch=database.write_batch,
            release_rows=self.release_now,
            raise_lost=self.raise_lost,
            spawn=self._spawn_task,
        )

    async def acquire_for_rpc(
        self,
        flow_id: str,
        keys: Iterable[str],
        owner: str,
        load: tuple[str | None, LoadPlan] | None = None,
    ) -> Loaded | None:
        """Take every key at once or raise RPCLockConflictError naming the first held key.

        With ``load``, the quick take also reads the snapshot, in the same call (see
        ``rpc_loads``), and returns it; None when the caller must read it."""
        wanted = sorted(set(keys))
        if not wanted:
            return None
        if await self._relays.pass_on(flow_id, wanted, owner, self.waits_on(flow_id)):
            return None  # passed on by this process's last RPC on them: read what it wrote
        try:
            return await self._take_for_rpc(flow_id, wanted, owner, load)
        except RPCLockConflictError:
            raise
        except Exception:
            # Its rows may be in the database (the answer was lost): drop them later.
            self._unreleased[owner] = flow_id
            raise

    async def _take_for_rpc(
        self, flow_id: str, wanted: list[str], owner: str, load: tuple[str | None, LoadPlan] | None
    ) -> Loaded | None:
        me = self._lease.process_id
        where = None
        if load is not None:
            run_id, plan = load
            where = take_and_load(
                flow_id=flow_id,
                keys=wanted,
                owner=owner,
                kind=RPC,
                process=me,
                run_id=run_id,
                plan=plan,
            )
        if where is not None:
            found = loaded(
                await self._database.write_statement(
                    TAKE_AND_LOAD, where, grouped=True, rows=True, flow_id=flow_id
                )
            )
            if found is not None:
                self._rpc_keys[owner] = tuple(wanted)
                return found  # no row was on the keys: they are this RPC's now, and it read
        else:
            params = {"f": flow_id, "keys": wanted, "owner": owner, "kind": RPC, "process": me}
            if (await self._database.write_prepared(TAKE_RPC_LOCKS, params))[0][0]:
                self._rpc_keys[owner] = tuple(wanted)
                return None  # no row was on the keys: they are this RPC's now

        # This process's own invocations whose rows an outage left on the Flow are over.
        leftovers = [o for o, flow in self._unreleased.items() if flow == flow_id]

        def unit(conn: Connection) -> None:
            lock_flow(conn, flow_id)
            if leftovers:
                conn.execute(delete(_l).where(_l.c.flow_id == flow_id, _l.c.owner.in_(leftovers)))
            holders = holders_of(conn, flow_id, wanted)
            for key in wanted:
                holder = holders.get(key)
                if holder is not None and holder.alive:
                    raise RPCLockConflictError(
                        key, holder.kind, flow_id=flow_id, operation="invokeRpc"
                    )
            clear_dead(conn, flow_id, holders)
            conn.execute(
                insert(_l),
                [
                    {
                        "flow_id": flow_id,
                        "lock_key": key,
                        "owner": owner,
                        "kind": RPC,
                        "phase": "",
                        "process_id": me,
                    }
                    for key in wanted
                ],
            )

        await self._database.write(unit)
        self._rpc_keys[owner] = tuple(wanted)
        for gone in leftovers:
            self._unreleased.pop(gone, None)
        return None

    def acquire_for_step(
        self, flow_id: str, keys: Iterable[str], owner: str, phase: str = ""
    ) -> asyncio.Future[None]:
        """Return a future that resolves once the Step holds every key (FIFO among Steps)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        wanted = sorted(set(keys))
        if not wanted:
            future.set_result(None)
            return future
        self._waiting[(flow_id, owner)] = future
        self._holding.add((flow_id, owner))
        me = self._lease.process_id

        def unit(conn: Connection) -> list[str]:
            lock_flow(conn, flow_id)
            conn.execute(
                insert(_w).values(
                    flow_id=flow_id,
                    owner=owner,
                    phase=phase,
                    lock_keys=json.dumps(wanted),
                    process_id=me,
                )
            )
            return grant(conn, flow_id, me)

        self._spawn(flow_id, unit)
        return future

    def hold_for_step(self, flow_id: str, keys: Iterable[str], owner: str) -> None:
        """A queued retry's lock rows are in the database already: remember to release them."""
        self._holding.add((flow_id, owner))

    def hold_past_end(self, flow_id: str, owner: str) -> None:
        """Keep the keys of an execution that ended while its attempt still runs, until
        :meth:`release` (its commit made them dead otherwise)."""
        if (flow_id, owner) not in self._holding:
            return

        def unit(conn: Connection) -> list[str]:
            lock_flow(conn, flow_id)
            conn.execute(
                update(_l)
                .where(_l.c.flow_id == flow_id, _l.c.owner == owner, _l.c.kind == STEP)
                .values(phase=ENDING)
            )
            return []

        self._spawn(flow_id, unit)

    def release(self, flow_id: str, owner: str) -> None:
        """Release every key ``owner`` holds or waits for, then grant waiting Steps."""
        future = self._waiting.pop((flow_id, owner), None)
        if future is not None and not future.done():
            future.cancel()
        if (flow_id, owner) not in self._holding:
            # It took no lock here. Rows it may hold from another process die with its
            # execution or phase (see holders_of), and the next change on the Flow removes them.
            return
        self._holding.discard((flow_id, owner))
        me = self._lease.process_id

        def unit(conn: Connection) -> list[str]:
            lock_flow(conn, flow_id)
            conn.execute(delete(_l).where(_l.c.flow_id == flow_id, _l.c.owner == owner))
            conn.execute(delete(_w).where(_w.c.flow_id == flow_id, _w.c.owner == owner))
            return grant(conn, flow_id, me)

        self._spawn(flow_id, unit)

    async def release_now(self, flow_id: str, owner: str) -> None:
        """Release an RPC invocation's keys before the RPC answers its caller."""
        if self._relays.holds(flow_id, owner):
            self._relays.let_go(flow_id, owner)
            return
        me = self._lease.process_id

        mine = self.waits_on(flow_id)
        self._rpc_keys.pop(owner, None)

        def unit(conn: Connection) -> list[str]:
            return release_all(conn, flow_id, owner, me, mine)[1]

        async def release() -> list[str]:
            try:
                # Nobody to grant to (no Step waits on the Flow, none of this process's Steps
                # holds a lock on it to report): one statement drops the keys.
                if not mine and await self._dropped(flow_id, owner) >= 0:
                    return []
                return await self._database.write(unit)
            except Exception:
                self._unreleased[owner] = flow_id  # the poll drops them
                raise

        # Shielded: a canceled RPC must still free its keys.
        write = asyncio.ensure_future(release())
        self.granted(flow_id, await asyncio.shield(write))

    @property
    def relays(self) -> Relays:
        """This process's relays of RPC lock rows (see ``relay``)."""
        return self._relays

    @property
    def process_id(self) -> str:
        """The ID of this process, which its lock rows name."""
        return self._lease.process_id

    def taken(self, owner: str) -> tuple[str, ...]:
        """Hand over the keys RPC invocation ``owner`` took as rows (its commit drops them)."""
        return self._rpc_keys.pop(owner, ())

    def regrant(self, flow_id: str | None = None) -> None:
        """Grant again on ``flow_id`` (a NOTIFY named it), or on every Flow this process has
        a waiting Step on (the poll: holders may have died)."""
        flows = {flow_id} if flow_id is not None else {f for f, _ in self._waiting}
        me = self._lease.process_id
        if flow_id is None:
            self._drop_unreleased()
        for flow in flows:

            def unit(conn: Connection, flow: str = flow) -> list[str]:
                lock_flow(conn, flow)
                return grant(conn, flow, me)

            self._spawn(flow, unit)

    def _drop_unreleased(self) -> None:
        """Drop the rows RPC invocations may have left when the database was unavailable."""
        me = self._lease.process_id
        for owner, flow in list(self._unreleased.items()):

            def unit(conn: Connection, flow: str = flow, owner: str = owner) -> list[str]:
                return release_all(conn, flow, owner, me, self.waits_on(flow))[1]

            def dropped(owner: str = owner) -> None:
                self._unreleased.pop(owner, None)

            self._spawn(flow, unit, dropped)

    def waiting(self) -> int:
        """Return how many Steps of this process wait for locks."""
        return len(self._waiting)

    async def close(self) -> None:
        """Finish the lock changes under way."""
        for task in list(self._tasks):
            await asyncio.gather(task, return_exceptions=True)

    def _spawn_task(self, work: Awaitable[None]) -> None:
        """Run ``work`` in the background; :meth:`close` waits for it."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def raise_lost(self, flow_id: str, taken: tuple[str, ...]) -> None:
        """Raise the RPCLockConflictError of ``taken`` keys whose rows are gone."""
        await self._database.read(lambda conn: lost(conn, flow_id, taken))

    def _spawn(self, flow_id: str, unit: Any, done: Callable[[], None] | None = None) -> None:
        """Apply ``unit`` (a lock change) in the background, then ``done`` if it committed."""
        self._workload.enter(LOCK_CHANGES)
        # One Flow's changes apply in the order this process asked for them (FIFO among Steps).
        order, users = self._order.get(flow_id, (asyncio.Lock(), 0))
        self._order[flow_id] = (order, users + 1)

        async def run() -> None:
            try:
                async with order:
                    self.granted(flow_id, await self._database.write(unit))
                if done is not None:
                    done()
            except UnavailableError as exc:  # the poll tries again
                log.warning("a lock change on Flow %s waits for the database: %s", flow_id, exc)
            except Exception:  # the poll grants again
                log.exception("a lock change on Flow %s failed", flow_id, extra={"flowId": flow_id})
            finally:
                lock, left = self._order[flow_id]
                if left == 1:
                    del self._order[flow_id]
                else:
                    self._order[flow_id] = (lock, left - 1)
                self._workload.leave(LOCK_CHANGES)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dropped(self, flow_id: str, owner: str) -> int:
        """Drop ``owner``'s rows in one statement unless a Step waits on the Flow; return how
        many it dropped, or -1 having changed nothing (see ``drop_rpc_locks``)."""
        params = {"f": flow_id, "owner": owner}
        return int((await self._database.write_prepared(DROP_RPC_LOCKS, params))[0][0])

    def waits_on(self, flow_id: str) -> bool:
        """Whether a Step of this process waits for locks on ``flow_id``."""
        return any(flow == flow_id for flow, _ in self._waiting)

    def granted(self, flow_id: str, owners: list[str]) -> None:
        """Tell this process's Steps among ``owners`` that they hold their keys now."""
        for owner in owners:
            future = self._waiting.pop((flow_id, owner), None)
            if future is not None and not future.done():
                future.set_result(None)
