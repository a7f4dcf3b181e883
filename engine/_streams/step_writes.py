"""Carries the messages Steps write to the Stream Store, without making a Step wait.

``Stream.write`` in a Step returns at once (a ``def`` Step's write reaches the event loop
through ``call_soon_threadsafe``); here the message joins the lane of its (Flow type, Stream)
and one task per busy lane appends the lane's messages one after another, so a Stream keeps
the order its writers wrote in while the store answers over a network. The scheduler awaits
:meth:`StepWrites.sent` before it commits an invocation's result, so a Step's messages are in
the store before its outcome is visible. A full, closed or unreachable store drops messages
(they are best effort) with a log line; so does a lane already holding a Stream's capacity.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from engine._streams.store_interface import StreamStore
from engine.errors import FailedPreconditionError, ResourceExhaustedError

log = logging.getLogger("dexlite.streams")

_Item = tuple[int, str, str, str]  # capacity, Flow ID, source, JSON text


class _Lane:
    __slots__ = ("items", "chars", "task")

    def __init__(self) -> None:
        self.items: deque[_Item] = deque()
        self.chars = 0
        self.task: asyncio.Task[None] | None = None


class StepWrites:
    """The lanes of Step messages on their way to one store."""

    def __init__(self, store: StreamStore, on_idle: Callable[[], None] = lambda: None) -> None:
        self._store = store
        # Told when a lane empties, so whoever waits for the engine to settle looks again.
        self._on_idle = on_idle
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._pending: dict[str, int] = {}  # messages not yet appended, by source
        self._sent: dict[str, list[asyncio.Future[None]]] = {}
        self._in_hand = 0
        self._closed = False

    def pending(self) -> int:
        """Return how many Step messages are queued or being appended."""
        return self._in_hand

    def send(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> None:
        """Queue a message behind its Stream's earlier ones (on the event loop thread)."""
        if self._closed:
            log.info("dropped a message of %s to Stream %r: the store is closed", source, name)
            return
        key = (flow_type, name)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        # A lane holding more than the Stream can keep would only feed trimming: shed load.
        if lane.items and lane.chars + len(text) > capacity:
            log.info("dropped a message of %s to Stream %r: the store is behind", source, name)
            return
        lane.items.append((capacity, flow_id, source, text))
        lane.chars += len(text)
        self._pending[source] = self._pending.get(source, 0) + 1
        self._in_hand += 1
        if lane.task is None:
            lane.task = asyncio.get_running_loop().create_task(
                self._drain(key, lane), name=f"stream-writes-{flow_type}-{name}"
            )

    async def sent(self, source: str) -> None:
        """Return once every message ``source`` queued so far was appended or dropped."""
        if source not in self._pending:
            return
        done = asyncio.get_running_loop().create_future()
        self._sent.setdefault(source, []).append(done)
        await done

    async def close(self) -> None:
        """Drop the queued messages and stop every lane."""
        self._closed = True
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for lane in self._lanes.values():
            while lane.items:
                self._done(lane.items.popleft()[2])
        self._lanes.clear()

    async def _drain(self, key: tuple[str, str], lane: _Lane) -> None:
        flow_type, name = key
        try:
            while lane.items:
                capacity, flow_id, source, text = item = lane.items.popleft()
                lane.chars -= len(text)
                try:
                    await self._store.append(flow_type, name, capacity, flow_id, source, text)
                except (ResourceExhaustedError, FailedPreconditionError) as exc:
                    log.info("dropped a message of %s to Stream %r: %s", source, name, exc.detail)
                except Exception:  # a best-effort message must not stop its lane
                    log.exception("dropped a message of %s to Stream %r", source, name)
                finally:
                    self._done(item[2])
        finally:
            lane.task = None
            if not lane.items and self._lanes.get(key) is lane:
                del self._lanes[key]
            self._on_idle()

    def _done(self, source: str) -> None:
        self._in_hand -= 1
        left = self._pending[source] - 1
        if left:
            self._pending[source] = left
            return
        del self._pending[source]
        for waiter in self._sent.pop(source, ()):
            if not waiter.done():
                waiter.set_result(None)
