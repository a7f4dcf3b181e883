"""CounterFlow: an RPC-only counter whose RPCs show Attribute locks at work.

``increment`` is a read-modify-write under the ``counter`` lock, so concurrent increments never
lose an update. RPCs never queue for a lock: while a Step or another RPC holds it, an increment
fails at once with RPC_LOCK_CONFLICT and the caller retries. ``hold_counter_lock`` starts a
HoldCounterLock Step that keeps the lock for a while, to make that conflict easy to see.
Steps, unlike RPCs, queue for locks: ``finish`` starts FinishCounting, which waits behind any
hold, then completes the Flow with the final count. ``read_counter`` takes no lock and commits
nothing, so it still answers once the Flow has closed.
"""

from __future__ import annotations

import asyncio

from engine import (
    Attribute,
    Context,
    Flow,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Stream,
    dead_end,
    force_complete,
    rpc,
)

DEFAULT_HOLD_SECONDS = 5.0
MAX_HOLD_SECONDS = 60.0
MAX_INCREMENT = 1000


def holding_text(seconds: float) -> str:
    """Return the message HoldCounterLock writes once it holds the lock."""
    return f"holding the counter lock for {seconds:g} s"


RELEASING_TEXT = "releasing the counter lock"


class HoldCounterLock(Step[float]):
    """Hold the ``counter`` lock for ``input`` seconds, then end without a completion."""

    def get_step_options(self) -> StepOptions:
        """Lock ``counter`` for the whole of ``execute``."""
        return StepOptions(execute_lock_attributes=(self.flow.counter.lock(),))

    async def execute(self, context: Context, input: float) -> StepDecision:
        """Announce the hold on the ``counter-lock`` Stream, sleep, announce the release."""
        # execute runs only once the lock is granted, so a reader of this message knows an
        # increment sent now will conflict.
        self.flow.lock_events.write(context, holding_text(input))
        await asyncio.sleep(input)
        self.flow.lock_events.write(context, RELEASING_TEXT)
        # The Flow stays open for more RPCs: this branch ends without a completion.
        return dead_end()


class FinishCounting(Step[None]):
    """Complete the Flow with the final count, after every earlier holder of the lock."""

    def get_step_options(self) -> StepOptions:
        """Lock ``counter`` for ``execute``.

        The Step then queues behind every earlier hold, and no increment commits while it reads
        the final value.
        """
        return StepOptions(execute_lock_attributes=(self.flow.counter.lock(),))

    def execute(self, context: Context, input: None) -> StepDecision:
        """Complete the Flow now with the counter's value (holds queued later are canceled)."""
        return force_complete(self.flow.counter.get(context) or 0)


class CounterFlow(Flow[None]):
    """An RPC-only counter: locked increments, a lock-holding Step and a read-only read."""

    counter: Attribute[int] = Attribute("counter", int)
    lock_events: Stream[str] = Stream("counter-lock", str)

    def get_steps(self) -> StepList[None]:
        """No start Step; RPCs move to HoldCounterLock and FinishCounting."""
        steps: StepList[None] = StepList.empty().other_steps(HoldCounterLock(), FinishCounting())
        return steps

    @rpc(lock_attributes=(counter.lock(),))
    def increment(self, context: Context, input: int) -> int:
        """Add ``input`` to the counter and return the new value (read-modify-write)."""
        value = (self.counter.get(context) or 0) + input
        self.counter.set(context, value)
        return value

    @rpc
    def hold_counter_lock(self, context: Context, input: float) -> RPCResult[float]:
        """Start a HoldCounterLock Step that keeps the counter lock for ``input`` seconds."""
        # This RPC takes no lock itself: the Step takes it when it is handed out.
        return RPCResult(input, next_steps=(StepMovement.of(HoldCounterLock, input),))

    @rpc
    def finish(self, context: Context) -> RPCResult[str]:
        """Start FinishCounting; return the run it will complete."""
        return RPCResult(context.run_id, next_steps=(StepMovement.of(FinishCounting, None),))

    @rpc
    def read_counter(self, context: Context) -> int:
        """Return the committed counter, 0 when unset.

        No lock and no effects, so it also answers on a closed run.
        """
        return self.counter.get(context) or 0
