"""The in-process StepQueue: pending executions in memory, handed out once due.

This process is the only one running the Flows of its database, so the queue is rebuilt from
the durable Step rows at start-up (``recovery``) and fed by commits afterwards.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

from engine._storage.records import QueuedStep
from engine.clock import Clock, to_micros

if TYPE_CHECKING:
    from engine._runtime.ports import TimerHandle, TimerQueue

#: How many IDs of executions that ended before this queue heard of them are remembered.
TOMBSTONES = 10_000


class MemoryStepQueue:
    """Queued executions by ID; due ones wait in arrival order to be claimed."""

    def __init__(self, timers: TimerQueue, clock: Clock) -> None:
        self._timers = timers
        self._clock = clock
        self._queued: dict[str, QueuedStep] = {}
        self._delayed: dict[str, TimerHandle] = {}
        self._ready: deque[str] = deque()
        # IDs that ended (canceled by a commit) before they were submitted: never hand them out.
        self._tombstones: OrderedDict[str, None] = OrderedDict()
        self._wakeup = asyncio.Event()
        self._closed = False

    def submit(self, step: QueuedStep) -> None:
        """Queue ``step``; it is claimable from its due time on."""
        if self._closed:
            return
        if step.id in self._tombstones:
            del self._tombstones[step.id]
            return
        self._drop(step.id)
        self._queued[step.id] = step
        due = step.due_at
        if due is not None and due > to_micros(self._clock.now()):
            self._delayed[step.id] = self._timers.call_at(
                due / 1_000_000, lambda: self._make_ready(step)
            )
        else:
            self._make_ready(step)

    def _make_ready(self, step: QueuedStep) -> None:
        self._delayed.pop(step.id, None)
        if self._queued.get(step.id) is step:
            self._ready.append(step.id)
            self._wakeup.set()

    async def claim(self) -> QueuedStep:
        """Wait for the next due execution and hand it out."""
        while True:
            while self._ready:
                step = self._queued.pop(self._ready.popleft(), None)
                if step is not None:
                    return step
            self._wakeup.clear()
            await self._wakeup.wait()

    def renew(self, step_id: str) -> None:
        """Claims of this queue never expire: there is no other process to take them over."""

    def release(self, step_id: str) -> None:
        """The execution ended: drop it, and never hand it out should it be submitted late."""
        if not self._drop(step_id):
            self._tombstones[step_id] = None
            while len(self._tombstones) > TOMBSTONES:
                self._tombstones.popitem(last=False)

    def _drop(self, step_id: str) -> bool:
        handle = self._delayed.pop(step_id, None)
        if handle is not None:
            handle.cancel()
        return self._queued.pop(step_id, None) is not None

    def ready(self) -> int:
        """Return how many due executions wait to be claimed."""
        return sum(1 for step_id in self._ready if step_id in self._queued)

    def close(self) -> None:
        """Stop handing out executions and drop their timers."""
        self._closed = True
        for handle in self._delayed.values():
            handle.cancel()
        self._delayed.clear()
        self._queued.clear()
        self._ready.clear()
