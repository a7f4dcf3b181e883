"""Clocks: the engine reads time only through one, so tests can move time by hand."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class IdleProbe(Protocol):
    """What a clock needs of an engine to skip time: whether it has work in hand."""

    async def wait_idle(self) -> None:
        """Return once no Step, commit or timer is due."""

    def pending(self) -> list[str]:
        """Describe the work in hand (empty when idle)."""


class Clock:
    """Wall-clock time in seconds since the epoch, and sleeping on it."""

    def now(self) -> float:
        """Return the current time in seconds since the epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds`` of this clock's time."""
        await asyncio.sleep(max(0.0, seconds))

    def attach(self, engine: IdleProbe) -> None:
        """Hear of an engine that runs on this clock (a ManualClock skips time for it)."""

    def detach(self, engine: IdleProbe) -> None:
        """Forget an engine that closed."""


class ManualClock(Clock):
    """A clock that moves only when told to; sleepers wake when it passes their deadline.

    In the spirit of Temporal's time-skipping test environment, :meth:`advance_when_idle`
    waits until every engine on the clock has nothing left to do at the current time, then
    jumps to the next deadline (or by a given amount), settling again at each deadline passed.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()
        self._engines: list[IdleProbe] = []

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

    def attach(self, engine: IdleProbe) -> None:
        """Include ``engine`` when waiting for idleness."""
        self._engines.append(engine)

    def detach(self, engine: IdleProbe) -> None:
        """Stop waiting for ``engine``."""
        if engine in self._engines:
            self._engines.remove(engine)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has passed."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def next_deadline(self) -> float | None:
        """Return the earliest deadline a sleeper still waits for, or None."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # a sleep that was cancelled
        return self._sleepers[0][0] if self._sleepers else None

    async def settle(self, *, give_up_after: float = 30.0) -> None:
        """Wait until every engine on this clock is idle at the current time.

        Raises TimeoutError naming the work still in hand after ``give_up_after`` seconds of
        real time (a handler that never returns, say).
        """
        for engine in list(self._engines):
            await wait_idle(engine, give_up_after)

    async def advance_when_idle(
        self, seconds: float | None = None, *, give_up_after: float = 30.0
    ) -> float:
        """Skip time once the engines are idle; return the new time.

        With ``seconds`` the clock moves that far, stopping at each deadline on the way to let
        what it wakes run (and schedule more); without, it moves to the next deadline only,
        staying put when nobody sleeps. It returns once the engines are idle again; each wait
        for idleness gives up after ``give_up_after`` seconds of real time (see :meth:`settle`).
        """
        await self.settle(give_up_after=give_up_after)
        if seconds is None:
            deadline = self.next_deadline()
            if deadline is None:
                return self._now
            target = deadline
        else:
            target = self._now + max(0.0, seconds)
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            self.advance(max(0.0, deadline - self._now))
            await self.settle(give_up_after=give_up_after)
        self.advance(target - self._now)
        await self.settle(give_up_after=give_up_after)
        return self._now


async def wait_idle(engine: IdleProbe, give_up_after: float) -> None:
    """Wait until ``engine`` is idle; raise TimeoutError naming its busy work after
    ``give_up_after`` seconds of real time."""
    try:
        async with asyncio.timeout(give_up_after):
            await engine.wait_idle()
    except TimeoutError:
        busy = ", ".join(engine.pending()) or "nothing (it settled just now)"
        raise TimeoutError(
            f"the engine did not settle within {give_up_after:g} s: {busy}"
        ) from None


def to_micros(seconds: float) -> int:
    """Convert epoch seconds to the integer microseconds stored in the database."""
    return int(round(seconds * 1_000_000))
