"""What a Step's ``wait_for`` returns: when its ``execute`` may run."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.channel import ChannelCondition
from engine.errors import DefinitionError
from engine.subflow import SubFlowCondition
from engine.timer import Timer

#: What a Wait waits on: a Timer, a Channel condition, a SubFlow, or another Wait.
Condition = Timer | ChannelCondition | SubFlowCondition


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
    """A wait over conditions: skip, one condition, all of several, or any of several.

    When several conditions of an ``any_of`` are ready at once, the winner is chosen in a fixed
    order: Timers, then Channel conditions, then SubFlows (a nested Wait counts as the first
    kind it holds), argument order within a kind. Only the winner (for ``all_of``, every
    condition) consumes Channel messages; SubFlows that lose an ``any_of`` keep running.
    """

    mode: WaitMode
    conditions: tuple[Condition | Wait, ...] = ()

    @classmethod
    def skip_immediately(cls) -> Wait:
        """Run ``execute`` at once."""
        return cls(WaitMode.SKIP)

    @classmethod
    def until(cls, condition: Condition | Wait) -> Wait:
        """Wait until one condition holds."""
        return cls(WaitMode.ALL, (_check(condition),))

    @classmethod
    def all_of(cls, *conditions: Condition | Wait) -> Wait:
        """Wait until every condition holds."""
        return cls(WaitMode.ALL, tuple(_check(c) for c in conditions))

    @classmethod
    def any_of(cls, *conditions: Condition | Wait) -> Wait:
        """Wait until at least one condition holds."""
        if not conditions:
            raise DefinitionError("Wait.any_of needs at least one condition")
        return cls(WaitMode.ANY, tuple(_check(c) for c in conditions))

    def only_timers(self) -> bool:
        """Return True when nothing but Timers is waited on (the wait is a due time)."""
        return all(
            isinstance(c, Timer) or (isinstance(c, Wait) and c.only_timers())
            for c in self.conditions
        )

    def subflows(self) -> list[SubFlowCondition]:
        """Return the SubFlow conditions, in argument order (depth first): their indexes."""
        found: list[SubFlowCondition] = []
        for c in self.conditions:
            if isinstance(c, SubFlowCondition):
                found.append(c)
            elif isinstance(c, Wait):
                found.extend(c.subflows())
        return found

    def delay_seconds(self) -> float:
        """Return how long this wait lasts, in seconds, given that only Timers are waited on."""
        if self.mode == WaitMode.SKIP or not self.conditions:
            return 0.0
        delays = [
            c.duration.total_seconds() if isinstance(c, Timer) else c.delay_seconds()
            for c in self.conditions
            if isinstance(c, Timer | Wait)
        ]
        return max(delays) if self.mode == WaitMode.ALL else min(delays)


def _check(condition: object) -> Condition | Wait:
    if not isinstance(condition, Timer | ChannelCondition | SubFlowCondition | Wait):
        raise DefinitionError(f"unsupported wait condition {condition!r}")
    return condition
