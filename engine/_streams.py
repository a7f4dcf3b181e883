"""The Stream Store: messages in this process's memory, capacity, trimming and waiting readers.

Everything here runs on the event loop thread; Step writes from worker threads arrive through
``call_soon_threadsafe``. Messages of one (Flow type, Stream) share one sequence counter, so a
resume token stays meaningful when a Flow ID's messages are trimmed away and new ones arrive.
Tokens carry a per-process epoch: after a restart the old contents are gone, so an old resume
token starts at the retained head and an old page token yields an empty page.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import heapq
import logging
import secrets
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._runtime.step_io import StepIO
from engine.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    InvalidPageTokenError,
    ResourceExhaustedError,
    StreamNotFoundError,
)
from engine.stream import (
    Stream,
    StreamMessage,
    StreamMessagePage,
    StreamStoreConfig,
)

if TYPE_CHECKING:
    from engine.clock import Clock
    from engine.registry import Registry

log = logging.getLogger("dexlite.streams")

MAX_WAIT_SECONDS = 60.0
MAX_SOURCE_LENGTH = 1024
_TRIM_SLICE = 512  # messages removed between yields to the event loop
_RESUME, _PAGE = "r", "p"


@dataclass(slots=True, eq=False)
class _Message:
    seq: int
    flow_id: str
    text: str
    source: str
    created_at: float
    size: int


def _seq(message: _Message) -> int:
    return message.seq


class _Instance:
    """The retained messages of one Flow ID, oldest first (a list with a moving head)."""

    __slots__ = ("messages", "head")

    def __init__(self) -> None:
        self.messages: list[_Message] = []
        self.head = 0

    def __len__(self) -> int:
        return len(self.messages) - self.head

    def popleft(self) -> _Message:
        message = self.messages[self.head]
        self.head += 1
        if self.head >= 256 and self.head * 2 >= len(self.messages):
            del self.messages[: self.head]
            self.head = 0
        return message

    def first_after(self, seq: int) -> _Message | None:
        i = bisect_right(self.messages, seq, lo=self.head, key=_seq)
        return self.messages[i] if i < len(self.messages) else None

    def page_before(self, seq: int | None, size: int) -> tuple[list[_Message], bool]:
        end = len(self.messages)
        if seq is not None:
            end = bisect_left(self.messages, seq, lo=self.head, key=_seq)
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
        "trim_target",
        "trim_task",
    )

    def __init__(self, flow_type: str, name: str, capacity: int) -> None:
        self.flow_type = flow_type
        self.name = name
        self.capacity = capacity
        self.usage = 0
        self.next_seq = 1
        self.instances: dict[str, _Instance] = {}
        self.order: deque[_Message] = deque()  # every Flow ID's messages, oldest first
        self.trim_target: int | None = None
        self.trim_task: asyncio.Task[None] | None = None


class _Waiter:
    __slots__ = ("event", "count")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.count = 0


class MemoryStreamStore:
    """Stream messages in memory, with capacity, background trimming and long-poll waiters."""

    def __init__(self, config: StreamStoreConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.epoch = secrets.token_hex(4)
        self.total = 0
        self.closed = False
        self.trim_jobs_started = 0
        self._streams: dict[tuple[str, str], _StreamState] = {}
        self._waiters: dict[tuple[str, str, str], _Waiter] = {}
        self._trim_slots = asyncio.Semaphore(config.trim_workers)
        self._tasks: set[asyncio.Task[None]] = set()

    def close(self) -> None:
        """Wake every waiting reader and stop trimming; later calls fail."""
        self.closed = True
        for waiter in self._waiters.values():
            waiter.event.set()
        self._waiters.clear()
        for task in list(self._tasks):
            task.cancel()

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

    def stats(self, flow_type: str, name: str) -> dict[str, Any]:
        """Return usage figures of one Stream (for tests and operators)."""
        state = self._streams.get((flow_type, name))
        if state is None:
            return {"usage": 0, "messages": 0, "trimming": False, "capacity": None}
        return {
            "usage": state.usage,
            "messages": len(state.order),
            "trimming": state.trim_task is not None,
            "capacity": state.capacity,
        }

    # -- writes ---------------------------------------------------------------------------------

    def append(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> _Message:
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
            self._request_trim(state, state.capacity - size)
            raise _exhausted(
                f"{where} is at its capacity of {state.capacity} bytes; trimming is making "
                "room, retry after a short delay",
                retryable=True,
            )
        if self.total + size > config.max_total_bytes:
            self._request_room(self.total + size - config.max_total_bytes)
            raise _exhausted(
                f"the server's Streams hold their limit of {config.max_total_bytes} bytes; "
                "trimming the largest Streams, retry after a short delay",
                retryable=True,
            )
        message = _Message(state.next_seq, flow_id, text, source, self.clock.now(), size)
        state.next_seq += 1
        instance = state.instances.get(flow_id)
        if instance is None:
            instance = state.instances[flow_id] = _Instance()
        instance.messages.append(message)
        state.order.append(message)
        state.usage += size
        self.total += size
        if state.usage >= state.capacity * config.trim_trigger_ratio:
            self._request_trim(state, int(state.capacity * config.trim_target_ratio))
        waiter = self._waiters.pop((flow_type, name, flow_id), None)
        if waiter is not None:
            waiter.event.set()
        return message

    # -- reads ----------------------------------------------------------------------------------

    async def next_after(
        self, flow_type: str, name: str, flow_id: str, after: int, wait_seconds: float
    ) -> _Message | None:
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

    def page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[list[_Message], bool]:
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

    def _request_trim(self, state: _StreamState, target: int) -> None:
        """Ask the Stream's trim job (started if none runs) to bring usage down to ``target``."""
        target = max(0, target)
        state.trim_target = target if state.trim_target is None else min(state.trim_target, target)
        if state.trim_task is None and not self.closed:
            task = asyncio.get_running_loop().create_task(
                self._trim(state), name=f"stream-trim-{state.flow_type}-{state.name}"
            )
            state.trim_task = task
            self.trim_jobs_started += 1
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _trim(self, state: _StreamState) -> None:
        try:
            async with self._trim_slots:
                while True:
                    target = state.trim_target
                    if target is None or state.usage <= target or not state.order:
                        break
                    for _ in range(_TRIM_SLICE):
                        if state.usage <= target or not state.order:
                            break
                        self._pop_oldest(state)
                    await asyncio.sleep(0)
        finally:
            state.trim_target = None
            state.trim_task = None

    def _pop_oldest(self, state: _StreamState) -> None:
        message = state.order.popleft()
        instance = state.instances[message.flow_id]
        instance.popleft()
        if not instance:
            del state.instances[message.flow_id]
        state.usage -= message.size
        self.total -= message.size

    def _request_room(self, need: int) -> None:
        """Plan which oldest messages of the largest Streams free ``need`` bytes, then ask
        each Stream's own trim job to remove them."""
        planned: dict[int, int] = {}
        cursors: dict[int, Any] = {}
        states = [s for s in self._streams.values() if s.usage > 0]
        heap = [(-s.usage, i) for i, s in enumerate(states)]
        heapq.heapify(heap)
        while need > 0 and heap:
            _, i = heapq.heappop(heap)
            cursor = cursors.setdefault(i, iter(states[i].order))
            message = next(cursor, None)
            if message is None:
                continue
            planned[i] = planned.get(i, states[i].usage) - message.size
            need -= message.size
            heapq.heappush(heap, (-planned[i], i))
        for i, target in planned.items():
            self._request_trim(states[i], target)


def _exhausted(detail: str, *, retryable: bool) -> ResourceExhaustedError:
    return ResourceExhaustedError(detail, operation="writeStream", retryable=retryable)


# -- tokens -----------------------------------------------------------------------------------


def _binding(flow_type: str, flow_id: str, name: str) -> str:
    digest = hashlib.sha256(f"{flow_type}\0{flow_id}\0{name}".encode()).hexdigest()
    return digest[:16]


def _encode_token(kind: str, epoch: str, seq: int, binding: str) -> str:
    raw = f"{kind}.{epoch}.{seq}.{binding}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(
    token: str, kind: str, binding: str, error: type[InvalidArgumentError], field: str
) -> tuple[str, int]:
    """Return (epoch, sequence) of a token issued for this Flow type, Flow ID and Stream."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        found_kind, epoch, seq_text, found_binding = raw.split(".")
        seq = int(seq_text)
        if found_kind != kind or seq < 0 or not seq_text.isdigit():
            raise ValueError
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise error(f"{field} is malformed", field=field) from None
    if found_binding != binding:
        raise error(f"{field} was issued for another Flow type, Flow ID or Stream", field=field)
    return epoch, seq


# -- the service the Engine delegates to ------------------------------------------------------


class StreamService:
    """Resolves Streams against the Registry, validates calls and talks to the store."""

    def __init__(self, registry: Registry, config: StreamStoreConfig, clock: Clock) -> None:
        self.registry = registry
        self.config = config
        self.clock = clock
        self.store = MemoryStreamStore(config, clock) if config.backend == "memory" else None

    def close(self) -> None:
        """Close the store: waiting readers return, later calls fail."""
        if self.store is not None:
            self.store.close()

    def resolve(self, stream: Stream[Any] | str, flow_type: str | None) -> tuple[str, Stream[Any]]:
        """Return (Flow type, declaration) for a Stream declaration or name."""
        if isinstance(stream, Stream):
            if flow_type is not None:
                spec = self.registry.spec(flow_type)
                if spec.streams.get(stream.name) is not stream:
                    raise StreamNotFoundError(f"Flow type {flow_type} does not declare {stream!r}")
                return flow_type, stream
            owners = [
                s.flow_type for s in self.registry.specs() if s.streams.get(stream.name) is stream
            ]
            if len(owners) != 1:
                raise StreamNotFoundError(
                    f"{stream!r} is declared by {len(owners)} registered Flow types; "
                    "pass flow_type to choose one"
                    if owners
                    else f"{stream!r} is not declared by a registered Flow type"
                )
            return owners[0], stream
        if flow_type is None:
            raise InvalidArgumentError(
                "flow_type is needed when the Stream is given by name", field="flowType"
            )
        spec = self.registry.spec(flow_type)
        found = spec.streams.get(stream) if isinstance(stream, str) else None
        if found is None:
            raise StreamNotFoundError(f"Flow type {flow_type} declares no Stream named {stream!r}")
        return flow_type, found

    def capacity(self, stream: Stream[Any]) -> int:
        """Return the Stream's capacity: declared or default, at most the server's maximum."""
        declared = stream.stream_capacity_bytes or self.config.default_capacity_bytes
        return min(declared, self.config.max_capacity_bytes)

    def _store(self, operation: str) -> MemoryStreamStore:
        if self.store is None:
            raise FailedPreconditionError(
                "the Stream Store is disabled on this server (stream store backend 'disabled')",
                operation=operation,
            )
        return self.store

    def _message(
        self, flow_type: str, stream: Stream[Any], flow_id: str, message: _Message, epoch: str
    ) -> StreamMessage[Any]:
        binding = _binding(flow_type, flow_id, stream.name)
        token = _encode_token(_RESUME, epoch, message.seq, binding)
        return StreamMessage(
            value=_codec.decode(stream.value_type, message.text),
            resume_token=token,
            created_at=datetime.fromtimestamp(message.created_at, UTC),
            source=message.source,
        )

    def write(
        self, flow_type: str, stream: Stream[Any], flow_id: str, value: Any, source: Any
    ) -> str:
        """Append a client message and return its resume token."""
        if not isinstance(source, str) or not source.strip():
            raise InvalidArgumentError(
                "source must be a non-empty string", field="source", operation="writeStream"
            )
        if len(source) > MAX_SOURCE_LENGTH:
            raise InvalidArgumentError(
                f"source must be at most {MAX_SOURCE_LENGTH} characters",
                field="source",
                operation="writeStream",
            )
        value = _codec.validate(stream.value_type, value, what="value", strict=False)
        text = _codec.encode(value)
        store = self._store("writeStream")
        message = store.append(flow_type, stream.name, self.capacity(stream), flow_id, source, text)
        return _encode_token(
            _RESUME, store.epoch, message.seq, _binding(flow_type, flow_id, stream.name)
        )

    async def read(
        self,
        flow_type: str,
        stream: Stream[Any],
        flow_id: str,
        resume_token: str,
        wait_seconds: float,
    ) -> StreamMessage[Any] | None:
        """Return the message after ``resume_token`` (the head when empty or too old)."""
        if not isinstance(wait_seconds, int | float) or not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
            raise InvalidArgumentError(
                f"waitSeconds must be between 0 and {MAX_WAIT_SECONDS:g}", field="waitSeconds"
            )
        binding = _binding(flow_type, flow_id, stream.name)
        after = 0
        epoch = None
        if resume_token:
            epoch, after = _decode_token(
                resume_token, _RESUME, binding, InvalidArgumentError, "resumeToken"
            )
        store = self._store("readStream")
        if epoch is not None and epoch != store.epoch:
            after = 0  # issued before a restart: those messages are gone, start at the head
        found = await store.next_after(flow_type, stream.name, flow_id, after, wait_seconds)
        return (
            None if found is None else self._message(flow_type, stream, flow_id, found, store.epoch)
        )

    def list(
        self,
        flow_type: str,
        stream: Stream[Any],
        flow_id: str,
        page_size: Any,
        before_page_token: str,
    ) -> StreamMessagePage[Any]:
        """Return retained messages newest first, older than the page token's anchor."""
        limit = self.config.max_read_messages
        if (
            not isinstance(page_size, int)
            or isinstance(page_size, bool)
            or not (1 <= page_size <= limit)
        ):
            raise InvalidArgumentError(f"pageSize must be between 1 and {limit}", field="pageSize")
        binding = _binding(flow_type, flow_id, stream.name)
        before = None
        epoch = None
        if before_page_token:
            epoch, before = _decode_token(
                before_page_token, _PAGE, binding, InvalidPageTokenError, "beforePageToken"
            )
        store = self._store("listStreamMessages")
        if epoch is not None and epoch != store.epoch:
            return StreamMessagePage([], "")  # the anchor's messages vanished with a restart
        found, more = store.page(flow_type, stream.name, flow_id, before, page_size)
        messages = [self._message(flow_type, stream, flow_id, m, store.epoch) for m in found]
        token = _encode_token(_PAGE, store.epoch, found[-1].seq, binding) if more else ""
        return StreamMessagePage(messages, token)

    # -- Step writes --------------------------------------------------------------------------

    def step_io(
        self,
        streams: Mapping[str, Stream[Any]],
        flow_type: str,
        flow_id: str,
        step_execution_id: str,
        *,
        is_async: bool,
    ) -> StepIO:
        """Return the Stream sender of one Step invocation (built on the event loop)."""
        return StepIO(self, streams, flow_type, flow_id, step_execution_id, is_async=is_async)

    def append_from_step(
        self, flow_type: str, stream: Stream[Any], flow_id: str, source: str, text: str
    ) -> None:
        """Append a Step's message; a disabled, closed or full store drops it."""
        if self.store is None:
            return
        try:
            self.store.append(flow_type, stream.name, self.capacity(stream), flow_id, source, text)
        except (ResourceExhaustedError, FailedPreconditionError) as exc:
            log.info("dropped a message of %s to Stream %r: %s", source, stream.name, exc.detail)
