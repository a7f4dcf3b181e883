"""The seam between declarations and the runtime.

Attribute, AttributeMap, Channel and Stream declarations read and stage through the Context a
handler was given; the runtime's Context implements :class:`Staging`. Keeping the interface
here, below both, lets declarations stay free of the runtime and the runtime free of
declaration internals.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, Protocol

from engine.clock import Clock
from engine.errors import DefinitionError
from engine.outputs import StepOutput


class StateRef(Protocol):
    """What staging needs of an Attribute or AttributeMap declaration."""

    @property
    def name(self) -> str: ...

    @property
    def is_map(self) -> bool: ...

    @property
    def value_type(self) -> Any: ...


class ChannelRef(Protocol):
    """What staging needs of a Channel or ChannelMap declaration."""

    @property
    def name(self) -> str: ...

    @property
    def is_map(self) -> bool: ...

    @property
    def value_type(self) -> Any: ...


class StreamRef(Protocol):
    """What staging needs of a Stream declaration."""

    @property
    def name(self) -> str: ...


class FlushableWriter(Protocol):
    """A buffered Stream writer, as the runtime flushes it on a timer."""

    @property
    def closed(self) -> bool: ...

    @property
    def next_flush_at(self) -> float: ...

    def flush_if_due(self) -> None: ...

    def close(self) -> None: ...


class StreamSender(Protocol):
    """Sends one Step invocation's Stream writes and heartbeats at once."""

    @property
    def clock(self) -> Clock: ...

    def deliver(self, output: StepOutput) -> None: ...

    def register_writer(self, writer: FlushableWriter) -> None: ...


class Staging(abc.ABC):
    """The engine's side of a Context: what declarations call to read and stage state."""

    @abc.abstractmethod
    def read_value(self, state: StateRef, instance: str | None) -> Any:
        """Return a singleton (``instance`` None) or map instance value, staged writes first."""

    @abc.abstractmethod
    def read_map(self, state: StateRef) -> dict[str, Any]:
        """Return every instance of a wholly loaded AttributeMap, staged writes applied."""

    @abc.abstractmethod
    def stage_value(self, state: StateRef, instance: str | None, value: Any) -> None:
        """Stage a write (None deletes) after validating the value against its type."""

    @abc.abstractmethod
    def stream_sender(self, stream: StreamRef) -> StreamSender:
        """Return the sender of this Step invocation's Stream writes (RPCs have none)."""

    @abc.abstractmethod
    def publish(self, channel: ChannelRef, instance: str, value: Any) -> None:
        """Stage a publication (``instance`` is "" for a Channel)."""

    @abc.abstractmethod
    def delete_message(self, channel: ChannelRef, instance: str, message_id: str) -> None:
        """Stage the deletion of a pending message."""

    @abc.abstractmethod
    def channel_size(self, channel: ChannelRef, instance: str) -> int:
        """Return the pending count, adjusted for staged publications and deletions."""

    @abc.abstractmethod
    def pending_messages(self, channel: ChannelRef, instance: str) -> Sequence[Any]:
        """Return the loaded pending messages (ChannelMessage values), oldest first."""

    @abc.abstractmethod
    def channel_instances(self, channel: ChannelRef) -> list[str]:
        """Return the ChannelMap instance keys with pending messages."""

    @abc.abstractmethod
    def consumed(self, channel: ChannelRef, instance: str) -> Sequence[Any]:
        """Return the values this Step's winning wait condition consumed, oldest first."""

    @abc.abstractmethod
    def subflow_result(self, index: int) -> Any:
        """Return the FlowResult of the completed wait's SubFlow at ``index``."""


def staging(context: object) -> Staging:
    """Return the engine side of ``context``, or raise when it is not one the engine made."""
    if isinstance(context, Staging):
        return context
    raise DefinitionError(
        f"{context!r} is not a Context the engine passed to a handler; pass the handler's "
        "context argument"
    )
