"""The SQLite Committer: units go to the one writer, which commits them in the order given.

Since nothing commits out of order, an RPC whose effects are Attribute writes alone hands its
keys on as soon as its unit is queued (a handoff, see ``handoff``): the next holder reads the
committed state with the queued writes laid over it, and its own unit, queued behind, commits
only if each unit it read did. The caller is still answered once its unit committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from engine._runtime.committer import Committer, RPCCommit
from engine._runtime.handoff import HandedOff
from engine._runtime.locks import MemoryLockTable
from engine._runtime.ports import Notifier
from engine._runtime.workload import Workload
from engine._storage.records import CommitResult
from engine._storage.sqlite.database import SQLiteDatabase
from engine.telemetry import Telemetry


class SQLiteCommitter(Committer):
    """Commits through SQLite's ordered writer, handing RPCs' keys on as units are queued."""

    def __init__(
        self,
        database: SQLiteDatabase,
        notifier: Notifier,
        workload: Workload,
        locks: MemoryLockTable,
        telemetry: Telemetry | None = None,
        *,
        handoffs: bool = True,
    ) -> None:
        super().__init__(database, notifier, workload, locks, telemetry)
        self._writer = database
        self._memory_locks = locks
        #: Whether writes-only RPCs hand their keys on as their units are queued.
        self._hand_off = handoffs

    async def _wait_for(self, after: tuple[HandedOff, ...]) -> None:
        """Nothing to wait for: the writer commits the units read before this one."""

    async def rpc(self, rpc: RPCCommit) -> CommitResult:
        """Queue a locked writes-only RPC's unit, then free its keys (a handoff); commit any
        other RPC first and free its keys after."""
        if not (rpc.locked and rpc.writes_only and self._hand_off):
            return await super().rpc(rpc)
        handed = HandedOff(rpc.unit(), rpc.after, rpc.run.run_id, rpc.effects.writes, rpc.run)
        try:
            committed = self._queue(rpc.flow_id, handed)
        finally:
            self._memory_locks.release(rpc.flow_id, rpc.owner)
            rpc.on_released()
        return await committed

    def _queue(self, flow_id: str, handed: HandedOff) -> Awaitable[CommitResult]:
        """Queue ``handed`` for the writer now and return its commit, published once done.

        Until it ends, :attr:`handoffs` lists it under ``flow_id``: readers lay its writes
        over what they read, even if its caller is canceled meanwhile (only the writer's
        answer ends it).
        """
        queued: asyncio.Future[CommitResult] = self._writer.submit(handed)
        self.entered()  # now: the caller frees its keys before it awaits
        self.handoffs.add(flow_id, handed)
        queued.add_done_callback(lambda _: self.handoffs.remove(flow_id, handed))
        return self._published(queued, entered=True)
