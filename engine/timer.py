"""Timers: durable wait conditions that fire after a duration."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from engine.errors import DefinitionError


@dataclass(frozen=True)
class Timer:
    """A wait condition satisfied once ``duration`` has passed since the wait began."""

    duration: timedelta

    @classmethod
    def by_duration(cls, duration: timedelta) -> Timer:
        """Return a Timer that fires after ``duration`` (zero or more)."""
        if not isinstance(duration, timedelta) or duration < timedelta(0):
            raise DefinitionError("Timer duration must be a non-negative timedelta")
        return cls(duration)
