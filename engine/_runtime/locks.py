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
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine._runtime.handoff import LockedCommit
from engine._storage.records import CommitResult
from engine.errors import RPCLockConflictError

STEP = "a Step"
RPC = "an RPC"


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

    async def acquire_for_rpc(self, flow_id: str, keys: Iterable[str], owner: str) -> None:
        """Take every key at once or raise RPCLockConflictError naming the first held key."""
        wanted = sorted(set(keys))
        if not wanted:
            return
        locks = self._flow(flow_id)
        for key in wanted:
            held = locks.holders.get(key)
            if held is not None:
                raise RPCLockConflictError(key, held[0], flow_id=flow_id, operation="invokeRpc")
        for key in wanted:
            locks.holders[key] = (RPC, owner)

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

    async def commit_releasing(
        self, flow_id: str, owner: str, commit: LockedCommit
    ) -> CommitResult:
        """Commit ``commit.unit`` and release ``owner``'s keys: as soon as the unit is queued
        when the writer commits in order (the next holder reads the handed-off writes), else
        once it committed; whatever the commit's outcome."""
        if commit.queue is not None:
            committed = commit.queue(commit.unit)
            self.release(flow_id, owner)
            commit.on_released()
            return await committed
        try:
            return await commit.commit(commit.unit)
        finally:
            self.release(flow_id, owner)
            commit.on_released()

    def _grant(self, flow_id: str, locks: _FlowLocks) -> None:
        blocked: set[str] = set()
        still_waiting: list[_Waiter] = []
        for waiter in locks.waiters:
            if waiter.future.done():
                continue
            free = all(k not in locks.holders and k not in blocked for k in waiter.keys)
            if free:
                for key in waiter.keys:
                    locks.holders[key] = (STEP, waiter.owner)
                waiter.future.set_result(None)
            else:
                # Later Steps wanting these keys wait behind this one.
                blocked.update(waiter.keys)
                still_waiting.append(waiter)
        locks.waiters = still_waiting
        if not locks.holders and not locks.waiters:
            self._flows.pop(flow_id, None)
