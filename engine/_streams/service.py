"""The Stream service the Engine delegates to: resolves Streams against the Registry,
validates calls and talks to the store."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._ids import check_id
from engine._streams import tokens
from engine._streams.memory import MemoryStreamStore
from engine._streams.records import StoredMessage, StreamStore
from engine.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    InvalidPageTokenError,
    ResourceExhaustedError,
    StreamNotFoundError,
)
from engine.stream import Stream, StreamMessage, StreamMessagePage, StreamStoreConfig

if TYPE_CHECKING:
    from engine.clock import Clock
    from engine.flow import Flow
    from engine.registry import Registry

log = logging.getLogger("dexlite.streams")

MAX_WAIT_SECONDS = 60.0
MAX_SOURCE_LENGTH = 1024


class _Unset:
    pass


_UNSET = _Unset()


def memory_store(
    config: StreamStoreConfig, clock: Clock, on_trim_done: Callable[[], None] = lambda: None
) -> StreamStore | None:
    """Return the store the config's backend names: in memory, or None when disabled."""
    if config.backend != "memory":
        return None
    return MemoryStreamStore(config, clock, on_trim_done)


class StreamService:
    """Resolves Streams against the Registry, validates calls and talks to the store."""

    def __init__(
        self,
        registry: Registry,
        config: StreamStoreConfig,
        clock: Clock,
        store: StreamStore | None | _Unset = _UNSET,
    ) -> None:
        self.registry = registry
        self.config = config
        self.clock = clock
        if isinstance(store, _Unset):
            store = memory_store(config, clock)
        #: None when the Stream Store is disabled.
        self.store: StreamStore | None = store

    def close(self) -> None:
        """Close the store: waiting readers return, later calls fail."""
        if self.store is not None:
            self.store.close()

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
        self, flow_type: str, stream: Stream[Any], flow_id: str, message: StoredMessage, epoch: str
    ) -> StreamMessage[Any]:
        binding = tokens.binding(flow_type, flow_id, stream.name)
        token = tokens.encode_token(tokens.RESUME, epoch, message.seq, binding)
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
        if not isinstance(wait_seconds, int | float) or not 0 <= wait_seconds <= MAX_WAIT_SECONDS:
            raise InvalidArgumentError(
                f"waitSeconds must be between 0 and {MAX_WAIT_SECONDS:g}", field="waitSeconds"
            )
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
        found, more = store.page(flow_type, stream.name, flow_id, before, page_size)
        messages = [self._message(flow_type, stream, flow_id, m, store.epoch) for m in found]
        token = (
            tokens.encode_token(tokens.PAGE, store.epoch, found[-1].seq, binding) if more else ""
        )
        return StreamMessagePage(messages, token)

    # -- Step writes --------------------------------------------------------------------------

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

    # -- the client API -----------------------------------------------------------------------

    def _resolve_for(
        self, stream: Stream[Any] | str, flow_type: type[Flow[Any]] | Flow[Any] | str | None
    ) -> tuple[str, Stream[Any]]:
        chosen = None if flow_type is None else self.registry.spec_of(flow_type).flow_type
        return self.resolve(stream, chosen)

    def write_client(
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
        return self.write(kind, declared, flow_id, value, source)

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

    def list_client(
        self,
        flow_id: str,
        stream: Stream[Any] | str,
        page_size: int,
        before_page_token: str,
        flow_type: type[Flow[Any]] | Flow[Any] | str | None,
    ) -> StreamMessagePage[Any]:
        """Resolve the Stream, check the Flow ID and list retained messages newest first."""
        kind, declared = self._resolve_for(stream, flow_type)
        check_id(flow_id, "flowId")
        return self.list(kind, declared, flow_id, page_size, before_page_token)
