"""The Step scheduler: hands attempts out, runs handlers, commits their decisions.

An attempt takes its phase's locks when it is handed out and keeps them until its decision (or
its final failure) commits; a failed attempt waiting for its retry keeps them too. ``def``
handlers run on a thread pool, ``async def`` handlers as tasks. No transaction is open while a
handler runs: the attempt reads one snapshot, runs, then sends one commit unit to the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engine import _codec
from engine._runtime.runtime import Runtime
from engine._runtime.signals import StepCanceled
from engine._runtime.step_io import is_generator_handler, run_generator
from engine._runtime.timers import TimerHandle
from engine._storage import commits, reads
from engine._storage.commits import StaleAttemptError
from engine._storage.records import (
    PHASE_EXECUTE,
    PHASE_WAIT_FOR,
    ActiveStepRecord,
    CommitResult,
    Effects,
    NewStep,
    StepOutcome,
)
from engine._streams import StreamService
from engine.context import Context
from engine.errors import InvalidStepResultError
from engine.registry import FlowSpec, StepSpec
from engine.step import NO_RETRY, DecisionKind, RetryPolicy, StepDecision
from engine.wait import Wait

log = logging.getLogger("dexlite.scheduler")
_STALE = object()


@dataclass
class ActiveStep:
    """A Step execution this process is responsible for."""

    id: str
    run_id: str
    flow_id: str
    flow_type: str
    step_type: str
    input: str
    phase: str
    attempt: int = 1
    due_at: int | None = None
    holds_locks: bool = False
    canceled: bool = False
    task: asyncio.Task[None] | None = None
    context: Context | None = None
    timer: TimerHandle | None = field(default=None, repr=False)


class Scheduler:
    """Runs the active Steps of every open run."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._steps: dict[str, ActiveStep] = {}
        self._by_run: dict[str, set[str]] = {}
        # IDs canceled by a commit before this process heard of them; never start them.
        self._tombstones: set[str] = set()
        self._executor = ThreadPoolExecutor(
            max_workers=runtime.step_threads, thread_name_prefix="dexlite-step"
        )
        # The Engine's Stream Store; Step invocations send their Stream writes through it.
        self.streams: StreamService | None = None

    async def close(self) -> None:
        """Stop every attempt (they resume from durable state on the next start)."""
        tasks = [s.task for s in self._steps.values() if s.task is not None]
        for step in list(self._steps.values()):
            if step.context is not None:
                step.context.request_cancellation()
            if step.task is not None:
                step.task.cancel()
            if step.timer is not None:
                step.timer.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._steps.clear()
        self._by_run.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- submission ---------------------------------------------------------------------------

    def submit_new(self, step: NewStep, *, run_id: str, flow_id: str, flow_type: str) -> None:
        """Start tracking a Step execution created by a commit."""
        self._submit(
            ActiveStep(
                step.id,
                run_id,
                flow_id,
                flow_type,
                step.step_type,
                step.input,
                step.phase,
                1,
                step.due_at,
            )
        )

    def recover(self, record: ActiveStepRecord) -> None:
        """Resume a Step execution found active at start-up."""
        step = ActiveStep(
            record.id,
            record.run_id,
            record.flow_id,
            record.flow_type,
            record.step_type,
            record.input,
            record.phase,
            record.attempt,
            record.due_at,
        )
        if record.attempt > 1:
            # A queued retry keeps its locks: take them before any RPC can.
            keys = self._lock_keys(step)
            self.rt.locks.hold_for_step(step.flow_id, keys, step.id)
            step.holds_locks = True
        self._submit(step)

    def _submit(self, step: ActiveStep) -> None:
        if step.id in self._tombstones:
            self._tombstones.discard(step.id)
            return
        if step.id in self._steps:
            return
        self._steps[step.id] = step
        self._by_run.setdefault(step.run_id, set()).add(step.id)
        self._schedule(step)

    def _schedule(self, step: ActiveStep) -> None:
        if step.due_at is not None and step.due_at > self.rt.now_us():
            step.timer = self.rt.timers.call_at(
                step.due_at / 1_000_000, functools.partial(self._start, step)
            )
        else:
            self._start(step)

    def _start(self, step: ActiveStep) -> None:
        step.timer = None
        if step.canceled:
            return
        step.task = asyncio.get_running_loop().create_task(
            self._drive(step), name=f"step-{step.step_type}-{step.id}"
        )

    # -- cancellation -------------------------------------------------------------------------

    def cancel(self, step_id: str) -> None:
        """Stop an attempt whose Step a commit canceled; its later result is discarded."""
        step = self._steps.get(step_id)
        if step is None:
            self._tombstones.add(step_id)
            return
        step.canceled = True
        if step.context is not None:
            step.context.request_cancellation()
        if step.timer is not None:
            step.timer.cancel()
        if step.task is not None and step.task is not asyncio.current_task():
            step.task.cancel()
        self._forget(step)

    def forget_run(self, run_id: str) -> None:
        """Cancel whatever is left of a closed run."""
        for step_id in list(self._by_run.get(run_id, ())):
            self.cancel(step_id)

    def _forget(self, step: ActiveStep) -> None:
        self.rt.locks.release(step.flow_id, step.id)
        step.holds_locks = False
        self._steps.pop(step.id, None)
        ids = self._by_run.get(step.run_id)
        if ids is not None:
            ids.discard(step.id)
            if not ids:
                del self._by_run[step.run_id]

    # -- running an attempt ---------------------------------------------------------------------

    def _spec(self, step: ActiveStep) -> tuple[FlowSpec, StepSpec]:
        spec = self.rt.registry.spec(step.flow_type)
        return spec, spec.steps[step.step_type]

    def _lock_keys(self, step: ActiveStep) -> list[str]:
        _, sspec = self._spec(step)
        locks = (
            sspec.options.wait_for_lock_attributes
            if step.phase == PHASE_WAIT_FOR
            else sspec.options.execute_lock_attributes
        )
        return [lock.key for lock in locks]

    async def _drive(self, step: ActiveStep) -> None:
        try:
            if not step.holds_locks:
                await self.rt.locks.acquire_for_step(step.flow_id, self._lock_keys(step), step.id)
                step.holds_locks = True
            await self._attempt(step)
        except (asyncio.CancelledError, StepCanceled):
            if not step.canceled:
                raise
        except Exception:  # e.g. the database refused a write: try the attempt again later
            log.exception("Step %s %s failed in the runtime; retrying", step.step_type, step.id)
            if step.canceled or step.id not in self._steps:
                return
            self.rt.locks.release(step.flow_id, step.id)
            step.holds_locks, step.context = False, None
            step.due_at = self.rt.now_us() + 1_000_000
            self._schedule(step)

    async def _call(self, fn: Any, context: Context, value: Any) -> Any:
        try:
            if asyncio.iscoroutinefunction(fn):
                return await fn(context, value)
            # A sync generator yields Stream writes and heartbeats; its return value is the
            # handler's result.
            target = (
                functools.partial(run_generator, fn, context, value)
                if is_generator_handler(fn)
                else functools.partial(fn, context, value)
            )
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, target)
        finally:
            # Buffered Stream writers send their tail before the result or error commits.
            if context.step_io is not None:
                context.step_io.finish()

    async def _attempt(self, step: ActiveStep) -> None:
        spec, sspec = self._spec(step)
        options = sspec.options
        waiting = step.phase == PHASE_WAIT_FOR
        whole = (
            options.wait_for_load_attribute_maps if waiting else options.execute_load_attribute_maps
        )
        exact = (
            options.wait_for_load_attribute_map_instances
            if waiting
            else options.execute_load_attribute_map_instances
        )
        loaded_maps = [m.name for m in whole]
        loaded_instances = [(load.name, load.instance) for load in exact]
        snapshot = await self.rt.snapshot(
            step.flow_id, step.run_id, whole_maps=loaded_maps, instances=loaded_instances
        )
        if snapshot is None or not snapshot.run.is_running:
            self._forget(step)
            return
        context = await self.rt.build_context(
            spec,
            snapshot,
            loaded_maps=loaded_maps,
            loaded_instances=loaded_instances,
            step_execution_id=step.id,
            step_type=step.step_type,
            attempt=step.attempt,
        )
        step.context = context
        if self.streams is not None:
            handler = getattr(sspec.step, "wait_for" if waiting else "execute")
            context.step_io = self.streams.step_io(
                spec.streams,
                spec.flow_type,
                step.flow_id,
                step.id,
                is_async=asyncio.iscoroutinefunction(handler),
            )
        try:
            value = _codec.decode(sspec.input_type, step.input)
            if waiting:
                wait = await self._call(sspec.step.wait_for, context, value)  # type: ignore[attr-defined]
                if not isinstance(wait, Wait):
                    raise InvalidStepResultError(
                        f"{step.step_type}.wait_for returned {wait!r}, not a Wait"
                    )
                await self._finish_wait(step, spec, context, wait)
                return
            decision = await self._call(sspec.step.execute, context, value)
            if not isinstance(decision, StepDecision):
                raise InvalidStepResultError(
                    f"{step.step_type}.execute returned {decision!r}, not a StepDecision"
                )
            outcome, effects = await self._decision_effects(step, spec, context, decision)
        except (asyncio.CancelledError, StepCanceled):
            raise
        except Exception as exc:
            if step.canceled:
                return
            await self._fail(step, spec, sspec, exc)
            return
        if step.canceled:
            return
        await self._commit(step, spec, outcome, effects)

    async def _finish_wait(
        self, step: ActiveStep, spec: FlowSpec, context: Context, wait: Wait
    ) -> None:
        delay = wait.delay_seconds()
        writes = await self.rt.stage_writes(
            spec, step.flow_id, context.staged_writes, context.staged_texts
        )
        due = self.rt.now_us() + int(delay * 1_000_000) if delay > 0 else None
        if step.canceled:
            return
        if writes or due is not None:
            unit = commits.enter_execute_phase(
                run_id=step.run_id,
                step_id=step.id,
                step_type=step.step_type,
                attempt=step.attempt,
                due_at=due,
                writes=writes,
                now=self.rt.now_us(),
            )
            if await self._write_attempt(step, unit) is _STALE:
                return
            self.rt.matches.notify(step.run_id, writes)
        # The wait_for locks are released; execute takes its own when handed out.
        self.rt.locks.release(step.flow_id, step.id)
        step.holds_locks = False
        step.phase, step.attempt, step.due_at, step.context = PHASE_EXECUTE, 1, due, None
        self._schedule(step)

    async def _decision_effects(
        self, step: ActiveStep, spec: FlowSpec, context: Context, decision: StepDecision
    ) -> tuple[StepOutcome, Effects]:
        effects = Effects(
            writes=await self.rt.stage_writes(
                spec, step.flow_id, context.staged_writes, context.staged_texts
            ),
            new_steps=self.rt.new_steps(spec, decision.movements),
            cancel_step_types=self.rt.step_type_names(spec, decision.canceling_steps),
        )
        completes = decision.kind in (DecisionKind.GRACEFUL_COMPLETE, DecisionKind.FORCE_COMPLETE)
        outcome = StepOutcome(
            kind=decision.kind.value,
            output=_codec.encode(decision.output) if completes else None,
            error_type=decision.error_type,
            error_message=decision.error_message,
            is_completion=completes,
        )
        return outcome, effects

    async def _write_attempt(self, step: ActiveStep, unit: Any) -> Any:
        """Commit a unit of this attempt; a canceled or superseded attempt is forgotten and
        gets ``_STALE`` back."""
        try:
            return await self.rt.db.write(unit)
        except StaleAttemptError:
            self._forget(step)
            return _STALE

    async def _commit(
        self, step: ActiveStep, spec: FlowSpec, outcome: StepOutcome, effects: Effects
    ) -> None:
        result = await self._write_attempt(
            step,
            commits.commit_step(
                run_id=step.run_id,
                step_id=step.id,
                step_type=step.step_type,
                attempt=step.attempt,
                outcome=outcome,
                effects=effects,
                now=self.rt.now_us(),
            ),
        )
        if result is _STALE:
            return
        assert isinstance(result, CommitResult)
        self._forget(step)
        self.rt.after_commit(result, step.flow_id, step.flow_type, writes=effects.writes)

    async def _fail(
        self, step: ActiveStep, spec: FlowSpec, sspec: StepSpec, exc: Exception
    ) -> None:
        error_type, message = type(exc).__name__, str(exc)
        policy: RetryPolicy = (
            sspec.options.wait_for_retry
            if step.phase == PHASE_WAIT_FOR
            else sspec.options.execute_retry
        ) or NO_RETRY
        if step.attempt < policy.max_attempts:
            due = self.rt.now_us() + int(policy.delay_before(step.attempt + 1) * 1_000_000)
            unit = commits.retry_step(
                run_id=step.run_id,
                step_id=step.id,
                attempt=step.attempt,
                due_at=due,
                error_type=error_type,
                error_message=message,
                now=self.rt.now_us(),
            )
            if await self._write_attempt(step, unit) is _STALE:
                return
            # The retry keeps its locks while it waits.
            step.attempt, step.due_at, step.context = step.attempt + 1, due, None
            self._schedule(step)
            return
        effects = Effects()
        failure = sspec.options.failure_step
        if failure is not None:
            effects.new_steps = self.rt.new_steps(spec, [_failure_movement(failure, step, exc)])
        outcome = StepOutcome("FAILED", error_type=error_type, error_message=message)
        await self._commit(step, spec, outcome, effects)


def _failure_movement(failure: Any, step: ActiveStep, exc: Exception) -> Any:
    from engine.step import StepMovement

    return StepMovement.of(
        failure,
        {
            "stepType": step.step_type,
            "stepExecutionId": step.id,
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
        },
    )


async def recover(runtime: Runtime, scheduler: Scheduler) -> int:
    """Resume every open run left by a previous process; return how many Steps resumed."""
    db = runtime.db
    for run in await reads.running_runs(db):
        if run.timeout_at is not None:
            runtime.schedule_timeout(run.run_id, run.flow_id, run.flow_type, run.timeout_at)
    records = await reads.active_steps(db)
    known = set(runtime.registry.flow_types)
    count = 0
    for record in records:
        if record.flow_type not in known:
            log.warning(
                "not resuming Step %s: Flow type %s is not registered", record.id, record.flow_type
            )
            continue
        if record.step_type not in runtime.registry.spec(record.flow_type).steps:
            log.warning(
                "not resuming Step %s: Step type %s is not registered", record.id, record.step_type
            )
            continue
        scheduler.recover(record)
        count += 1
    return count
