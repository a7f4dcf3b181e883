"""Attribute locks of running Flows.

One Step execution or RPC invocation holds a lock at a time. RPCs never queue: a held lock fails
them at once. Steps do queue, first come first served: a Step waits behind earlier Steps that
want any of the same keys, but a waiting Step holds nothing, so an RPC may still take a free key.

Locks live in memory because this process is the only one running the Flows of its database;
after a restart they are taken again from the durable Step state (queued retries reacquire
theirs before anything else runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine._storage.records import LoadPlan
from engine.errors import RPCLockConflictError

STEP = "a Step"
RPC = "an RPC"


def grants(waiters: Sequence[tuple[str, Collection[str]]], holders: Mapping[str, str]) -> list[int]:
    """Return which ``waiters`` (owner, keys), in arrival order, are granted their keys now,
    by index: first come, first served. ``holders`` maps each held key to its owner.

    A waiter is granted when each of its keys is free or already its own, and no earlier
    waiter that is still waiting wants it: later Steps wanting a key wait behind the first.
    Both lock tables grant by this rule (in memory, and as rows of a PostgreSQL database).
    """
    held = dict(holders)
    blocked: set[str] = set()
    granted: list[int] = []
    for n, (owner, keys) in enumerate(waiters):
        if all(held.get(key, owner) == owner and key not in blocked for key in keys):
            for key in keys:
                held[key] = owner
            granted.append(n)
        else:
            blocked.update(keys)
    return granted


@dataclass
class _Waiter:
    owner: str
    keys: tuple[str, ...]
    future: asyncio.Future[None]


@dataclass
class _FlowLocks:
    holders: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (kind, owner)
    waiters: list[_Waiter] = field(default_factory=list)


class MemoryLockTable:
    """Holds the Attribute locks of every Flow ID run by this engine (the in-process LockTable)."""

    def __init__(self) -> None:
        self._flows: dict[str, _FlowLocks] = {}

    def _flow(self, flow_id: str) -> _FlowLocks:
        locks = self._flows.get(flow_id)
        if locks is None:
            locks = self._flows[flow_id] = _FlowLocks()
        return locks

    def holder(self, flow_id: str, key: str) -> tuple[str, str] | None:
        """Return (kind, owner) of the holder of ``key``, or None."""
        locks = self._flows.get(flow_id)
        return locks.holders.get(key) if locks else None

    async def acquire_for_rpc(
        self,
        flow_id: str,
        keys: Iterable[str],
        owner: str,
        load: tuple[str | None, LoadPlan] | None = None,
    ) -> None:
        """Take every key at once or raise RPCLockConflictError naming the first held key
        (``load`` is the caller's to read: it reads committed state in this process)."""
        wanted = sorted(set(keys))
        if not wanted:
            return None
        locks = self._flow(flow_id)
        for key in wanted:
            held = locks.holders.get(key)
            if held is not None:
                raise RPCLockConflictError(key, held[0], flow_id=flow_id, operation="invokeRpc")
        for key in wanted:
            locks.holders[key] = (RPC, owner)
        return None

    def acquire_for_step(
        self, flow_id: str, keys: Iterable[str], owner: str, phase: str = ""
    ) -> asyncio.Future[None]:
        """Return a future that resolves once the Step holds every key (FIFO among Steps)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        wanted = tuple(sorted(set(keys)))
        if not wanted:
            future.set_result(None)
            return future
        locks = self._flow(flow_id)
        locks.waiters.append(_Waiter(owner, wanted, future))
        self._grant(flow_id, locks)
        return future

    def hold_for_step(self, flow_id: str, keys: Iterable[str], owner: str) -> None:
        """Record that a Step holds ``keys`` (recovery of a queued retry that keeps its locks)."""
        locks = self._flow(flow_id)
        for key in keys:
            locks.holders.setdefault(key, (STEP, owner))

    def release(self, flow_id: str, owner: str) -> None:
        """Release every key ``owner`` holds and drop its wait, then grant waiting Steps."""
        locks = self._flows.get(flow_id)
        if locks is None:
            return
        for key in [k for k, (_, o) in locks.holders.items() if o == owner]:
            del locks.holders[key]
        remaining = []
        for waiter in locks.waiters:
            if waiter.owner == owner:
                if not waiter.future.done():
                    waiter.future.cancel()
            else:
                remaining.append(waiter)
        locks.waiters = remaining
        self._grant(flow_id, locks)

    def hold_past_end(self, flow_id: str, owner: str) -> None:
        """An execution ended while its attempt still runs: its keys stay held (in memory
        nothing frees them before :meth:`release`)."""

    async def release_now(self, flow_id: str, owner: str) -> None:
        """Release an RPC invocation's keys (at once: they live in memory)."""
        self.release(flow_id, owner)

    def _grant(self, flow_id: str, locks: _FlowLocks) -> None:
        waiters = [w for w in locks.waiters if not w.future.done()]
        holders = {key: owner for key, (_, owner) in locks.holders.items()}
        granted = set(grants([(w.owner, w.keys) for w in waiters], holders))
        for n, waiter in enumerate(waiters):
            if n in granted:
                for key in waiter.keys:
                    locks.holders[key] = (STEP, waiter.owner)
                waiter.future.set_result(None)
        locks.waiters = [w for n, w in enumerate(waiters) if n not in granted]
        if not locks.holders and not locks.waiters:
            self._flows.pop(flow_id, None)
