"""Start-up: resume every open run a previous process left, from the database alone."""

from __future__ import annotations

import logging

from engine._runtime.ports import Database, LockTable, StepQueue
from engine._runtime.scheduler import Scheduler
from engine._runtime.timeouts import Timeouts
from engine._runtime.waits import ChannelWaits
from engine._storage import reads
from engine._storage.records import QueuedStep, WaitingStep
from engine.registry import Registry

log = logging.getLogger("dexlite.recovery")


async def recover(
    *,
    database: Database,
    registry: Registry,
    locks: LockTable,
    scheduler: Scheduler,
    timeouts: Timeouts,
    waits: ChannelWaits,
    claim: StepQueue | None = None,
    steps: bool = True,
) -> int:
    """Re-arm Flow timeouts, queue every pending Step and watch every durable wait again;
    return how many Steps resumed.

    A queued retry keeps its locks, so it takes them here, before any RPC can. A wait is tried
    at once: messages published while no process ran may already meet it.

    On a PostgreSQL database (``claim``: its StepQueue) a pending Step is only offered for a claim:
    another live process may be running it, and its locks are that process's to release.
    """
    for run in await reads.running_runs(database):
        if run.timeout_at is not None:
            timeouts.schedule(run.run_id, run.flow_id, run.flow_type, run.timeout_at)
    known = set(registry.flow_types)
    count = 0
    for step, spec in await reads.active_steps(database):
        if not steps and spec is None:
            continue  # ``steps`` False: only the durable waits
        if step.flow_type not in known:
            log.warning(
                "not resuming Step %s: Flow type %s is not registered", step.id, step.flow_type
            )
            _keep_retry_locks(locks, step, claim is not None)
            continue
        sspec = registry.spec(step.flow_type).steps.get(step.step_type)
        if sspec is None:
            log.warning(
                "not resuming Step %s: Step type %s is not registered", step.id, step.step_type
            )
            _keep_retry_locks(locks, step, claim is not None)
            continue
        count += 1
        if spec is not None:
            waits.watch(WaitingStep(step, spec))
            continue
        if claim is not None:
            claim.submit(step)
            continue
        if step.keeps_locks:
            locks.hold_for_step(step.flow_id, sspec.plans[step.phase].lock_keys, step.id)
        scheduler.requeue(step)
    return count


def _keep_retry_locks(locks: LockTable, step: QueuedStep, coordinated: bool) -> None:
    """A queued retry this process cannot run keeps its locks until the Flow times out or
    stops (Dex's rule). On a PostgreSQL database its lock rows stay alive by themselves."""
    if step.held_locks and step.keeps_locks and not coordinated:
        locks.hold_for_step(step.flow_id, step.held_locks, step.id)
