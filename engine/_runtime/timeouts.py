"""Flow timeouts: a durable soft deadline that closes the run as TIMED_OUT.

A Flow may define ``handle_timeout(self, context)``; it runs once on a snapshot when the
deadline passes, and its Attribute writes commit together with the close.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging

from engine._enums import RunStatus
from engine._runtime import effects
from engine._runtime.committer import Committer
from engine._runtime.ports import BlobStore, TimerHandle, TimerQueue
from engine._runtime.snapshots import Snapshots
from engine._runtime.workload import Workload
from engine._storage import units
from engine._storage.records import RunClose, StagedEffects
from engine.clock import Clock, to_micros
from engine.errors import EngineError
from engine.registry import Registry

log = logging.getLogger("dexlite.timeouts")

TIMEOUTS = "Flow timeouts firing"


class Timeouts:
    """Times runs out at their deadline unless they close first."""

    def __init__(
        self,
        *,
        registry: Registry,
        timers: TimerQueue,
        snapshots: Snapshots,
        blobs: BlobStore,
        committer: Committer,
        workload: Workload,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._timers = timers
        self._snapshots = snapshots
        self._blobs = blobs
        self._committer = committer
        self._workload = workload
        self._clock = clock
        self._handles: dict[str, TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._firing: set[str] = set()

    def schedule(self, run_id: str, flow_id: str, flow_type: str, at_us: int) -> None:
        """Time ``run_id`` out at ``at_us`` (epoch microseconds) unless it closes first (once:
        a run already scheduled keeps its timer)."""
        if run_id in self._handles:
            return

        def fire() -> None:
            self._handles.pop(run_id, None)
            self._fire(run_id, flow_id, flow_type)

        self._handles[run_id] = self._timers.call_at(at_us / 1_000_000, fire)

    def due(self, run_id: str, flow_id: str, flow_type: str) -> None:
        """Time ``run_id`` out now (a poll found its deadline passed), unless this process
        has it scheduled or is applying it already."""
        if run_id in self._handles or run_id in self._firing:
            return
        self._fire(run_id, flow_id, flow_type)

    def _fire(self, run_id: str, flow_id: str, flow_type: str) -> None:
        self._workload.enter(TIMEOUTS)
        self._firing.add(run_id)
        task = asyncio.get_running_loop().create_task(self._time_out(run_id, flow_id, flow_type))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._done(done, run_id))

    def _done(self, task: asyncio.Task[None], run_id: str) -> None:
        self._tasks.discard(task)
        self._firing.discard(run_id)
        self._workload.leave(TIMEOUTS)

    def cancel(self, run_id: str) -> None:
        """Forget the deadline of a run that closed."""
        handle = self._handles.pop(run_id, None)
        if handle is not None:
            handle.cancel()

    async def close(self) -> None:
        """Stop timing runs out; a timeout being applied is abandoned (it fires again on the
        next start, since the run is still open)."""
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _time_out(self, run_id: str, flow_id: str, flow_type: str) -> None:
        try:
            staged = await self._run_handler(run_id, flow_id, flow_type)
            await self._committer.commit(
                units.stop_run(
                    flow_id=flow_id,
                    run_id=run_id,
                    close=RunClose(RunStatus.TIMED_OUT, error_message="the Flow timed out"),
                    now=to_micros(self._clock.now()),
                    only_if_running=True,
                    effects=staged,
                )
            )
        except Exception:  # the timer task must survive a failed write
            log.exception("could not time out run %s", run_id, extra={"runId": run_id})

    async def _run_handler(self, run_id: str, flow_id: str, flow_type: str) -> StagedEffects:
        """Run the Flow's ``handle_timeout`` on a snapshot; return its staged effects (Attribute
        writes, Channel deletions and publications).

        A handler that raises is logged and the run still times out, without its effects.
        """
        try:
            spec = self._registry.spec(flow_type)
        except EngineError:
            return StagedEffects()
        handler = spec.timeout_handler
        if handler is None:
            return StagedEffects()
        snapshot = await self._snapshots.read(flow_id, run_id, spec.timeout_plan)
        if snapshot is None or not snapshot.run.is_running:
            return StagedEffects()
        context = await self._snapshots.context(spec, snapshot, spec.timeout_plan)
        try:
            if inspect.iscoroutinefunction(handler):
                await handler(context)
            else:
                await asyncio.to_thread(handler, context)
            return await effects.stage(self._blobs, spec, context)
        except Exception:  # the timeout still closes the run
            log.exception(
                "handle_timeout of %s %s raised", flow_type, flow_id, extra={"flowId": flow_id}
            )
            return StagedEffects()
