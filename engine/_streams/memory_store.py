"""The in-memory Stream Store: messages in this process's memory, capacity, trimming and
waiting readers.

Everything here runs on the event loop thread; Step writes from worker threads arrive through
``call_soon_threadsafe`` and the Stream service's write lanes. The coroutines of the store
interface never suspend here: an append or a page is one step of the event loop, as atomic as
it was when they were plain functions. Messages of one (Flow type, Stream) share one sequence
counter, so a resume token stays meaningful when a Flow ID's messages are trimmed away and new
ones arrive.
"""

from __future__ import annotations

import asyncio
import secrets
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine._streams.store_interface import StoredStreamMessage, sequence_of
from engine._streams.trimming import Trimming
from engine.errors import FailedPreconditionError, ResourceExhaustedError
from engine.stream import StreamStoreConfig

if TYPE_CHECKING:
    from engine.clock import Clock


class _Instance:
    """The retained messages of one Flow ID, oldest first (a list with a moving head)."""

    __slots__ = ("messages", "head")

    def __init__(self) -> None:
        self.messages: list[StoredStreamMessage] = []
        self.head = 0

    def __len__(self) -> int:
        return len(self.messages) - self.head

    def popleft(self) -> StoredStreamMessage:
        message = self.messages[self.head]
        self.head += 1
        if self.head >= 256 and self.head * 2 >= len(self.messages):
            del self.messages[: self.head]
            self.head = 0
        return message

    def first_after(self, seq: int) -> StoredStreamMessage | None:
        i = bisect_right(self.messages, seq, lo=self.head, key=sequence_of)
        return self.messages[i] if i < len(self.messages) else None

    def page_before(self, seq: int | None, size: int) -> tuple[list[StoredStreamMessage], bool]:
        end = len(self.messages)
        if seq is not None:
            end = bisect_left(self.messages, seq, lo=self.head, key=sequence_of)
        start = max(self.head, end - size)
        return self.messages[start:end][::-1], start > self.head


class _StreamState:
    """One (Flow type, Stream): its capacity, usage and every Flow ID's messages."""

    __slots__ = (
        "flow_type",
        "name",
        "capacity",
        "usage",
        "next_seq",
        "instances",
        "order",
    )

    def __init__(self, flow_type: str, name: str, capacity: int) -> None:
        self.flow_type = flow_type
        self.name = name
        self.capacity = capacity
        self.usage = 0
        self.next_seq = 1
        self.instances: dict[str, _Instance] = {}
        self.order: deque[StoredStreamMessage] = deque()  # every Flow ID's messages, oldest first


class _Waiter:
    __slots__ = ("event", "count")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.count = 0


class MemoryStreamStore:
    """Stream messages in memory, with capacity, background trimming and long-poll waiters."""

    def __init__(
        self,
        config: StreamStoreConfig,
        clock: Clock,
        on_trim_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.clock = clock
        self._epoch = secrets.token_hex(4)
        self.total = 0
        self.closed = False
        self._streams: dict[tuple[str, str], _StreamState] = {}
        self._waiters: dict[tuple[str, str, str], _Waiter] = {}
        self._trimming = Trimming(
            workers=config.trim_workers,
            trim_slice=self._trim_slice,
            usages=self._usages,
            on_done=on_trim_done,
            kind="memory",
        )

    @property
    def trim_jobs_started(self) -> int:
        """Return how many trim jobs were started."""
        return self._trimming.started

    def trims_running(self) -> int:
        """Return how many trim jobs (and room planners) are under way."""
        return self._trimming.running()

    async def total_bytes(self) -> int:
        """Return how many bytes the store holds."""
        return self.total

    def readers_waiting(self) -> int:
        """Return how many readStream calls wait for a message."""
        return sum(waiter.count for waiter in self._waiters.values())

    @property
    def epoch(self) -> str:
        """Identify this process's contents; they vanish when it restarts."""
        return self._epoch

    async def open(self) -> None:
        """Nothing to reach: the contents start empty with this process."""

    async def close(self) -> None:
        """Wake every waiting reader and stop trimming; later calls fail."""
        self.closed = True
        for waiter in self._waiters.values():
            waiter.event.set()
        self._waiters.clear()
        await self._trimming.close()

    # -- sizes and limits ---------------------------------------------------------------------

    def message_size(self, flow_id: str, source: str, text: str) -> int:
        """Return a message's estimated size: value, Flow ID, source and the overhead."""
        return (
            len(text.encode("utf-8"))
            + len(flow_id.encode("utf-8"))
            + len(source.encode("utf-8"))
            + self.config.message_overhead_bytes
        )

    def state(self, flow_type: str, name: str, capacity: int) -> _StreamState:
        """Return the state of one (Flow type, Stream), creating it empty."""
        state = self._streams.get((flow_type, name))
        if state is None:
            state = self._streams[(flow_type, name)] = _StreamState(flow_type, name, capacity)
        return state

    async def stats(self, flow_type: str, name: str) -> dict[str, Any]:
        """Return usage figures of one Stream (for tests and operators)."""
        state = self._streams.get((flow_type, name))
        if state is None:
            return {"usage": 0, "messages": 0, "trimming": False, "capacity": None}
        return {
            "usage": state.usage,
            "messages": len(state.order),
            "trimming": self._trimming.trimming(flow_type, name),
            "capacity": state.capacity,
        }

    # -- writes ---------------------------------------------------------------------------------

    async def append(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> StoredStreamMessage:
        """Append a message or raise ResourceExhaustedError (asking trimming for room)."""
        if self.closed:
            raise FailedPreconditionError("the Stream Store is closed", operation="writeStream")
        config = self.config
        where = f"Stream {name!r} of Flow type {flow_type}"
        value_bytes = len(text.encode("utf-8"))
        if value_bytes > config.max_message_bytes:
            raise _exhausted(
                f"the message value is {value_bytes} bytes; {where} accepts at most "
                f"{config.max_message_bytes} bytes per message; do not retry",
                retryable=False,
            )
        state = self.state(flow_type, name, capacity)
        size = value_bytes + self.message_size(flow_id, source, "")
        if size > state.capacity or size > config.max_total_bytes:
            raise _exhausted(
                f"the message needs about {size} bytes, more than the capacity of {where} "
                f"({min(state.capacity, config.max_total_bytes)} bytes); it can never fit, "
                "do not retry",
                retryable=False,
            )
        if state.usage + size > state.capacity:
            self._trimming.request(flow_type, name, state.capacity - size)
            raise _exhausted(
                f"{where} is at its capacity of {state.capacity} bytes; trimming is making "
                "room, retry after a short delay",
                retryable=True,
            )
        if self.total + size > config.max_total_bytes:
            self._trimming.make_room(self.total + size - config.max_total_bytes)
            raise _exhausted(
                f"the server's Streams hold their limit of {config.max_total_bytes} bytes; "
                "trimming the largest Streams, retry after a short delay",
                retryable=True,
            )
        message = StoredStreamMessage(state.next_seq, flow_id, text, source, self.clock.now(), size)
        state.next_seq += 1
        instance = state.instances.get(flow_id)
        if instance is None:
            instance = state.instances[flow_id] = _Instance()
        instance.messages.append(message)
        state.order.append(message)
        state.usage += size
        self.total += size
        if state.usage >= state.capacity * config.trim_trigger_ratio:
            self._trimming.request(flow_type, name, int(state.capacity * config.trim_target_ratio))
        waiter = self._waiters.pop((flow_type, name, flow_id), None)
        if waiter is not None:
            waiter.event.set()
        return message

    # -- reads ----------------------------------------------------------------------------------

    async def next_after(
        self, flow_type: str, name: str, flow_id: str, after: int, wait_seconds: float
    ) -> StoredStreamMessage | None:
        """Return the first retained message with a sequence above ``after``, waiting up to
        ``wait_seconds`` for one to be written."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        key = (flow_type, name, flow_id)
        while True:
            if self.closed:
                raise FailedPreconditionError("the Stream Store is closed", operation="readStream")
            state = self._streams.get((flow_type, name))
            instance = state.instances.get(flow_id) if state is not None else None
            if instance is not None:
                found = instance.first_after(after)
                if found is not None:
                    return found
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            waiter = self._waiters.get(key)
            if waiter is None:
                waiter = self._waiters[key] = _Waiter()
            waiter.count += 1
            try:
                async with asyncio.timeout(remaining):
                    await waiter.event.wait()
            except TimeoutError:
                pass
            finally:
                waiter.count -= 1
                if waiter.count == 0 and self._waiters.get(key) is waiter:
                    del self._waiters[key]

    async def page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[list[StoredStreamMessage], bool]:
        """Return up to ``size`` messages older than ``before`` (or the tail), newest first,
        and whether older retained messages remain."""
        if self.closed:
            raise FailedPreconditionError(
                "the Stream Store is closed", operation="listStreamMessages"
            )
        state = self._streams.get((flow_type, name))
        instance = state.instances.get(flow_id) if state is not None else None
        if instance is None:
            return [], False
        return instance.page_before(before, size)

    # -- trimming -------------------------------------------------------------------------------

    async def _trim_slice(self, flow_type: str, name: str, target: int, limit: int) -> bool:
        """Remove up to ``limit`` oldest messages while usage is above ``target``; return
        whether usage is still above it with messages left."""
        state = self._streams.get((flow_type, name))
        if state is None:
            return False
        for _ in range(limit):
            if state.usage <= target or not state.order:
                return False
            self._pop_oldest(state)
        await asyncio.sleep(0)  # let appends and reads in between slices
        return state.usage > target and bool(state.order)

    async def _usages(self) -> list[tuple[tuple[str, str], int]]:
        """Return ((Flow type, Stream), usage) of every Stream holding messages."""
        return [(key, state.usage) for key, state in self._streams.items() if state.usage > 0]

    def _pop_oldest(self, state: _StreamState) -> None:
        message = state.order.popleft()
        instance = state.instances[message.flow_id]
        instance.popleft()
        if not instance:
            del state.instances[message.flow_id]
        state.usage -= message.size
        self.total -= message.size


def _exhausted(detail: str, *, retryable: bool) -> ResourceExhaustedError:
    return ResourceExhaustedError(detail, operation="writeStream", retryable=retryable)
