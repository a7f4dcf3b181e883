"""A registry whose one Flow fails, served for the Flow page's failure view."""

from __future__ import annotations

from datetime import timedelta

from engine import Context, Flow, Registry, RetryPolicy, Step, StepDecision, StepList, StepOptions
from engine import graceful_complete as _complete


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


registry = Registry([PaymentFlow()])
