"""What a Step's ``wait_for`` returns: when its ``execute`` may run."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.errors import DefinitionError
from engine.timer import Timer


class WaitMode(enum.StrEnum):
    """How a Wait combines its conditions."""

    #: No conditions: ``execute`` runs at once.
    SKIP = "SKIP"
    #: Every condition must hold (``until`` is ``all_of`` with one condition).
    ALL = "ALL"
    #: One condition is enough.
    ANY = "ANY"


@dataclass(frozen=True)
class Wait:
    """A wait over conditions: skip, one condition, all of several, or any of several."""

    mode: WaitMode
    conditions: tuple[Timer | Wait, ...] = ()

    @classmethod
    def skip_immediately(cls) -> Wait:
        """Run ``execute`` at once."""
        return cls(WaitMode.SKIP)

    @classmethod
    def until(cls, condition: Timer | Wait) -> Wait:
        """Wait until one condition holds."""
        return cls(WaitMode.ALL, (_check(condition),))

    @classmethod
    def all_of(cls, *conditions: Timer | Wait) -> Wait:
        """Wait until every condition holds."""
        return cls(WaitMode.ALL, tuple(_check(c) for c in conditions))

    @classmethod
    def any_of(cls, *conditions: Timer | Wait) -> Wait:
        """Wait until at least one condition holds."""
        if not conditions:
            raise DefinitionError("Wait.any_of needs at least one condition")
        return cls(WaitMode.ANY, tuple(_check(c) for c in conditions))

    def delay_seconds(self) -> float:
        """Return how long this wait lasts, in seconds, given that only Timers are waited on."""
        if self.mode == WaitMode.SKIP or not self.conditions:
            return 0.0
        delays = [
            c.duration.total_seconds() if isinstance(c, Timer) else c.delay_seconds()
            for c in self.conditions
        ]
        return max(delays) if self.mode == WaitMode.ALL else min(delays)


def _check(condition: object) -> Timer | Wait:
    if not isinstance(condition, Timer | Wait):
        raise DefinitionError(f"unsupported wait condition {condition!r}")
    return condition
