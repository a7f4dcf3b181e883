"""Retention: closed runs stay readable for a while, then are purged with everything they own."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from engine._runtime.committer import Committer
from engine._runtime.ports import BlobStore, TimerQueue
from engine._runtime.workload import Workload
from engine._storage import units
from engine.clock import Clock, to_micros

log = logging.getLogger("dexlite.retention")

#: Runs purged per transaction, so a large backlog never holds the writer for long.
PURGE_BATCH = 500
PURGES = "retention purges"


class Retention:
    """Purges runs closed longer than ``retention_seconds`` ago, every ``interval_seconds``."""

    def __init__(
        self,
        *,
        committer: Committer,
        blobs: BlobStore,
        timers: TimerQueue,
        workload: Workload,
        clock: Clock,
        retention_seconds: float,
        interval_seconds: float,
    ) -> None:
        self._committer = committer
        self._blobs = blobs
        self._timers = timers
        self._workload = workload
        self._clock = clock
        self.retention_seconds = retention_seconds
        self.interval_seconds = interval_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Purge now, then again after every interval of the engine's clock."""
        self._schedule(self._clock.now())

    async def stop(self) -> None:
        """Wait for a purge in progress to end (it is one transaction at a time)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _schedule(self, when: float) -> None:
        def fire() -> None:
            self._workload.enter(PURGES)
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(lambda _task: self._workload.leave(PURGES))

        self._timers.call_at(when, fire)

    async def _run(self) -> None:
        try:
            await self.purge()
        except Exception:  # try again next interval
            log.exception("purging closed runs failed")
        self._schedule(self._clock.now() + self.interval_seconds)

    async def purge(self) -> int:
        """Purge every run closed before the retention window; return how many went."""
        before = to_micros(self._clock.now()) - int(self.retention_seconds * 1_000_000)
        total = 0
        while True:
            result = await self._committer.commit(
                units.purge_closed_runs(before=before, limit=PURGE_BATCH), slow=True
            )
            runs, gone_flows = result.value
            total += len(runs)
            if gone_flows:
                # A removed Flow's hard-delete values go with it.
                await asyncio.to_thread(self._delete_blobs, gone_flows)
            if len(runs) < PURGE_BATCH:
                return total

    def _delete_blobs(self, flow_ids: list[str]) -> None:
        for flow_id in flow_ids:
            self._blobs.delete_flow(flow_id)
