"""A timer queue driven by the engine's clock: one task sleeps until the earliest deadline."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable

from engine.clock import Clock

log = logging.getLogger("dexlite.timers")


class TimerHandle:
    """A scheduled callback that can be cancelled."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the callback from running."""
        self.cancelled = True


class ClockTimers:
    """Runs callbacks at times of the engine's clock (the in-process TimerQueue)."""

    def __init__(self, clock: Clock, on_fired: Callable[[], None] = lambda: None) -> None:
        self._clock = clock
        # Called after each round of due callbacks, so whoever waits for idleness looks again.
        self._on_fired = on_fired
        self._heap: list[tuple[float, int, TimerHandle, Callable[[], None]]] = []
        self._counter = itertools.count()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the timer task."""
        self._task = asyncio.create_task(self._run(), name="dexlite-timers")

    async def stop(self) -> None:
        """Stop the timer task; pending callbacks do not run."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once the clock reaches ``when`` (epoch seconds)."""
        handle = TimerHandle()
        heapq.heappush(self._heap, (when, next(self._counter), handle, callback))
        self._changed.set()
        return handle

    def has_due(self) -> bool:
        """Return True when a callback is due now and has not run yet."""
        now = self._clock.now()
        if not self._heap or self._heap[0][0] > now:
            return False
        return any(when <= now and not handle.cancelled for when, _, handle, _ in self._heap)

    async def _run(self) -> None:
        while True:
            now = self._clock.now()
            while self._heap and self._heap[0][0] <= now:
                _, _, handle, callback = heapq.heappop(self._heap)
                if not handle.cancelled:
                    try:
                        callback()
                    except Exception:  # a timer callback must not stop the timer task
                        log.exception("timer callback failed")
            while self._heap and self._heap[0][2].cancelled:
                heapq.heappop(self._heap)
            self._on_fired()
            self._changed.clear()
            if not self._heap:
                # Nothing is scheduled: wait for a call_at rather than sleep on the clock, so a
                # ManualClock sees no deadline it would skip to.
                await self._changed.wait()
                continue
            sleeper = asyncio.ensure_future(self._clock.sleep(self._heap[0][0] - now))
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                changed.cancel()
