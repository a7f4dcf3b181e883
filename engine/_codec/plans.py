"""What the codec decides about a declared type from the type alone, cached per type."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from functools import lru_cache, partial
from typing import Any, NamedTuple

from pydantic import TypeAdapter
from pydantic_core import SchemaValidator, core_schema

from engine._codec.datetimes import seconds_offset_finder
from engine._codec.marker_schemas import marker_checker, only_bytes_take_markers
from engine._codec.markers import BYTES_MARKER, from_jsonable, read_all, read_here, with_bytes


@lru_cache(maxsize=1024)
def adapter_for(value_type: Any) -> TypeAdapter[Any]:
    """Return a cached pydantic adapter for a declared value type."""
    return TypeAdapter(value_type)


@lru_cache(maxsize=1024)
def checker_for(value_type: Any) -> SchemaValidator | None:
    """Return the checking validator of ``value_type`` (see ``marker_checker``); None when no
    place in it may hold bytes, so that a marker there is an object like any other."""
    try:
        return marker_checker(adapter_for(value_type).core_schema, read_here, read_all)
    except Exception:
        # A schema the checking copy cannot follow: every marker in it is bytes, as for Any.
        return SchemaValidator(
            core_schema.with_info_before_validator_function(read_all, core_schema.any_schema())
        )


@lru_cache(maxsize=1024)
def reader_for(value_type: Any) -> Callable[[Any], Any] | None:
    """Return what replaces, in JSON data of ``value_type``, each marker that stands where the
    type may hold bytes by its bytes; None when the type may hold bytes nowhere."""
    checker = checker_for(value_type)
    if checker is None:
        return None
    with suppress(Exception):  # a schema the test cannot follow: the checking pass decides
        if only_bytes_take_markers(adapter_for(value_type).core_schema, BYTES_MARKER):
            return from_jsonable  # the same answer, without a checking pass
    return partial(with_bytes, checker)


@lru_cache(maxsize=1024)
def _schema_text(value_type: Any) -> str | None:
    """Return the text of pydantic's core schema of ``value_type``; None for Any, object and
    types pydantic cannot describe (they take the general path)."""
    if value_type is Any or value_type is object:
        return None
    try:
        return repr(adapter_for(value_type).core_schema)
    except Exception:
        return None


@lru_cache(maxsize=1024)
def has_no_bytes(value_type: Any) -> bool:
    """Return True when values of ``value_type`` can never hold bytes (so no marker is needed)."""
    schema = _schema_text(value_type)
    return schema is not None and "'bytes'" not in schema


#: The core-schema types whose JSON pydantic writes in one call with nothing left to check but
#: integers beyond int64: no bytes (which need the marker), no floats or decimals (which may be
#: non-finite, written as null), no Any (which may hold either), no serializer functions.
_DIRECT_JSON_TYPES = frozenset(
    {
        "bool",
        "date",
        "datetime",
        "default",
        "definition-ref",
        "definitions",
        "dict",
        "enum",
        "frozenset",
        "int",
        "list",
        "literal",
        "model",
        "model-field",
        "model-fields",
        "none",
        "nullable",
        "set",
        "str",
        "time",
        "timedelta",
        "tuple",
        "typed-dict",
        "typed-dict-field",
        "union",
        "uuid",
    }
)
_SCHEMA_TYPE = re.compile(r"'type': '([a-z-]+)'")


@lru_cache(maxsize=1024)
def direct_json(value_type: Any) -> bool:
    """Return True when values of ``value_type`` are written by pydantic's JSON serializer
    directly (see ``_DIRECT_JSON_TYPES``)."""
    schema = _schema_text(value_type)
    return schema is not None and set(_SCHEMA_TYPE.findall(schema)) <= _DIRECT_JSON_TYPES


class Writer(NamedTuple):
    """How ``encode`` writes values of one declared type."""

    adapter: TypeAdapter[Any]
    #: pydantic's JSON serializer writes them in one call (see ``_DIRECT_JSON_TYPES``)
    direct: bool
    #: they can never hold bytes, so pydantic dumps them to JSON data
    no_bytes: bool
    #: a test for a datetime whose UTC offset has seconds where the type has datetimes
    seconds_offset: Callable[[Any], bool] | None


@lru_cache(maxsize=1024)
def writer_for(value_type: Any) -> Writer:
    """Return how ``encode`` writes values of ``value_type`` (one cached lookup per value)."""
    adapter = adapter_for(value_type)
    direct, no_bytes = direct_json(value_type), has_no_bytes(value_type)
    finder = None
    # Only pydantic writes offsets to the minute; the general walk handles them itself.
    if direct or no_bytes:
        with suppress(Exception):  # a schema the finder cannot follow: writes as before
            finder = seconds_offset_finder(adapter.core_schema)
    return Writer(adapter, direct, no_bytes, finder)
