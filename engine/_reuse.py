"""Which values one invocation may hand to the next without the next decoding them.

A value a handler sets is validated and encoded at once; the text is what commits. The next
holder of the same locks often reads that value back before it commits (lock handoffs,
``_runtime.handoff``), and decoding the text again can cost more than the rest of its work (a
chunk of a hundred records). Handing it the object instead is safe only when nothing either
holder does to its copy can reach the other's: the value must be immutable all the way down,
or a list or dict of such values, which each reader then gets a shallow copy of.

Immutable here: ``None``, numbers, strings, bytes, booleans, dates and times, UUIDs, enums,
literals, tuples and frozensets of immutable values, and pydantic models that are frozen, allow
no extra fields and whose fields are all immutable.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from functools import lru_cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from uuid import UUID

from pydantic import BaseModel

#: Types whose values never change.
_SCALARS = (int, float, str, bytes, bool, type(None), datetime, date, time, timedelta, UUID)


def _same(value: Any) -> Any:
    return value


@lru_cache(maxsize=1024)
def reuse_of(value_type: Any) -> Callable[[Any], Any] | None:
    """Return how to give another reader a value of ``value_type`` (the value itself, or a
    shallow copy of its list or dict), or None when each reader must decode its own."""
    if immutable(value_type):
        return _same
    origin, args = get_origin(value_type), get_args(value_type)
    if origin is list and len(args) == 1 and immutable(args[0]):
        return list
    if origin is dict and len(args) == 2 and args[0] is str and immutable(args[1]):
        return dict
    return None


def immutable(value_type: Any, seen: frozenset[Any] = frozenset()) -> bool:
    """Return True when no value of ``value_type`` can be changed in place."""
    if value_type in _SCALARS or value_type is Decimal:
        return True
    if isinstance(value_type, type) and issubclass(value_type, Enum):
        return True
    origin, args = get_origin(value_type), get_args(value_type)
    if origin is Literal:
        return True
    if origin is Annotated:
        return immutable(args[0], seen)
    if origin in (Union, types.UnionType, frozenset):
        return all(immutable(arg, seen) for arg in args)
    if origin is tuple:
        return all(arg is Ellipsis or immutable(arg, seen) for arg in args)
    if isinstance(value_type, type) and issubclass(value_type, BaseModel):
        if value_type in seen:
            return True  # a recursive model: its other fields decide
        config = value_type.model_config
        if not config.get("frozen") or config.get("extra") == "allow":
            return False
        inner = seen | {value_type}
        return all(
            field.annotation is not None and immutable(field.annotation, inner)
            for field in value_type.model_fields.values()
        )
    return False
