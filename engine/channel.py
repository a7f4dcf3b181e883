"""Channels: durable FIFO queues of a Flow run, published to and consumed by wait conditions.

A Step waits for messages with a condition in its ``wait_for`` (``queue.for_one()``,
``queue.for_range(at_least=1, at_most=10)``, ...); the messages its winning condition takes are
consumed in the same commit that moves it to ``execute``, which reads them with
``results(context)``. Handlers publish and delete through their Context; pending messages are
read only when the handler's options load them, while sizes are always there.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine._staging import staging
from engine.attribute import check_instance_key, check_state_name
from engine.errors import DefinitionError, InvalidArgumentError

if TYPE_CHECKING:
    from engine.context import Context

T = TypeVar("T")


@dataclass(frozen=True)
class ChannelMessage(Generic[T]):
    """A pending Channel message: its UUIDv7 ID (assigned when the publishing commit was
    accepted, so IDs of one Channel increase in FIFO order), value and publication time."""

    message_id: str
    value: T
    published_at: datetime


@dataclass(frozen=True, order=True)
class ChannelMapLoad:
    """An exact ChannelMap instance whose pending messages an invocation loads."""

    name: str
    instance: str
    #: The ChannelMap that made the load (``load_messages()``), checked like a lock's.
    definition: Any = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """Return ``map/instance``."""
        return f"{self.name}/{self.instance}"


@dataclass(frozen=True)
class ChannelCondition:
    """A wait condition on one Channel (or ChannelMap instance).

    It is ready once ``at_least`` messages are pending; when the surrounding Wait completes
    it consumes what is pending then, up to ``at_most`` (all of it when None). An
    ``at_least`` of 0 never waits and may consume nothing.
    """

    channel: _Channel[Any]
    instance: str
    at_least: int
    at_most: int | None

    @property
    def key(self) -> str:
        """Return the queue's wire key: ``name`` or ``map/instance``."""
        return f"{self.channel.name}/{self.instance}" if self.instance else self.channel.name


def _bound(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DefinitionError(f"{what} must be an integer of at least {minimum}, got {value!r}")
    return value


def _condition(
    channel: _Channel[Any], instance: str, at_least: int | None, at_most: int | None
) -> ChannelCondition:
    low = 0 if at_least is None else _bound(at_least, "at_least", 0)
    high = None if at_most is None else _bound(at_most, "at_most", 1)
    if high is not None and low > high:
        raise DefinitionError(f"at_least ({low}) must not be above at_most ({high})")
    return ChannelCondition(channel, instance, low, high)


class _Channel(Generic[T]):
    """Shared behaviour of Channel and ChannelMap declarations."""

    is_map: bool = False

    def __init__(self, name: str, value_type: Any) -> None:
        self.name = check_state_name(name, type(self).__name__)
        self.value_type = value_type

    def __repr__(self) -> str:
        type_name = getattr(self.value_type, "__name__", self.value_type)
        return f"{type(self).__name__}({self.name!r}, {type_name})"


class Channel(_Channel[T]):
    """A durable FIFO queue of a Flow run."""

    def publish(self, context: Context, value: T) -> None:
        """Stage a publication; the message gets its ID when the handler's result commits."""
        staging(context).publish(self, "", value)

    def delete(self, context: Context, message_id: str) -> None:
        """Stage the deletion of a pending message (no load needed when its ID is known)."""
        staging(context).delete_message(self, "", check_message_id(message_id))

    def size(self, context: Context) -> int:
        """Return how many messages are pending, adjusted for this handler's staged work."""
        return staging(context).channel_size(self, "")

    def pending_messages(self, context: Context) -> Sequence[ChannelMessage[T]]:
        """Return the pending messages, oldest first; the invocation must load the Channel."""
        return staging(context).pending_messages(self, "")

    def find_pending_message(self, context: Context, message_id: str) -> ChannelMessage[T] | None:
        """Return the pending message with ``message_id``, or None (needs a load)."""
        return _find(self.pending_messages(context), message_id)

    def results(self, context: Context) -> Sequence[T]:
        """Return the values this Step's winning wait condition consumed, oldest first."""
        return staging(context).consumed(self, "")

    def for_one(self) -> ChannelCondition:
        """Wait for one message and consume it."""
        return _condition(self, "", 1, 1)

    def for_n(self, n: int) -> ChannelCondition:
        """Wait for ``n`` messages and consume exactly ``n``."""
        n = _bound(n, "n", 1)
        return _condition(self, "", n, n)

    def at_least(self, n: int) -> ChannelCondition:
        """Wait for ``n`` messages and consume every one pending when the Wait completes."""
        return _condition(self, "", _bound(n, "n", 1), None)

    def at_most(self, n: int) -> ChannelCondition:
        """Never wait; consume up to ``n`` of what is pending when the Wait completes."""
        return _condition(self, "", 0, n)

    def for_range(
        self, *, at_least: int | None = None, at_most: int | None = None
    ) -> ChannelCondition:
        """Wait for ``at_least`` messages (none when None) and consume up to ``at_most``."""
        return _condition(self, "", at_least, at_most)


class ChannelMap(_Channel[T]):
    """Durable FIFO queues of a Flow run, one per instance key (non-blank, no ``/``)."""

    is_map = True

    def publish(self, context: Context, instance: str, value: T) -> None:
        """Stage a publication to one instance."""
        staging(context).publish(self, check_instance_key(instance), value)

    def delete(self, context: Context, instance: str, message_id: str) -> None:
        """Stage the deletion of a pending message of one instance."""
        staging(context).delete_message(
            self, check_instance_key(instance), check_message_id(message_id)
        )

    def size(self, context: Context, instance: str) -> int:
        """Return how many messages of one instance are pending (no load needed)."""
        return staging(context).channel_size(self, check_instance_key(instance))

    def pending_messages(self, context: Context, instance: str) -> Sequence[ChannelMessage[T]]:
        """Return one instance's pending messages, oldest first; needs a load."""
        found = staging(context).pending_messages(self, check_instance_key(instance))
        return found

    def find_pending_message(
        self, context: Context, instance: str, message_id: str
    ) -> ChannelMessage[T] | None:
        """Return a pending message of one instance by ID, or None (needs a load)."""
        return _find(self.pending_messages(context, instance), message_id)

    def results(self, context: Context, instance: str) -> Sequence[T]:
        """Return the values this Step's winning wait condition consumed from one instance."""
        found = staging(context).consumed(self, check_instance_key(instance))
        return found

    def get_all_instance_keys(self, context: Context) -> list[str]:
        """Return the keys of the instances holding pending messages (no load needed)."""
        return staging(context).channel_instances(self)

    def load_messages(self, instance: str) -> ChannelMapLoad:
        """Return an exact-instance load for ``load_channel_map_instances`` options."""
        return ChannelMapLoad(self.name, check_instance_key(instance), definition=self)

    def for_one(self, instance: str) -> ChannelCondition:
        """Wait for one message of ``instance`` and consume it."""
        return _condition(self, check_instance_key(instance), 1, 1)

    def for_n(self, instance: str, n: int) -> ChannelCondition:
        """Wait for ``n`` messages of ``instance`` and consume exactly ``n``."""
        n = _bound(n, "n", 1)
        return _condition(self, check_instance_key(instance), n, n)

    def at_least(self, instance: str, n: int) -> ChannelCondition:
        """Wait for ``n`` messages of ``instance``; consume every one pending at completion."""
        return _condition(self, check_instance_key(instance), _bound(n, "n", 1), None)

    def at_most(self, instance: str, n: int) -> ChannelCondition:
        """Never wait; consume up to ``n`` of what ``instance`` holds at completion."""
        return _condition(self, check_instance_key(instance), 0, n)

    def for_range(
        self, instance: str, *, at_least: int | None = None, at_most: int | None = None
    ) -> ChannelCondition:
        """Wait for ``at_least`` messages of ``instance``; consume up to ``at_most``."""
        return _condition(self, check_instance_key(instance), at_least, at_most)


def check_message_id(message_id: Any) -> str:
    """Return ``message_id`` if it has the form of a message ID (a UUID)."""
    try:
        uuid.UUID(message_id)
    except (TypeError, ValueError, AttributeError):
        raise InvalidArgumentError(
            f"messageId {message_id!r} is not a message ID (a UUID)", field="messageId"
        ) from None
    return str(message_id)


def _find(messages: Sequence[ChannelMessage[T]], message_id: str) -> ChannelMessage[T] | None:
    return next((m for m in messages if m.message_id == message_id), None)
