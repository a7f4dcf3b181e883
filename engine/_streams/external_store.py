"""What the Stream Stores that several processes share (PostgreSQL, Redis) have in common:
sizes and limits, readers woken by the backing store's notifications, background trimming and
the store-wide limit.

A subclass supplies the primitives that touch the backing store (one append, reads, one trim
slice, every Stream's usage) and passes each append notification it hears to ``_heard``. The
rules are the memory store's: one sequence counter and one capacity per (Flow type, Stream),
trimming from the trigger down to the target ratio, and the oldest messages of the largest
Streams trimmed when the whole store is full.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from engine._streams.store_interface import StoredStreamMessage
from engine._streams.trimming import Trimming
from engine._streams.waiting import Waiters
from engine.errors import FailedPreconditionError, ResourceExhaustedError
from engine.stream import StreamStoreConfig

if TYPE_CHECKING:
    from engine.clock import Clock

log = logging.getLogger("dexlite.streams")

T = TypeVar("T")


@dataclass(slots=True)
class Appended:
    """An append the backing store took: the message, its Stream's usage after it, the epoch."""

    message: StoredStreamMessage
    usage: int
    epoch: str


@dataclass(slots=True)
class Refused:
    """An append that did not fit: the Stream's usage (``limit`` "stream") or the store's total
    (``limit`` "total") it met, and the epoch."""

    limit: Literal["stream", "total"]
    usage: int
    epoch: str


class ExternalStreamStore(abc.ABC):
    """The part of an external Stream Store that is the same on every backing store."""

    #: The backend's name, as errors and logs show it.
    kind: ClassVar[str]
    #: Exceptions meaning the backing store cannot be reached right now.
    unreachable: ClassVar[tuple[type[BaseException], ...]] = (OSError, TimeoutError)

    def __init__(
        self,
        config: StreamStoreConfig,
        clock: Clock,
        on_trim_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.namespace = config.namespace
        self._epoch = ""
        self.opened = False
        self.closed = False
        #: How often the listening connection was lost and made again (operators and tests).
        self.listener_reconnects = 0
        # Notifications carry it, so this store skips its own (it woke its readers already).
        self.origin = secrets.token_hex(8)
        self._waiters = Waiters()
        self._trimming = Trimming(
            workers=config.trim_workers,
            trim_slice=self._trim_slice,
            usages=self._usages,
            on_done=on_trim_done,
            kind=self.kind,
            unreachable=self.unreachable,
        )

    # -- the backing store's primitives ---------------------------------------------------------

    @abc.abstractmethod
    async def _connect(self) -> None:
        """Reach the backing store, create what it needs, learn the epoch, start listening."""

    @abc.abstractmethod
    async def _disconnect(self) -> None:
        """Stop listening and release every connection."""

    @abc.abstractmethod
    async def _ensure_epoch(self) -> str:
        """Return the stored epoch, storing a new one first when there is none."""

    @abc.abstractmethod
    async def _append_once(
        self, flow_type: str, name: str, capacity: int, message: StoredStreamMessage
    ) -> Appended | Refused:
        """Append ``message`` (its ``seq`` is a placeholder) and notify every process."""

    @abc.abstractmethod
    async def _first_after(
        self, flow_type: str, name: str, flow_id: str, after: int
    ) -> tuple[str | None, StoredStreamMessage | None]:
        """Return (stored epoch, first message after ``after``)."""

    @abc.abstractmethod
    async def _page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[str | None, list[StoredStreamMessage]]:
        """Return (stored epoch, up to ``size`` messages before ``before``, newest first)."""

    @abc.abstractmethod
    async def _stats(self, flow_type: str, name: str) -> tuple[int, int, int] | None:
        """Return (usage, messages, capacity) of one Stream, None when it was never written."""

    @abc.abstractmethod
    async def _trim_slice(self, flow_type: str, name: str, target: int, limit: int) -> bool:
        """Remove up to ``limit`` oldest messages while usage is above ``target``; return
        whether usage is still above it with messages left."""

    @abc.abstractmethod
    async def _usages(self) -> list[tuple[tuple[str, str], int]]:
        """Return ((Flow type, Stream), usage) of the largest Streams, largest first."""

    # -- the store interface --------------------------------------------------------------------

    @property
    def epoch(self) -> str:
        """Identify the store's contents: stored with them, the same in every process."""
        return self._epoch

    @property
    def trim_jobs_started(self) -> int:
        """Return how many trim jobs this process started."""
        return self._trimming.started

    def trims_running(self) -> int:
        """Return how many trim jobs (and room planners) of this process are under way."""
        return self._trimming.running()

    async def total_bytes(self) -> int:
        """Return how many bytes the store holds, every process's Streams together (on Redis,
        the largest thousand Streams': the usage index is read that far)."""
        return sum(usage for _stream, usage in await self._usages())

    def readers_waiting(self) -> int:
        """Return how many readStream calls of this process wait for a message."""
        return self._waiters.count()

    async def open(self) -> None:
        """Reach the backing store; raises FailedPreconditionError when it cannot."""
        try:
            await self._connect()
        except self.unreachable as exc:
            raise FailedPreconditionError(
                f"the {self.kind} Stream Store cannot be reached: {exc}"
            ) from exc
        self.opened = True

    async def close(self) -> None:
        """Wake every waiting reader, stop trimming and release the connections."""
        if self.closed:
            return
        self.closed = True
        self._waiters.wake_all()
        # Trim jobs hold connections: let them unwind before the pool closes under them.
        await self._trimming.close()
        await self._disconnect()

    def message_size(self, flow_id: str, source: str, text: str) -> int:
        """Return a message's estimated size: value, Flow ID, source and the overhead."""
        return (
            len(text.encode("utf-8"))
            + len(flow_id.encode("utf-8"))
            + len(source.encode("utf-8"))
            + self.config.message_overhead_bytes
        )

    async def append(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> StoredStreamMessage:
        """Append a message or raise ResourceExhaustedError (asking trimming for room)."""
        self._check("writeStream")
        config = self.config
        where = f"Stream {name!r} of Flow type {flow_type}"
        value_bytes = len(text.encode("utf-8"))
        if value_bytes > config.max_message_bytes:
            raise _exhausted(
                f"the message value is {value_bytes} bytes; {where} accepts at most "
                f"{config.max_message_bytes} bytes per message; do not retry",
                retryable=False,
            )
        size = value_bytes + self.message_size(flow_id, source, "")
        if size > capacity or size > config.max_total_bytes:
            raise _exhausted(
                f"the message needs about {size} bytes, more than the capacity of {where} "
                f"({min(capacity, config.max_total_bytes)} bytes); it can never fit, "
                "do not retry",
                retryable=False,
            )
        message = StoredStreamMessage(0, flow_id, text, source, self.clock.now(), size)
        outcome = await self._guard(
            "writeStream", self._append_once(flow_type, name, capacity, message)
        )
        self._epoch = outcome.epoch
        if isinstance(outcome, Refused):
            if outcome.limit == "stream":
                self._trimming.request(flow_type, name, capacity - size)
                raise _exhausted(
                    f"{where} is at its capacity of {capacity} bytes; trimming is making "
                    "room, retry after a short delay",
                    retryable=True,
                )
            self._trimming.make_room(outcome.usage + size - config.max_total_bytes)
            raise _exhausted(
                f"the server's Streams hold their limit of {config.max_total_bytes} bytes; "
                "trimming the largest Streams, retry after a short delay",
                retryable=True,
            )
        if outcome.usage >= capacity * config.trim_trigger_ratio:
            self._trimming.request(flow_type, name, int(capacity * config.trim_target_ratio))
        # This process's readers hear at once; the others through the notification.
        self._waiters.wake((flow_type, name, flow_id))
        return outcome.message

    async def next_after(
        self, flow_type: str, name: str, flow_id: str, after: int, wait_seconds: float
    ) -> StoredStreamMessage | None:
        """Return the first retained message with a sequence above ``after``, waiting up to
        ``wait_seconds`` for any process to write one.

        A reader registers before it reads, so a notification that comes while it reads wakes
        it again; and it reads once more when its time is up, so a message written elsewhere
        just before the deadline is returned even if its notification is late or was lost.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        key = (flow_type, name, flow_id)
        epoch = self._epoch
        while True:
            self._check("readStream")
            waiter = self._waiters.enter(key) if wait_seconds > 0 else None
            try:
                stored, found = await self._guard(
                    "readStream", self._first_after(flow_type, name, flow_id, after)
                )
                await self._learn(stored, "readStream")
                # Under a new epoch ``after`` counts in vanished contents: the caller restarts.
                if found is not None or self._epoch != epoch:
                    return found
                remaining = deadline - loop.time()
                if waiter is None or remaining <= 0:
                    return None
                try:
                    async with asyncio.timeout(remaining):
                        await waiter.event.wait()
                except TimeoutError:
                    pass  # the loop reads once more: the deadline's final read
            finally:
                if waiter is not None:
                    self._waiters.leave(key, waiter)

    async def page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[list[StoredStreamMessage], bool]:
        """Return up to ``size`` messages older than ``before`` (or the tail), newest first,
        and whether older retained messages remain."""
        operation = "listStreamMessages"
        self._check(operation)
        stored, found = await self._guard(
            operation, self._page(flow_type, name, flow_id, before, size + 1)
        )
        await self._learn(stored, operation)
        return found[:size], len(found) > size

    async def stats(self, flow_type: str, name: str) -> dict[str, Any]:
        """Return usage figures of one Stream (for tests and operators)."""
        self._check("streamStats")
        found = await self._guard("streamStats", self._stats(flow_type, name))
        if found is None:
            return {"usage": 0, "messages": 0, "trimming": False, "capacity": None}
        usage, messages, capacity = found
        return {
            "usage": usage,
            "messages": messages,
            "trimming": self._trimming.trimming(flow_type, name),
            "capacity": capacity,
        }

    # -- helpers for subclasses -----------------------------------------------------------------

    def _heard(self, payload: str) -> None:
        """Wake the readers of the Flow ID an append notification names."""
        try:
            flow_type, name, flow_id, origin = json.loads(payload)
        except (ValueError, TypeError):
            log.warning("ignored a malformed Stream notification: %.200r", payload)
            return
        if origin != self.origin:
            self._waiters.wake((flow_type, name, flow_id))

    def _notification(self, flow_type: str, name: str, flow_id: str) -> str:
        """Return the payload an append notification carries."""
        return json.dumps([flow_type, name, flow_id, self.origin], separators=(",", ":"))

    def _wake_all(self) -> None:
        """Wake every reader: notifications may have gone unheard (a lost connection)."""
        self._waiters.wake_all()

    def _new_epoch(self) -> str:
        """Return a candidate epoch; the backing store keeps the first one stored."""
        return secrets.token_hex(4)

    # -- internals ------------------------------------------------------------------------------

    def _check(self, operation: str) -> None:
        if self.closed or not self.opened:
            state = "closed" if self.closed else "not open"
            raise FailedPreconditionError(f"the Stream Store is {state}", operation=operation)

    async def _guard(self, operation: str, call: Awaitable[T]) -> T:
        """Await ``call``; an unreachable backing store is the caller's FailedPrecondition."""
        try:
            return await call
        except self.unreachable as exc:
            raise FailedPreconditionError(
                f"the {self.kind} Stream Store cannot be reached ({type(exc).__name__}: {exc}); "
                "retry later",
                operation=operation,
            ) from exc

    async def _learn(self, stored: str | None, operation: str) -> None:
        """Adopt the epoch a read saw; none stored means the contents were lost: store one."""
        if stored is None:
            stored = await self._guard(operation, self._ensure_epoch())
        self._epoch = stored


def _exhausted(detail: str, *, retryable: bool) -> ResourceExhaustedError:
    return ResourceExhaustedError(detail, operation="writeStream", retryable=retryable)
