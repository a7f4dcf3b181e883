"""Committing: the runtime says what to commit; each backend's Committer says how.

The runtime hands the Committer what it wants committed: a start, a Step attempt's result, an
RPC's effects with the locks it holds, a client's write under locks, or any other commit unit.
This base class commits each as its plain unit (``engine/_storage/units.py``), one transaction,
then publishes the result to the Notifier's listeners (every follow-up of a commit is one of
them, so a commit made in another process is followed up like one made here).

A backend subclasses it, and the composition root picks the subclass: ``sqlite/commits.py``
hands an RPC's locks on as soon as its unit is queued for the one ordered writer;
``postgres/commits.py`` sends the commits that qualify as one statement or function call and
relays one process's RPCs on the same keys. Each of those is the same rule as the plain unit,
which the differential tests check (``tests/postgres/test_commit_differential.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from engine._runtime.handoff import HandedOff, Handoffs, nothing
from engine._runtime.ports import Database, LockTable, Notifier
from engine._runtime.workload import Workload
from engine._storage import units
from engine._storage.records import CommitResult, QueuedStep, RunInfo, StagedEffects, StartRequest
from engine._storage.units import Unit
from engine.telemetry import Telemetry

COMMITS = "commits in flight"


@dataclass(frozen=True)
class RPCCommit:
    """An RPC invocation's effects, to commit on its run under the locks it holds."""

    flow_id: str
    flow_type: str
    #: The run as the invocation's snapshot read it.
    run: RunInfo
    rpc_name: str
    effects: StagedEffects
    now: int
    #: The invocation's lock owner: its keys are released however the commit ends.
    owner: str
    #: Whether it holds any lock key.
    locked: bool
    #: The handed-off units it read (a transactional RPC's): it commits only if they do.
    after: tuple[HandedOff, ...] = ()
    #: Told once the keys are free, which may be before the commit ended (a handoff).
    on_released: Callable[[], None] = nothing
    #: Another invocation of this process lines up for the keys as soon as they are free.
    followed: bool = False

    def unit(self) -> Unit:
        """The plain unit of the commit."""
        return units.commit_rpc(
            flow_id=self.flow_id,
            run_id=self.run.run_id,
            rpc_name=self.rpc_name,
            effects=self.effects,
            now=self.now,
        )

    @property
    def writes_only(self) -> bool:
        """Whether its effects are Attribute writes alone: the next holder of its keys may
        read them before they commit (a handoff, see ``handoff``)."""
        return self.effects.writes_only()


class Committer:
    """Commits units in one transaction each and publishes what they changed."""

    def __init__(
        self,
        database: Database,
        notifier: Notifier,
        workload: Workload,
        locks: LockTable,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._database = database
        self._notifier = notifier
        self._workload = workload
        self._locks = locks
        self._telemetry = telemetry or Telemetry()
        #: The units handed off per Flow ID, not yet ended (see ``handoff``).
        self.handoffs = Handoffs()

    async def commit(
        self, unit: Unit, *, after: tuple[HandedOff, ...] = (), slow: bool = False
    ) -> CommitResult:
        """Apply ``unit`` in one transaction, publish its result, and return it.

        ``after`` are the handed-off units whose writes the caller read: if one of them does
        not commit, neither does this unit (it fails with that unit's error). ``slow``: the
        unit may work through many rows (see ``Database.write``).
        """
        if after:
            await self._wait_for(after)
            unit = HandedOff(unit, after)
        return await self._published(self._database.write(unit, slow=slow))

    async def _wait_for(self, after: tuple[HandedOff, ...]) -> None:
        """Wait until the units ``after`` may be read past: here, until each has ended."""
        for earlier in after:
            if earlier.ended is not None:
                await asyncio.shield(earlier.ended)

    async def start(self, request: StartRequest, now: int) -> CommitResult:
        """Commit the start of a run (its initial Attributes and start Step with it)."""
        return await self.commit(units.start_run(request, now))

    async def step(
        self,
        step: QueuedStep,
        effects: StagedEffects,
        now: int,
        after: tuple[HandedOff, ...] = (),
    ) -> CommitResult:
        """Commit the result of ``step``'s current attempt (a decision, a final failure or
        the end of its wait_for), made after reading ``after``. Raises StaleAttemptError when
        the attempt was canceled, retried or its run closed meanwhile."""
        unit = units.commit_step(
            run_id=step.run_id, attempt=step.attempt, effects=effects, now=now, fence=step.fence
        )
        return await self.commit(unit, after=after)

    async def rpc(self, rpc: RPCCommit) -> CommitResult:
        """Commit an RPC's effects and release the keys it holds, however the commit ends."""
        try:
            return await self.commit(rpc.unit(), after=rpc.after)
        finally:
            await self._release(rpc.flow_id, rpc.owner)
            rpc.on_released()

    async def locked(self, flow_id: str, owner: str, unit: Unit) -> CommitResult:
        """Commit a client's ``unit`` made under ``owner``'s keys and release them, however
        the commit ends."""
        try:
            return await self.commit(unit)
        finally:
            await self._release(flow_id, owner)

    async def _release(self, flow_id: str, owner: str) -> None:
        """Release ``owner``'s keys (the lock table sees them freed even when the caller is
        canceled meanwhile)."""
        await self._locks.release_now(flow_id, owner)

    def publish(self, result: CommitResult) -> None:
        """Deliver a committed result to the listeners."""
        self._notifier.publish(result)

    def committed(self, result: CommitResult, seconds: float) -> None:
        """Count a commit that took ``seconds`` and deliver its result to the listeners."""
        self._telemetry.commit(seconds)
        self.publish(result)

    def entered(self) -> None:
        """Count a commit in flight (what ``settle`` waits for)."""
        self._workload.enter(COMMITS)

    def left(self) -> None:
        """A commit counted by :meth:`entered` has ended."""
        self._workload.leave(COMMITS)

    async def _published(
        self, written: Awaitable[CommitResult], entered: bool = False
    ) -> CommitResult:
        """Await ``written``, then publish and return its result (counted in flight)."""
        if not entered:
            self.entered()
        try:
            started = time.perf_counter()
            result = await written
            self.committed(result, time.perf_counter() - started)
            return result
        finally:
            self.left()
