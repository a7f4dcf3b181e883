"""Durable state declarations: Attribute, AttributeMap, their indexes, locks and loads.

Declarations are immutable descriptions; reads and writes go through a handler's Context, which
stages writes until the handler's result commits.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine._enums import IndexType
from engine._staging import staging
from engine.errors import DefinitionError, InvalidArgumentError

if TYPE_CHECKING:
    from engine.context import Context

T = TypeVar("T")


@dataclass(frozen=True)
class AttributeIndex:
    """Make an Attribute searchable under ``key`` (a regular Attribute defaults to its name)."""

    type: IndexType
    key: str | None = None


@dataclass(frozen=True, order=True)
class AttributeLock:
    """A lock on a singleton Attribute (``instance is None``) or one AttributeMap instance."""

    name: str
    instance: str | None = None
    #: The Attribute or AttributeMap that made the lock (``lock()``): checked to belong to the
    #: Flow it is used on, not only to share its name.
    definition: Any = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """Return the lock key as it appears in errors: ``name`` or ``name/instance``."""
        return self.name if self.instance is None else f"{self.name}/{self.instance}"


@dataclass(frozen=True, order=True)
class AttributeMapLoad:
    """An exact AttributeMap instance to load into an invocation's snapshot."""

    name: str
    instance: str
    #: The AttributeMap that made the load (``load()``), checked like a lock's.
    definition: Any = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """Return ``map/instance``."""
        return f"{self.name}/{self.instance}"


def check_state_name(name: str, what: str) -> str:
    """Return ``name`` if it is a valid state name, else raise DefinitionError."""
    if not isinstance(name, str) or not name.strip():
        raise DefinitionError(f"{what} name must be a non-blank string")
    if "/" in name:
        raise DefinitionError(f"{what} name {name!r} must not contain '/'")
    return name


def check_instance_key(instance: Any, what: str = "instance") -> str:
    """Return ``instance`` if it is a valid map instance key, else raise InvalidArgumentError."""
    if not isinstance(instance, str) or not instance.strip():
        raise InvalidArgumentError(f"{what} must be a non-blank string", field=what)
    if "/" in instance:
        raise InvalidArgumentError(f"{what} {instance!r} must not contain '/'", field=what)
    if any(unicodedata.category(c) == "Cc" for c in instance):
        raise InvalidArgumentError(
            f"{what} {instance!r} must not contain control characters", field=what
        )
    try:
        instance.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            f"{what} must be valid Unicode text (no lone surrogates)", field=what
        ) from None
    return instance


class _State(Generic[T]):
    """Shared behaviour of Attribute and AttributeMap declarations."""

    is_map: bool = False

    def __init__(
        self,
        name: str,
        value_type: Any,
        *,
        index: AttributeIndex | None = None,
        hard_delete_on_null: bool = False,
    ) -> None:
        kind = type(self).__name__
        self.name = check_state_name(name, kind)
        self.value_type = value_type
        self.index = index
        self.hard_delete_on_null = hard_delete_on_null
        self.owner: type[Any] | None = None

    def __set_name__(self, owner: type[Any], attr_name: str) -> None:
        if self.owner is None:
            self.owner = owner

    def __repr__(self) -> str:
        type_name = getattr(self.value_type, "__name__", self.value_type)
        return f"{type(self).__name__}({self.name!r}, {type_name})"

    @property
    def index_key(self) -> str | None:
        """Return the search key, or None when the state is not indexed."""
        if self.index is None:
            return None
        return self.index.key or (None if self.is_map else self.name)


class Attribute(_State[T]):
    """A durable singleton value of a Flow, read and written through a Context."""

    def get(self, context: Context) -> T | None:
        """Return the value visible to this invocation, or None when unset."""
        return staging(context).read_value(self, None)  # type: ignore[no-any-return]

    def set(self, context: Context, value: T) -> None:
        """Stage a write; None deletes the value."""
        staging(context).stage_value(self, None, value)

    def delete(self, context: Context) -> None:
        """Stage a deletion (permanent for a hard-delete Attribute)."""
        staging(context).stage_value(self, None, None)

    def lock(self) -> AttributeLock:
        """Return the lock on this Attribute, for RPC and Step lock declarations."""
        return AttributeLock(self.name, definition=self)


class AttributeMap(_State[T]):
    """A durable map of instance key to value; instances load only when asked for."""

    is_map = True

    def get(self, context: Context, key: str) -> T | None:
        """Return one instance's value; raises AttributeMapNotLoadedError unless loaded."""
        value = staging(context).read_value(self, check_instance_key(key, "key"))
        return value  # type: ignore[no-any-return]

    def set(self, context: Context, key: str, value: T) -> None:
        """Stage a write of one instance; None deletes it."""
        staging(context).stage_value(self, check_instance_key(key, "key"), value)

    def delete(self, context: Context, key: str) -> None:
        """Stage the deletion of one instance."""
        staging(context).stage_value(self, check_instance_key(key, "key"), None)

    def items(self, context: Context) -> dict[str, T]:
        """Return every instance; needs a whole-map load."""
        return staging(context).read_map(self)

    def lock(self, key: str) -> AttributeLock:
        """Return the lock on one instance."""
        return AttributeLock(self.name, check_instance_key(key, "key"), definition=self)

    def load(self, key: str) -> AttributeMapLoad:
        """Return an exact-instance load for RPC and Step options."""
        return AttributeMapLoad(self.name, check_instance_key(key, "key"), definition=self)
