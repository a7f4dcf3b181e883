"""Datetimes whose UTC offset has seconds, for the value codec.

Python's offsets may have seconds (zoneinfo gives them to historical local times: Amsterdam was
+00:19:32 until 1937), but RFC 3339 and pydantic's parser have none, and pydantic writes such an
offset to the minute: another instant. ``seconds_offset_finder`` tests, along a declared type's
core schema, whether a value holds such a datetime, and ``at_whole_minute_offsets`` moves a
value's datetimes to whole-minute offsets at the same instants.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel

from engine._codec.marker_schemas import (
    SAME_POSITION,
    Schema,
    declares,
    is_schema,
    refs_in,
    same_position_keys,
    schemas_in,
)
from engine.errors import InvalidArgumentError

Finder = Callable[[Any], bool]


def has_seconds_offset(value: Any) -> bool:
    """Return True for a datetime whose UTC offset is not a whole number of minutes."""
    if not isinstance(value, datetime):
        return False
    offset = value.utcoffset()
    return offset is not None and bool(offset.seconds % 60 or offset.microseconds)


class _Finders:
    """Compiles ``seconds_offset_finder`` for one schema."""

    def __init__(self, schema: Any):
        self.refs = refs_in(schema, {})
        self.compiled: dict[str, Finder | None] = {}

    def find(self, node: Schema) -> Finder | None:
        """Return a finder for values of ``node``; None when they hold no datetime."""
        kind = node["type"]
        if kind == "datetime":
            return has_seconds_offset
        if kind == "definition-ref":
            return self.find_ref(node["schema_ref"])
        if kind == "model" and not node.get("root_model"):
            return self.find(node["schema"])
        if kind == "model":
            root = self.find(node["schema"])
            return None if root is None else lambda v: root(getattr(v, "root", None))
        if kind in ("model-fields", "typed-dict", "dataclass-args", "named-tuple"):
            return self.find_fields(node["fields"])
        if kind in ("list", "set", "frozenset", "generator", "tuple", "dict"):
            return self.find_items(node)
        if kind in SAME_POSITION:
            return _any_of(
                [self.find(n) for k in same_position_keys(node) for n in schemas_in(node[k])]
            )
        # A schema this does not know how to follow: look through its values, if it has any
        # datetime at all.
        return _seconds_offset_anywhere if declares(node, {"datetime"}, self.refs) else None

    def find_ref(self, ref: str) -> Finder | None:
        """Return a finder for a definition; a recursive one looks itself up when called."""
        if ref not in self.compiled:
            target = self.refs.get(ref)
            if target is None:
                return None
            self.compiled[ref] = lambda v: bool((found := self.compiled[ref]) and found(v))
            self.compiled[ref] = self.find(target)
        return self.compiled[ref]

    def find_fields(self, fields: Any) -> Finder | None:
        """Return a finder for the fields of a model, dataclass or TypedDict, by name."""
        items = fields.items() if isinstance(fields, dict) else [(f["name"], f) for f in fields]
        found = [(name, f) for name, field in items if (f := self.find(field["schema"]))]
        if not found:
            return None
        if len(found) == 1:  # the usual case, without a loop
            ((name, only),) = found
            return lambda v: only(v.get(name) if isinstance(v, dict) else getattr(v, name, None))

        def fields_finder(value: Any) -> bool:
            if isinstance(value, dict):
                return any(f(value.get(name)) for name, f in found)
            return any(f(getattr(value, name, None)) for name, f in found)

        return fields_finder

    def find_items(self, node: Schema) -> Finder | None:
        """Return a finder for the items (and keys) of a collection."""
        found = _any_of(
            [
                self.find(n)
                for k in ("items_schema", "keys_schema", "values_schema")
                for n in schemas_in(node.get(k))
            ]
        )
        if found is None:
            return None
        if node["type"] == "dict":
            return lambda v: isinstance(v, dict) and any(map(found, (*v.keys(), *v.values())))
        return lambda v: isinstance(v, list | tuple | set | frozenset) and any(map(found, v))


def _seconds_offset_anywhere(value: Any) -> bool:
    """Return True when ``value`` holds, anywhere, a datetime whose UTC offset has seconds."""
    if isinstance(value, datetime):
        return has_seconds_offset(value)
    if isinstance(value, dict):
        return any(map(_seconds_offset_anywhere, (*value.keys(), *value.values())))
    if isinstance(value, list | tuple | set | frozenset):
        return any(map(_seconds_offset_anywhere, value))
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return any(map(_seconds_offset_anywhere, _attributes(value).values()))
    return False


def _any_of(finders: list[Finder | None]) -> Finder | None:
    """Return a finder that is True when any of ``finders`` is (None if there are none)."""
    present = [f for f in finders if f is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return lambda v: any(f(v) for f in present)


def seconds_offset_finder(schema: Any) -> Finder | None:
    """Return a test of whether a value of ``schema`` holds, where the schema declares a
    datetime, one whose UTC offset has seconds; None when the schema declares no datetime."""
    return _Finders(schema).find(schema) if is_schema(schema) else None


def at_whole_minute_offsets(value: Any) -> Any:
    """Return ``value`` with every datetime in it moved to a whole-minute UTC offset (see
    ``whole_minute_offset``): containers, models and dataclasses holding one are copied."""
    if isinstance(value, datetime):
        return whole_minute_offset(value)
    if isinstance(value, dict):
        moved = {at_whole_minute_offsets(k): at_whole_minute_offsets(v) for k, v in value.items()}
        before, after = (*value, *value.values()), (*moved, *moved.values())
        same = len(moved) == len(value) and all(a is b for a, b in zip(before, after, strict=True))
        return value if same else type(value)(moved)
    if isinstance(value, list | tuple | set | frozenset):
        items = [at_whole_minute_offsets(item) for item in value]
        if all(a is b for a, b in zip(value, items, strict=True)):
            return value
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        changed = {
            name: new
            for name, old in _attributes(value).items()
            if (new := at_whole_minute_offsets(old)) is not old
        }
        if not changed:
            return value
        copied: Any = copy.copy(value)
        for name, new in changed.items():
            object.__setattr__(copied, name, new)  # frozen ones too: this is a fresh copy
        return copied
    return value


def _attributes(value: BaseModel | Any) -> dict[str, Any]:
    """Return the fields of a model or dataclass instance by name."""
    if isinstance(value, BaseModel):
        return dict(value.__dict__)
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)


def whole_minute_offset(value: datetime) -> datetime:
    """Return ``value`` at the same instant with a UTC offset of whole minutes.

    RFC 3339 and pydantic's parser have no seconds in an offset, yet Python's offsets may have
    them (zoneinfo gives them to historical local times: Amsterdam was +00:19:32 until 1937).
    Such a value moves to the nearest whole-minute offset (its clock time moves by as much),
    or to the other neighbour when that one would leave the years 1 to 9999; a value neither
    can hold is refused with InvalidArgumentError.
    """
    offset = value.utcoffset()
    if offset is None or not (offset.seconds % 60 or offset.microseconds):
        return value
    extra = offset % _MINUTE
    down = offset - extra
    up = down + _MINUTE
    for whole in (down, up) if extra < _MINUTE / 2 else (up, down):
        if -_DAY < whole < _DAY:
            try:
                return (value + (whole - offset)).replace(tzinfo=timezone(whole))
            except OverflowError:
                continue
    raise InvalidArgumentError(
        f"datetime {value.isoformat()} has no form with a whole-minute UTC offset"
    )
