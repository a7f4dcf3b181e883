"""TimerFlow: one Step whose ``wait_for`` waits on a durable Timer before ``execute`` runs.

The Timer's due time is committed when the wait begins, so a server that restarts meanwhile
fires it on time (or at once, if it is already due) instead of starting the wait over.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    graceful_complete,
)

TIMER_WAITING = "waiting"
TIMER_FIRED = "fired"
DEFAULT_SECONDS = 5.0
MAX_SECONDS = 3600.0


class TimerInput(BaseModel):
    """How long the Step waits."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    seconds: float = Field(default=DEFAULT_SECONDS, ge=0, le=MAX_SECONDS)


def fired_text(seconds: float) -> str:
    """Return the Step's completion output after a ``seconds`` wait."""
    return f"timer fired after {seconds:g} s"


class WaitForTimer(Step[TimerInput]):
    """Wait ``seconds`` on a Timer, then record that it fired and complete."""

    def wait_for(self, context: Context, input: TimerInput) -> Wait:
        """Mark the timer waiting and run ``execute`` once it has fired."""
        # This write commits with the Timer's due time, so `waiting` also says the wait is
        # durable from here on.
        self.flow.timer_status.set(context, TIMER_WAITING)
        return Wait.until(Timer.by_duration(timedelta(seconds=input.seconds)))

    def execute(self, context: Context, input: TimerInput) -> StepDecision:
        """Mark the timer fired and complete the Flow."""
        self.flow.timer_status.set(context, TIMER_FIRED)
        return graceful_complete(fired_text(input.seconds))


class TimerFlow(Flow[TimerInput]):
    """A Flow that waits on a Timer, then completes."""

    timer_status: Attribute[str] = Attribute("timer-status", str)

    def get_steps(self) -> StepList[TimerInput]:
        """Start with WaitForTimer."""
        return StepList.start_step(WaitForTimer())
