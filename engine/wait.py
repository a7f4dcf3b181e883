"""What a Step's ``wait_for`` returns: when its ``execute`` may run."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import DefinitionError
from engine.timer import Timer

Condition = "Timer | Wait"


@dataclass(frozen=True)
class Wait:
    """A wait over conditions: skip, one condition, all of several, or any of several."""

    mode: str  # "skip", "all" or "any"
    conditions: tuple[Timer | Wait, ...] = ()

    @classmethod
    def skip_immediately(cls) -> Wait:
        """Run ``execute`` at once."""
        return cls("skip")

    @classmethod
    def until(cls, condition: Timer | Wait) -> Wait:
        """Wait until one condition holds."""
        return cls("all", (_check(condition),))

    @classmethod
    def all_of(cls, *conditions: Timer | Wait) -> Wait:
        """Wait until every condition holds."""
        return cls("all", tuple(_check(c) for c in conditions))

    @classmethod
    def any_of(cls, *conditions: Timer | Wait) -> Wait:
        """Wait until at least one condition holds."""
        if not conditions:
            raise DefinitionError("Wait.any_of needs at least one condition")
        return cls("any", tuple(_check(c) for c in conditions))

    def delay_seconds(self) -> float:
        """Return how long this wait lasts, in seconds, given that only Timers are waited on."""
        if self.mode == "skip" or not self.conditions:
            return 0.0
        delays = [
            c.duration.total_seconds() if isinstance(c, Timer) else c.delay_seconds()
            for c in self.conditions
        ]
        return max(delays) if self.mode == "all" else min(delays)


def _check(condition: object) -> Timer | Wait:
    if not isinstance(condition, Timer | Wait):
        raise DefinitionError(f"unsupported wait condition {condition!r}")
    return condition
