"""Streams: best-effort progress messages a Step or a client appends and readers follow.

A Stream is declared on a Flow like an Attribute, but its messages are not durable state: they
live in the server's Stream Store and are trimmed under capacity pressure. The default store is
this process's memory (contents vanish when it restarts); the PostgreSQL and Redis stores are
shared by every process using them, and lose their contents only with the store's. A Step write
is sent at once, not staged with the Step's result, so a later failure of the Step does not
take it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine import _codec
from engine._staging import StreamSender, staging
from engine.attribute import check_state_name
from engine.errors import DefinitionError, InvalidArgumentError
from engine.outputs import StepOutput, StreamWrite

if TYPE_CHECKING:
    from engine.context import Context

T = TypeVar("T")

#: How often the buffered text writer emits its batch, in seconds of the engine's clock.
DEFAULT_FLUSH_INTERVAL_SECONDS = 1.0
#: The values of ``StreamStoreConfig.backend``.
STREAM_STORE_BACKENDS = ("memory", "postgres", "redis", "disabled")
#: Where the ``redis`` backend looks unless told otherwise.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: The buffered text writer emits its batch once it holds this many UTF-8 bytes (soft: a chunk
#: is never split, so a batch may exceed it by one chunk).
DEFAULT_FLUSH_THRESHOLD_BYTES = 16 * 1024


@dataclass(frozen=True)
class StreamMessage(Generic[T]):
    """One retained Stream message.

    ``resume_token`` is opaque: pass it unchanged to ReadStream to read the next message.
    ``source`` is ``#<stepExecutionId>`` for a Step write, the caller's string for a client's.
    """

    value: T
    resume_token: str
    created_at: datetime
    source: str


@dataclass(frozen=True)
class StreamMessagePage(Generic[T]):
    """A page of ListStreamMessages, newest first; an empty ``next_page_token`` ends the list."""

    messages: list[StreamMessage[T]]
    next_page_token: str


@dataclass(frozen=True)
class StreamStoreConfig:
    """Where Stream messages live and how much of them a server keeps.

    Sizes are estimates: a message counts its serialized value, its Flow ID, its source and
    ``message_overhead_bytes``. Capacity is shared by every Flow ID of one (Flow type, Stream).
    """

    #: ``"memory"`` keeps messages in this process (lost on restart); ``"postgres"`` and
    #: ``"redis"`` keep them where every process serving the same data reaches them;
    #: ``"disabled"`` refuses client writes and reads (FailedPreconditionError) and drops Step
    #: writes.
    backend: str = "memory"
    #: The ``redis`` backend's server (``redis://`` or ``rediss://``).
    redis_url: str = DEFAULT_REDIS_URL
    #: The ``postgres`` backend's database; None uses the engine's own PostgreSQL database.
    postgres_url: str | None = None
    #: Separates the Streams of several deployments (or tests) in one Redis or PostgreSQL
    #: database: a Redis key prefix, a column of the PostgreSQL tables.
    namespace: str = "dexlite"
    #: Capacity of a Stream that declares no ``stream_capacity_bytes``.
    default_capacity_bytes: int = 8 * 1024 * 1024
    #: Upper limit on one Stream's capacity; a larger declared capacity is reduced to it.
    max_capacity_bytes: int = 64 * 1024 * 1024
    #: Upper limit on one message's serialized value.
    max_message_bytes: int = 1024 * 1024
    #: Size of all Streams of the store (shared by every process of a postgres or redis store);
    #: past it the largest Streams are trimmed.
    max_total_bytes: int = 256 * 1024 * 1024
    #: Bytes added to every message's estimated size for bookkeeping.
    message_overhead_bytes: int = 96
    #: Background trimming starts when a Stream's usage reaches this fraction of its capacity...
    trim_trigger_ratio: float = 0.9
    #: ...and removes its oldest messages until usage is at most this fraction.
    trim_target_ratio: float = 0.7
    #: Trim jobs that may run at once (each Stream is trimmed by one job at a time).
    trim_workers: int = 4
    #: Largest page size ListStreamMessages accepts.
    max_read_messages: int = 1000

    def __post_init__(self) -> None:
        if self.backend not in STREAM_STORE_BACKENDS:
            raise InvalidArgumentError(
                "stream store backend must be one of " + ", ".join(map(repr, STREAM_STORE_BACKENDS))
            )
        # ':' separates the parts of a Redis key and '/' those of a Stream's name there.
        namespace = self.namespace
        if (
            not namespace.strip()
            or not namespace.isprintable()
            or any(c in namespace for c in ":/")
        ):
            raise InvalidArgumentError(
                "stream store namespace must be non-empty, printable and free of ':' and '/'",
                field="streamNamespace",
            )
        for name in (
            "default_capacity_bytes",
            "max_capacity_bytes",
            "max_message_bytes",
            "max_total_bytes",
            "trim_workers",
            "max_read_messages",
        ):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"stream store {name} must be at least 1")
        if self.message_overhead_bytes < 0:
            raise InvalidArgumentError("stream store message_overhead_bytes must be >= 0")
        if not 0 < self.trim_target_ratio < self.trim_trigger_ratio <= 1:
            raise InvalidArgumentError(
                "stream store thresholds must satisfy 0 < trim_target_ratio < "
                "trim_trigger_ratio <= 1"
            )


class Stream(Generic[T]):
    """A named, typed, best-effort message stream of a Flow.

    ``stream_capacity_bytes`` is an approximate capacity shared by every Flow ID of the Flow
    type (the server's default when None). Steps write with :meth:`write`; clients write,
    read and list through the Engine or the REST API.
    """

    def __init__(
        self, name: str, value_type: Any, *, stream_capacity_bytes: int | None = None
    ) -> None:
        self.name = check_state_name(name, "Stream")
        self.value_type = value_type
        if stream_capacity_bytes is not None and (
            not isinstance(stream_capacity_bytes, int)
            or isinstance(stream_capacity_bytes, bool)
            or stream_capacity_bytes < 1
        ):
            raise DefinitionError(f"Stream {name!r}: stream_capacity_bytes must be a positive int")
        self.stream_capacity_bytes = stream_capacity_bytes

    def __repr__(self) -> str:
        return f"Stream({self.name!r}, {getattr(self.value_type, '__name__', self.value_type)})"

    def write(self, context: Context, value: T) -> StepOutput:
        """Send ``value`` now, from a Step's ``wait_for`` or ``execute``.

        ``async def`` Steps call it without await; sync generator Steps ``yield`` what it
        returns. The value is validated and encoded here (a bad value fails the Step), but a
        disabled, full or rejecting Stream Store drops the message without failing the Step.
        RPC handlers cannot write through their Context: use ``Engine.write_stream``.
        """
        sender = staging(context).stream_sender(self)
        value = _codec.validate(self.value_type, value, what=f"Stream {self.name!r}", strict=True)
        output = StreamWrite(self.name, _codec.encode(value))
        sender.deliver(output)
        return output

    def buffered_text(
        self,
        context: Context,
        *,
        flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS,
        flush_threshold_bytes: int = DEFAULT_FLUSH_THRESHOLD_BYTES,
    ) -> BufferedTextWriter:
        """Return a writer that joins many small text chunks into fewer messages."""
        return BufferedTextWriter(
            self,
            context,
            flush_interval_seconds=flush_interval_seconds,
            flush_threshold_bytes=flush_threshold_bytes,
        )


class BufferedTextWriter:
    """Joins text chunks of a ``Stream[str]`` into batches (for example LLM deltas).

    A batch is emitted when ``flush_interval_seconds`` of the engine's clock have passed since
    the last one, when it reaches ``flush_threshold_bytes`` of UTF-8 (soft), and when the
    invocation ends. Text is preserved exactly: chunks are never split or altered, empty chunks
    are ignored and an empty buffer emits nothing (no message, no heartbeat).

    ``async def`` Steps just call :meth:`write`; the runtime emits due batches on a timer.
    Sync generator Steps have no timer: time is checked on each write, so
    ``yield from writer.write(chunk)`` and end with ``yield from writer.flush()``.
    """

    def __init__(
        self,
        stream: Stream[Any],
        context: Context,
        *,
        flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS,
        flush_threshold_bytes: int = DEFAULT_FLUSH_THRESHOLD_BYTES,
    ) -> None:
        if stream.value_type is not str:
            raise DefinitionError(
                f"buffered_text needs a Stream[str]; Stream {stream.name!r} holds "
                f"{getattr(stream.value_type, '__name__', stream.value_type)}"
            )
        if not flush_interval_seconds > 0 or flush_threshold_bytes < 1:
            raise InvalidArgumentError("flush interval and threshold must be positive")
        self._sender: StreamSender = staging(context).stream_sender(stream)
        self._stream = stream
        self._context = context
        self._interval = flush_interval_seconds
        self._threshold = flush_threshold_bytes
        self._chunks: list[str] = []
        self._size = 0
        self._closed = False
        self._last_emit = self._sender.clock.now()
        self._sender.register_writer(self)

    @property
    def closed(self) -> bool:
        """Return True once the invocation has ended (nothing more is accepted)."""
        return self._closed

    @property
    def next_flush_at(self) -> float:
        """Return the clock time at which the buffered batch is due."""
        return self._last_emit + self._interval

    def write(self, chunk: str) -> list[StepOutput]:
        """Buffer ``chunk``; return the batches this write emitted (yield from them)."""
        if not isinstance(chunk, str):
            raise InvalidArgumentError(
                f"buffered text chunks must be str, got {type(chunk).__name__}"
            )
        if self._closed:
            raise InvalidArgumentError("this buffered text writer's invocation has ended")
        if not chunk:
            return []
        self._chunks.append(chunk)
        self._size += len(chunk.encode("utf-8"))
        if self._size >= self._threshold or self._due():
            return self.flush()
        return []

    def flush(self) -> list[StepOutput]:
        """Emit the buffered batch now, if there is one."""
        self._last_emit = self._sender.clock.now()
        if not self._chunks:
            return []
        text = "".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        return [self._stream.write(self._context, text)]

    def _due(self) -> bool:
        return self._sender.clock.now() - self._last_emit >= self._interval

    def flush_if_due(self) -> None:
        """Emit the batch when the flush interval has passed (the runtime's timer calls it)."""
        if not self._closed and self._due():
            self.flush()

    def close(self) -> None:
        """Emit the tail and accept nothing more; called when the invocation ends."""
        if self._closed:
            return
        try:
            # A canceled invocation's thread may still be writing: leave its tail unsent.
            if not self._context.is_cancellation_requested():
                self.flush()
        finally:
            self._closed = True
