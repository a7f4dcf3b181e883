"""The Stream service the Engine delegates to: resolves Streams against the Registry,
validates calls and talks to the store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._ids import check_id
from engine._limits import check_page_size, check_wait_seconds
from engine._streams import tokens
from engine._streams.factory import stream_store
from engine._streams.step_writes import StepWrites
from engine._streams.store_interface import StoredStreamMessage, StreamStore
from engine.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    InvalidPageTokenError,
    StreamNotFoundError,
)
from engine.stream import Stream, StreamMessage, StreamMessagePage, StreamStoreConfig

if TYPE_CHECKING:
    from engine.clock import Clock
    from engine.flow import Flow
    from engine.registry import Registry

MAX_SOURCE_LENGTH = 1024
#: The page size of ListStreamMessages when the caller names none.
DEFAULT_PAGE_SIZE = 100


class _Unset:
    pass


_UNSET = _Unset()


class StreamService:
    """Resolves Streams against the Registry, validates calls and talks to the store."""

    def __init__(
        self,
        registry: Registry,
        config: StreamStoreConfig,
        clock: Clock,
        store: StreamStore | None | _Unset = _UNSET,
        on_step_writes_idle: Callable[[], None] = lambda: None,
    ) -> None:
        self.registry = registry
        self.config = config
        self.clock = clock
        if isinstance(store, _Unset):
            store = stream_store(config, clock)
        #: None when the Stream Store is disabled.
        self.store: StreamStore | None = store
        self._step_writes = None if store is None else StepWrites(store, on_step_writes_idle)

    async def open(self) -> None:
        """Open the store (reach its database); called once, before anything else."""
        if self.store is not None:
            await self.store.open()

    async def close(self) -> None:
        """Close the store: waiting readers return, queued Step writes are dropped, later
        calls fail."""
        if self._step_writes is not None:
            await self._step_writes.close()
        if self.store is not None:
            await self.store.close()

    async def total_bytes(self) -> int | None:
        """Return how many bytes the store holds; None when the Stream Store is disabled."""
        return None if self.store is None else await self.store.total_bytes()

    def step_writes_pending(self) -> int:
        """Return how many Step messages are on their way to the store."""
        return 0 if self._step_writes is None else self._step_writes.pending()

    async def step_writes_sent(self, source: str) -> None:
        """Return once the messages ``source`` (``#<stepExecutionId>``) wrote so far are in the
        store, or dropped."""
        if self._step_writes is not None:
            await self._step_writes.sent(source)

    def resolve(self, stream: Stream[Any] | str, flow_type: str | None) -> tuple[str, Stream[Any]]:
        """Return (Flow type, declaration) for a Stream declaration or name.

        A declaration declared by one registered Flow type needs no ``flow_type``; a name does.
        """
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

    def _store(self, operation: str) -> StreamStore:
        if self.store is None:
            raise FailedPreconditionError(
                "the Stream Store is disabled on this server (stream store backend 'disabled')",
                operation=operation,
            )
        return self.store

    def _message(
        self,
        flow_type: str,
        stream: Stream[Any],
        flow_id: str,
        message: StoredStreamMessage,
        epoch: str,
    ) -> StreamMessage[Any]:
        binding = tokens.binding(flow_type, flow_id, stream.name)
        token = tokens.encode_token(tokens.RESUME, epoch, message.seq, binding)
        return StreamMessage(
            value=_codec.decode(stream.value_type, message.text),
            resume_token=token,
            created_at=datetime.fromtimestamp(message.created_at, UTC),
            source=message.source,
        )

    async def write(
        self, flow_type: str, stream: Stream[Any], flow_id: str, value: Any, source: Any
    ) -> str:
        """Append a client message and return its resume token."""
        if not isinstance(source, str) or not source:  # any non-empty text, as Dex asks
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
        message = await store.append(
            flow_type, stream.name, self.capacity(stream), flow_id, source, text
        )
        return tokens.encode_token(
            tokens.RESUME, store.epoch, message.seq, tokens.binding(flow_type, flow_id, stream.name)
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
        check_wait_seconds(wait_seconds)
        binding = tokens.binding(flow_type, flow_id, stream.name)
        after = 0
        epoch = None
        if resume_token:
            epoch, after = tokens.decode_token(
                resume_token, tokens.RESUME, binding, InvalidArgumentError, "resumeToken"
            )
        store = self._store("readStream")
        if epoch is not None and epoch != store.epoch:
            after = 0  # issued before a restart: those messages are gone, start at the head
        found = await store.next_after(flow_type, stream.name, flow_id, after, wait_seconds)
        if found is None and after and epoch != store.epoch:
            # A shared store learned during the read that its contents were lost: ``after``
            # counted in the old ones, so the retained head is the next message.
            found = await store.next_after(flow_type, stream.name, flow_id, 0, 0)
        return (
            None if found is None else self._message(flow_type, stream, flow_id, found, store.epoch)
        )

    async def list(
        self,
        flow_type: str,
        stream: Stream[Any],
        flow_id: str,
        page_size: Any,
        before_page_token: str,
    ) -> StreamMessagePage[Any]:
        """Return retained messages newest first, older than the page token's anchor
        (``page_size`` None: the default page, or the server's maximum if that is smaller)."""
        limit = self.config.max_read_messages
        if page_size is None:
            page_size = min(DEFAULT_PAGE_SIZE, limit)
        check_page_size(page_size, largest=limit)
        binding = tokens.binding(flow_type, flow_id, stream.name)
        before = None
        epoch = None
        if before_page_token:
            epoch, before = tokens.decode_token(
                before_page_token, tokens.PAGE, binding, InvalidPageTokenError, "beforePageToken"
            )
        store = self._store("listStreamMessages")
        if epoch is not None and epoch != store.epoch:
            return StreamMessagePage([], "")  # the anchor's messages vanished with a restart
        found, more = await store.page(flow_type, stream.name, flow_id, before, page_size)
        if epoch is not None and epoch != store.epoch:
            return StreamMessagePage([], "")  # the page learned that the contents were lost
        messages = [self._message(flow_type, stream, flow_id, m, store.epoch) for m in found]
        token = (
            tokens.encode_token(tokens.PAGE, store.epoch, found[-1].seq, binding) if more else ""
        )
        return StreamMessagePage(messages, token)

    # -- Step writes --------------------------------------------------------------------------

    def append_from_step(
        self, flow_type: str, stream: Stream[Any], flow_id: str, source: str, text: str
    ) -> None:
        """Send a Step's message on its way without waiting (on the event loop thread); a
        disabled, closed, full or unreachable store drops it."""
        if self._step_writes is not None:
            capacity = self.capacity(stream)
            self._step_writes.send(flow_type, stream.name, capacity, flow_id, source, text)

    # -- the client API -----------------------------------------------------------------------

    def _resolve_for(
        self, stream: Stream[Any] | str, flow_type: type[Flow[Any]] | Flow[Any] | str | None
    ) -> tuple[str, Stream[Any]]:
        chosen = None if flow_type is None else self.registry.spec_of(flow_type).flow_type
        return self.resolve(stream, chosen)

    async def write_client(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        value: Any,
        source: str,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None,
    ) -> str:
        """Resolve the Stream, check the Flow ID and append a client message."""
        kind, declared = self._resolve_for(stream, flow_type)
        check_id(flow_id, "flowId")
        return await self.write(kind, declared, flow_id, value, source)

    async def read_client(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        resume_token: str,
        wait_seconds: float,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None,
    ) -> StreamMessage[Any] | None:
        """Resolve the Stream, check the Flow ID and read the message after the token."""
        kind, declared = self._resolve_for(stream, flow_type)
        check_id(flow_id, "flowId")
        return await self.read(kind, declared, flow_id, resume_token, wait_seconds)

    async def list_client(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        page_size: int | None,
        before_page_token: str,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None,
    ) -> StreamMessagePage[Any]:
        """Resolve the Stream, check the Flow ID and list retained messages newest first."""
        kind, declared = self._resolve_for(stream, flow_type)
        check_id(flow_id, "flowId")
        return await self.list(kind, declared, flow_id, page_size, before_page_token)
