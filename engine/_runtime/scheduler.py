"""The Step scheduler: claims due executions, runs their attempts, commits their results.

An attempt takes its phase's locks when it is handed out and keeps them until its result
commits; a failed attempt waiting for its retry keeps them too. ``def`` handlers run on a
thread pool, ``async def`` handlers as tasks. No transaction is open while a handler runs: the
attempt reads one snapshot, runs, then commits one unit. What follows a commit (the next
attempt queued, canceled attempts stopped, locks released) is done by the commit's listener
through :meth:`Scheduler.end` and :meth:`Scheduler.requeue`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

from engine import _codec
from engine._outcomes import OutcomeKind
from engine._runtime import effects, failures
from engine._runtime.attempts import Attempt, still_running
from engine._runtime.cancellation import StepCanceled
from engine._runtime.committer import Committer
from engine._runtime.handler_threads import HandlerThreads
from engine._runtime.handoff import overlay
from engine._runtime.invocation import InvocationContext
from engine._runtime.ports import BlobStore, LockTable, StepQueue
from engine._runtime.snapshots import Snapshots
from engine._runtime.starts import Starter
from engine._runtime.step_io import StepIO, is_generator_handler, run_generator
from engine._runtime.waits import wait_spec
from engine._runtime.workload import Workload
from engine._specs import FlowSpec, StepSpec
from engine._storage import units
from engine._storage.records import (
    CommitResult,
    EnterExecute,
    EnterWait,
    Phase,
    QueuedStep,
    StagedEffects,
    StepClose,
)
from engine._storage.units import StaleAttemptError
from engine._streams import StreamService
from engine.clock import Clock, to_micros
from engine.errors import InvalidStepResultError
from engine.registry import Registry
from engine.step import StepDecision, StepMovement
from engine.telemetry import Telemetry
from engine.wait import Wait

log = logging.getLogger("dexlite.scheduler")

ATTEMPTS = "Step attempts running"
#: How long an attempt that failed in the runtime itself (not in its handler) waits to run again.
RUNTIME_RETRY_SECONDS = 1.0
#: How long a canceled attempt still running keeps its locks at most (Dex's "about one
#: second").
CANCEL_GRACE_SECONDS = 1.0


class Scheduler:
    """Runs the attempts of every open run's Steps."""

    def __init__(
        self,
        *,
        registry: Registry,
        queue: StepQueue,
        locks: LockTable,
        committer: Committer,
        snapshots: Snapshots,
        blobs: BlobStore,
        starter: Starter,
        streams: StreamService,
        workload: Workload,
        clock: Clock,
        threads: int,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._telemetry = telemetry or Telemetry()
        self._registry = registry
        self._starter = starter
        self._queue = queue
        self._locks = locks
        self._committer = committer
        self._snapshots = snapshots
        self._blobs = blobs
        self._streams = streams
        self._workload = workload
        self._clock = clock
        self._running: dict[str, Attempt] = {}
        self._releases: set[asyncio.Task[None]] = set()  # canceled attempts' delayed releases
        self._dispatcher: asyncio.Task[None] | None = None
        self._threads = HandlerThreads(threads, "dexlite-step")

    def start(self) -> None:
        """Start handing out due executions."""
        self._dispatcher = asyncio.get_running_loop().create_task(
            self._dispatch(), name="dexlite-steps"
        )

    async def close(self) -> None:
        """Stop every attempt (they resume from durable state on the next start)."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
        self._queue.close()
        attempts = list(self._running.values())
        for attempt in attempts:
            attempt.cancel()
        for attempt in attempts:
            if attempt.task is not None:
                with contextlib.suppress(BaseException):
                    await attempt.task
        self._running.clear()
        for task in list(self._releases):  # nothing runs any more: no lock to keep
            task.cancel()
        self._threads.close()

    # -- what the commit listener calls -------------------------------------------------------

    def requeue(self, step: QueuedStep) -> None:
        """Queue an execution's next attempt; only a retry keeps the locks it holds."""
        if not step.keeps_locks:
            self._locks.release(step.flow_id, step.id)
        self._queue.submit(step)

    def park(self, step: QueuedStep) -> None:
        """An execution began a durable wait: it holds no locks while it waits."""
        self._locks.release(step.flow_id, step.id)

    def end(self, flow_id: str, step_ids: tuple[str, ...]) -> None:
        """Forget executions that ended: stop their attempts here and release their locks.

        The attempt whose own commit ended it is the current task; it is left to finish.
        """
        for step_id in step_ids:
            attempt = self._running.pop(step_id, None)
            if attempt is not None:
                attempt.cancel()
            self._queue.release(step_id)
            ended = None if attempt is None else still_running(attempt)
            if ended is not None:
                # The seed: Dex waits about a second for a canceled attempt to end. A ``def``
                # handler cannot be interrupted, and an ``async def`` one may swallow its
                # cancellation: its locks stay held until it has ended (what it returns is
                # discarded) or the grace ends.
                self._locks.hold_past_end(flow_id, step_id)
                self._release_after(flow_id, step_id, ended)
            else:
                self._locks.release(flow_id, step_id)

    def _release_after(self, flow_id: str, step_id: str, ended: asyncio.Future[Any]) -> None:
        async def release() -> None:
            grace = asyncio.ensure_future(self._clock.sleep(CANCEL_GRACE_SECONDS))
            try:
                await asyncio.wait({ended, grace}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                grace.cancel()
                self._locks.release(flow_id, step_id)

        task = asyncio.get_running_loop().create_task(release(), name=f"release-{step_id}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    # -- running attempts -----------------------------------------------------------------------

    async def _dispatch(self) -> None:
        while True:
            step = await self._queue.claim()
            attempt = Attempt(step)
            self._running[step.id] = attempt
            self._workload.enter(ATTEMPTS)
            attempt.task = asyncio.get_running_loop().create_task(
                self._drive(attempt), name=f"step-{step.step_type}-{step.id}"
            )

    def _spec(self, step: QueuedStep) -> tuple[FlowSpec, StepSpec]:
        spec = self._registry.spec(step.flow_type)
        return spec, spec.steps[step.step_type]

    async def _drive(self, attempt: Attempt) -> None:
        step = attempt.step
        holds = step.keeps_locks  # its phase's locks, once granted
        try:
            if not step.keeps_locks:
                _, sspec = self._spec(step)
                granted = self._locks.acquire_for_step(
                    step.flow_id, sspec.plans[step.phase].lock_keys, step.id, step.phase
                )
                # Waiting for a lock is not work: only another attempt or RPC can end it.
                self._workload.leave(ATTEMPTS)
                try:
                    await granted
                finally:
                    self._workload.enter(ATTEMPTS)
                holds = True
            await self._attempt(attempt)
        except (asyncio.CancelledError, StepCanceled):
            if not attempt.canceled:
                raise
        except Exception:  # e.g. the database refused a write: try the attempt again later
            log.exception(
                "Step %s %s failed in the runtime; retrying",
                step.step_type,
                step.id,
                extra={"flowId": step.flow_id, "runId": step.run_id},
            )
            if not attempt.canceled and self._running.get(step.id) is attempt:
                del self._running[step.id]
                due = to_micros(self._clock.now() + RUNTIME_RETRY_SECONDS)
                # A returned attempt keeps the locks it holds while it waits (Dex's rule).
                self.requeue(replace(step, due_at=due, returned=holds))
        finally:
            if self._running.get(step.id) is attempt:
                del self._running[step.id]
            self._workload.leave(ATTEMPTS)

    def _stop(self, attempt: Attempt) -> None:
        """Drop an attempt whose run has closed: nothing of it can commit any more."""
        if self._running.get(attempt.step.id) is attempt:
            del self._running[attempt.step.id]
        self._locks.release(attempt.step.flow_id, attempt.step.id)

    async def _call(
        self, fn: Any, context: InvocationContext, value: Any, attempt: Attempt | None = None
    ) -> Any:
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
            # Canceling the awaiting task does not stop the thread; the call tells when it
            # really ends.
            thread = self._threads.call(target)
            if attempt is not None:
                attempt.thread = thread
            return await thread.future
        finally:
            # Buffered Stream writers send what they still hold before the result or error commits.
            if context.step_io is not None:
                context.step_io.finish()
                # ...and every message the invocation wrote is in the store before it commits.
                await self._streams.step_writes_sent(context.step_io.source)

    async def _attempt(self, attempt: Attempt) -> None:
        step = attempt.step
        spec, sspec = self._spec(step)
        plan = sspec.plans[step.phase].loads
        # An RPC that released these locks early may not have committed yet (see ``handoff``).
        attempt.after = self._committer.handoffs.pending(step.flow_id)
        snapshot = overlay(
            await self._snapshots.read(step.flow_id, step.run_id, plan, overlaid=True),
            attempt.after,
            plan,
        )
        if snapshot is None or not snapshot.run.is_running:
            self._stop(attempt)
            return
        handler = sspec.handler(step.phase)
        io = StepIO(
            self._streams.append_from_step,
            spec.streams,
            flow_type=spec.flow_type,
            flow_id=step.flow_id,
            step_execution_id=step.execution_id,
            clock=self._clock,
            is_async=asyncio.iscoroutinefunction(handler),
        )
        context = await self._snapshots.context(
            spec,
            snapshot,
            plan,
            step_execution_id=step.execution_id,
            step_type=step.step_type,
            attempt=step.attempt,
            step_io=io,
            consumed=step.consumed,
        )
        attempt.context = context
        try:
            value = _codec.decode(sspec.input_type, step.input)
            result = await self._call(handler, context, value, attempt)
            if step.phase == Phase.WAIT_FOR:
                staged = await self._wait_effects(step, spec, context, result)
            else:
                staged = await self._decision_effects(step, spec, context, result)
        except (asyncio.CancelledError, StepCanceled):
            self._report(step, "canceled")
            raise
        except Exception as exc:
            if attempt.canceled:
                self._report(step, "canceled")
            else:
                await self._fail(attempt, spec, sspec, exc)
            return
        if attempt.canceled:
            self._report(step, "canceled")
            return
        if staged is None:
            # A wait that neither wrote nor waits needs no commit: execute runs at once.
            self.requeue(replace(step, phase=Phase.EXECUTE, attempt=1, due_at=None, returned=False))
            self._report(step, "waited")
            return
        await self._commit_step(attempt, staged)

    def _now(self) -> int:
        return to_micros(self._clock.now())

    async def _wait_effects(
        self, step: QueuedStep, spec: FlowSpec, context: InvocationContext, wait: Any
    ) -> StagedEffects | None:
        if not isinstance(wait, Wait):
            raise InvalidStepResultError(f"{step.step_type}.wait_for returned {wait!r}, not a Wait")
        staged = await effects.stage(self._blobs, spec, context)
        if not wait.only_timers():
            # The children start in the commit that begins the wait.
            children = [
                await self._starter.prepare_subflow(step, index, condition)
                for index, condition in enumerate(wait.subflows())
            ]
            spec_json = wait_spec(
                wait, spec.channels, self._now(), [child.request for child in children]
            )
            waiting = replace(step, phase=Phase.WAITING, attempt=1, due_at=None, returned=False)
            return replace(staged, decision=EnterWait(waiting, spec_json, tuple(children)))
        delay = wait.delay_seconds()
        due = self._now() + int(delay * 1_000_000) if delay > 0 else None
        if not staged.changes_state() and due is None:
            return None
        execute = replace(step, phase=Phase.EXECUTE, attempt=1, due_at=due, returned=False)
        return replace(staged, decision=EnterExecute(execute))

    async def _decision_effects(
        self, step: QueuedStep, spec: FlowSpec, context: InvocationContext, decision: Any
    ) -> StagedEffects:
        if not isinstance(decision, StepDecision):
            raise InvalidStepResultError(
                f"{step.step_type}.execute returned {decision!r}, not a StepDecision"
            )
        kind = OutcomeKind.of(decision.kind)
        close = _closing(
            step,
            kind,
            output=_codec.encode(decision.output) if kind.is_completion else None,
            error_type=decision.error_type,
            error_message=decision.error_message,
        )
        staged = await effects.stage(self._blobs, spec, context)
        return replace(
            staged,
            cancel_step_types=effects.step_type_names(spec, decision.canceling_steps),
            next_steps=effects.next_steps(
                spec, run_id=step.run_id, flow_id=step.flow_id, movements=decision.movements
            ),
            decision=close,
        )

    async def _commit_step(self, attempt: Attempt, staged: StagedEffects) -> None:
        step = attempt.step
        committed = await self._commit(
            attempt, self._committer.step(step, staged, self._now(), attempt.after)
        )
        if committed:
            decision = staged.decision
            if isinstance(decision, StepClose):
                self._report(step, decision.kind.value.lower())
            else:
                self._report(step, "waiting" if isinstance(decision, EnterWait) else "waited")

    async def _commit(self, attempt: Attempt, commit: Awaitable[CommitResult]) -> bool:
        """Await a commit of this attempt and return True; a canceled or superseded attempt
        is dropped (False)."""
        try:
            await commit
        except StaleAttemptError:
            self._stop(attempt)
            self._report(attempt.step, "superseded")
            return False
        return True

    def _report(self, step: QueuedStep, outcome: str) -> None:
        self._telemetry.step_attempt(step.flow_type, step.step_type, outcome)

    async def _fail(
        self, attempt: Attempt, spec: FlowSpec, sspec: StepSpec, exc: Exception
    ) -> None:
        step = attempt.step
        error_type, message = type(exc).__name__, str(exc)
        trace = failures.traceback_text(exc)
        policy = sspec.plans[step.phase].retry
        retrying = step.attempt < policy.max_attempts
        due = None
        if retrying:
            due = self._now() + int(policy.delay_before(step.attempt + 1) * 1_000_000)
        failures.log_step_failure(exc, step, retry_at=due)
        if due is not None:
            # The retry keeps its locks while it waits.
            retry = replace(
                step,
                attempt=step.attempt + 1,
                due_at=due,
                returned=False,
                held_locks=tuple(sspec.plans[step.phase].lock_keys),
            )
            unit = units.retry_step(
                step=retry,
                attempt=step.attempt,
                error_type=error_type,
                error_message=message,
                now=self._now(),
                traceback=trace,
            )
            if await self._commit(attempt, self._committer.commit(unit, after=attempt.after)):
                self._report(step, "retried")
            return
        failure = sspec.options.failure_step
        movements = [] if failure is None else [_failure_movement(failure, step, exc)]
        staged = StagedEffects(
            next_steps=effects.next_steps(
                spec, run_id=step.run_id, flow_id=step.flow_id, movements=movements
            ),
            decision=replace(
                _closing(step, OutcomeKind.FAILED, error_type=error_type, error_message=message),
                traceback=trace,
            ),
        )
        await self._commit_step(attempt, staged)


def _closing(
    step: QueuedStep,
    kind: OutcomeKind,
    *,
    output: str | None = None,
    error_type: str | None = None,
    error_message: str | None = None,
) -> StepClose:
    """Return the close of ``step``'s current attempt."""
    return StepClose(
        step_id=step.id,
        step_type=step.step_type,
        attempt=step.attempt,
        kind=kind,
        output=output,
        error_type=error_type,
        error_message=error_message,
        # WAITING never decides: its wait completes into execute, or the run closes.
        phase=Phase.WAIT_FOR if step.phase == Phase.WAIT_FOR else Phase.EXECUTE,
    )


def _failure_movement(failure: Any, step: QueuedStep, exc: Exception) -> StepMovement:
    return StepMovement.of(
        failure,
        {
            "stepType": step.step_type,
            "stepExecutionId": step.execution_id,
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
        },
    )
