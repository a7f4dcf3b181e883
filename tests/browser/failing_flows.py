"""A registry of its own, served for the Flow page's failure views: one Flow fails for good, one
waits out a long retry back-off. None of the playground's bundled examples is in it."""

from __future__ import annotations

from datetime import timedelta

from engine import Context, Flow, Registry, RetryPolicy, Step, StepDecision, StepList, StepOptions
from engine import graceful_complete as _complete

#: How long the second attempt of Refund waits: the page shows it pending all the while.
REFUND_BACKOFF = timedelta(hours=1)


def charge(card: str) -> None:
    """Where the tracebacks point."""
    raise RuntimeError(f"payment gateway down for {card}")


class Pay(Step[str]):
    """Fails on every attempt; tried twice, 300 ms apart."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(max_attempts=2, initial_interval=timedelta(milliseconds=300))
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        charge(input)
        return _complete("paid")


class PaymentFlow(Flow[str]):
    """One Step that fails for good."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Pay())


class Refund(Step[str]):
    """Fails its first attempt; the second is due REFUND_BACKOFF later."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(
                max_attempts=2, initial_interval=REFUND_BACKOFF, max_interval=REFUND_BACKOFF
            )
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        charge(input)
        return _complete("refunded")


class RefundFlow(Flow[str]):
    """One Step that retries after a long back-off."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Refund())


registry = Registry([PaymentFlow(), RefundFlow()])
