"""Step claims on a PostgreSQL database: the StepQueue of a process among several.

A commit of this process claims the executions it queues (``unit_statements.CLAIMANT``), so they
arrive here with their fencing token and wait in memory like on SQLite. What this process did
not queue itself it must claim first: Steps found at start-up, and, on every poll, the Steps of
processes whose lease expired (taken with ``FOR UPDATE SKIP LOCKED``, so two processes never
take the same one, and each claim raises the token so that anything the old holder returns later
is refused at commit)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, or_, select, update

from engine._enums import RunStatus
from engine._runtime.ports import Database, TimerQueue
from engine._runtime.postgres.lease import ProcessLease, live_processes
from engine._runtime.step_queue import MemoryStepQueue
from engine._runtime.workload import Workload
from engine._storage import reads
from engine._storage import tables as t
from engine._storage.records import Phase, QueuedStep, StepState
from engine._storage.unit_statements import filter_only
from engine.clock import Clock, to_micros

log = logging.getLogger("dexlite.claims")

CLAIMS = "Step claims"
#: How many orphaned executions one poll takes at most.
BATCH = 64
_se, _r = t.step_executions, t.runs


def _orphaned() -> Any:
    """Unclaimed, or claimed by a process that is no longer alive."""
    return or_(_se.c.claimed_by.is_(None), _se.c.claimed_by.not_in(live_processes()))


class PostgresStepQueue(MemoryStepQueue):
    """Executions this process holds claims on, in memory; others claimed on demand."""

    def __init__(
        self,
        *,
        database: Database,
        lease: ProcessLease,
        timers: TimerQueue,
        clock: Clock,
        workload: Workload,
        flow_types: Iterable[str],
        poll_seconds: float,
    ) -> None:
        super().__init__(timers, clock)
        self._database = database
        self._lease = lease
        self._workload = workload
        self._flow_types = sorted(flow_types)
        self._horizon_us = int(poll_seconds * 1_000_000)
        self._tasks: set[asyncio.Task[None]] = set()
        # The executions handed out and not released: their attempts run here.
        self._out: set[str] = set()

    def submit(self, step: QueuedStep) -> None:
        """Queue an execution this process's commit claimed; claim any other one first."""
        if step.fence > 0:
            self._out.discard(step.id)
            super().submit(step)
            return
        self._workload.enter(CLAIMS)
        task = asyncio.get_running_loop().create_task(self._claim_one(step))
        self._tasks.add(task)
        task.add_done_callback(self._claimed)

    async def claim(self) -> QueuedStep:
        """Wait for the next due execution and hand it out."""
        step = await super().claim()
        self._out.add(step.id)
        return step

    def release(self, step_id: str) -> None:
        """The execution ended: drop it (see MemoryStepQueue.release)."""
        self._out.discard(step_id)
        super().release(step_id)

    async def adopt(self) -> int:
        """Queue the pending executions this process holds claims on but does not know of, and
        return how many: a commit that lost its connection after its COMMIT reached the server
        created (and claimed) them without this process hearing of it."""
        me = self._lease.process_id
        known = set(self._queued) | self._out
        owned = (
            select(_se.c.id, _se.c.fence)
            .join(_r, _r.c.run_id == _se.c.run_id)
            .where(
                _se.c.claimed_by == me,
                _se.c.state == StepState.PENDING,
                _se.c.phase != Phase.WAITING,
                _r.c.status == RunStatus.RUNNING,
            )
        )

        def unit(conn: Connection) -> list[QueuedStep]:
            fences = {row.id: row.fence for row in conn.execute(owned) if row.id not in known}
            return reads.claimed_steps(conn, fences) if fences else []

        steps = await self._database.read(unit)
        for step in steps:
            if step.id not in self._queued and step.id not in self._out:
                log.info("adopted Step %s after a commit of unknown outcome", step.id)
                super().submit(step)
        return len(steps)

    def _claimed(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._workload.leave(CLAIMS)

    async def _claim_one(self, step: QueuedStep) -> None:
        me = self._lease.process_id
        statement = (
            update(_se)
            .where(
                _se.c.id == step.id,
                filter_only(_se.c.state == StepState.PENDING),
                _orphaned(),
            )
            .values(claimed_by=me, fence=_se.c.fence + 1)
            .returning(_se.c.fence)
        )
        try:
            fence = await self._database.write(
                lambda conn: conn.execute(statement).scalar_one_or_none()
            )
        except Exception:  # the poll claims it later
            log.exception(
                "could not claim Step %s",
                step.id,
                extra={"flowId": step.flow_id, "runId": step.run_id},
            )
            return
        if fence is not None:
            super().submit(replace(step, fence=fence))

    async def poll(self) -> int:
        """Claim executions of dead processes that are due (or due before the next poll);
        return how many."""
        if not self._flow_types:
            return 0
        me = self._lease.process_id
        horizon = to_micros(self._clock.now()) + self._horizon_us
        candidates = (
            select(_se.c.id)
            .join(_r, _r.c.run_id == _se.c.run_id)
            .where(
                _se.c.state == StepState.PENDING,
                _se.c.phase != Phase.WAITING,
                or_(_se.c.due_at.is_(None), _se.c.due_at <= horizon),
                _orphaned(),
                # Never its own: its attempts still run here even if its lease lapsed.
                or_(_se.c.claimed_by.is_(None), _se.c.claimed_by != me),
                _r.c.status == RunStatus.RUNNING,
                _r.c.flow_type.in_(self._flow_types),
            )
            .order_by(_se.c.due_at.nulls_first(), _se.c.created_at)
            .limit(BATCH)
            .with_for_update(of=_se, skip_locked=True)
        )
        claim = (
            update(_se)
            .where(_se.c.id.in_(candidates.scalar_subquery()))
            .values(claimed_by=me, fence=_se.c.fence + 1)
            .returning(_se.c.id, _se.c.fence)
        )

        def unit(conn: Connection) -> list[QueuedStep]:
            fences = {row.id: row.fence for row in conn.execute(claim)}
            return reads.claimed_steps(conn, fences) if fences else []

        steps = await self._database.write(unit)
        for step in steps:
            log.info(
                "took over Step %s (claim %d)",
                step.id,
                step.fence,
                extra={"flowId": step.flow_id, "runId": step.run_id},
            )
            super().submit(step)
        return len(steps)

    def close(self) -> None:
        """Stop handing out executions; claims under way are abandoned."""
        for task in list(self._tasks):
            task.cancel()
        super().close()
