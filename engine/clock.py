"""Clocks: the engine reads time only through one, so tests can move time by hand."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time


class Clock:
    """Wall-clock time in seconds since the epoch, and sleeping on it."""

    def now(self) -> float:
        """Return the current time in seconds since the epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds`` of this clock's time."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock(Clock):
    """A clock that moves only when told to; sleepers wake when it passes their deadline."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        """Return the clock's current time."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been advanced by ``seconds``."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has passed."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


def to_micros(seconds: float) -> int:
    """Convert epoch seconds to the integer microseconds stored in the database."""
    return int(round(seconds * 1_000_000))
