"""A plan per declared type: what the codec decides from the type alone, decided once.

``plan_for`` builds a type's ``Plan`` on its first use and caches it, so that encoding, decoding
and validating a value look up one object and run what it holds (pydantic's validator and
serializer, and what the type's core schema says: whether pydantic writes its JSON directly,
whether it may hold bytes, where its datetimes are) rather than asking the schema again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from functools import cached_property, lru_cache, partial
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import SchemaSerializer, SchemaValidator, core_schema

from engine._codec.datetimes import seconds_offset_finder
from engine._codec.marker_schemas import marker_checker, only_bytes_take_markers
from engine._codec.markers import BYTES_MARKER, from_jsonable, read_all, read_here, with_bytes


@lru_cache(maxsize=1024)
def adapter_for(value_type: Any) -> TypeAdapter[Any]:
    """Return a cached pydantic adapter for a value type (the plan's, for a declared type)."""
    return TypeAdapter(value_type)


class Plan:
    """How the codec writes, reads and validates values of one declared type.

    Everything here follows from the type alone. What every value needs is decided when the
    plan is built; the checking validator that finds bytes markers, which only values that
    hold a marker (or lax validation) need, on its first use.
    """

    value_type: Any
    adapter: TypeAdapter[Any]
    serializer: SchemaSerializer
    #: pydantic's JSON serializer writes its values in one call (see ``_DIRECT_JSON_TYPES``)
    direct_json: bool
    #: its values never hold bytes, so no marker is written and pydantic dumps them as JSON data
    holds_no_bytes: bool
    #: a test for a datetime whose UTC offset has seconds, where the type has datetimes (only
    #: pydantic writes offsets to the minute: the general walk handles them itself)
    seconds_offset: Callable[[Any], bool] | None

    def __init__(self, value_type: Any) -> None:
        adapter = adapter_for(value_type)
        if not adapter.pydantic_complete:
            # A deferred schema (``defer_build``, a forward reference defined later) is built
            # on the adapter's first use, or that use raises pydantic's error: this is its
            # first use, and the plan is read from the schema.
            adapter.validator.validate_python  # noqa: B018
        self.value_type = value_type
        self.adapter = adapter
        #: pydantic's validator of the type (the adapter's methods add a Python call each)
        self.validator = adapter.validator
        self.serializer = adapter.serializer
        schema = _schema_text(value_type, adapter)
        self.direct_json = schema is not None and _direct_json(schema)
        self.holds_no_bytes = schema is not None and "'bytes'" not in schema
        self.seconds_offset = None
        if self.direct_json or self.holds_no_bytes:
            with suppress(Exception):  # a schema the finder cannot follow: writes as before
                self.seconds_offset = seconds_offset_finder(adapter.core_schema)

    def __repr__(self) -> str:
        return f"Plan({self.adapter!r})"

    @cached_property
    def marker_checker(self) -> SchemaValidator | None:
        """The checking validator of the type (see ``marker_checker``); None when no place in
        it may hold bytes, so that a marker there is an object like any other."""
        try:
            return marker_checker(self.adapter.core_schema, read_here, read_all)
        except Exception:
            # A schema the checking copy cannot follow: every marker in it is bytes, as for Any.
            return SchemaValidator(
                core_schema.with_info_before_validator_function(read_all, core_schema.any_schema())
            )

    @cached_property
    def marker_reader(self) -> Callable[[Any], Any] | None:
        """What replaces, in JSON data of the type, each marker that stands where the type may
        hold bytes by its bytes; None when the type may hold bytes nowhere."""
        checker = self.marker_checker
        if checker is None:
            return None
        with suppress(Exception):  # a schema the test cannot follow: the checking pass decides
            if only_bytes_take_markers(self.adapter.core_schema, BYTES_MARKER):
                return from_jsonable  # the same answer, without a checking pass
        return partial(with_bytes, checker)


@lru_cache(maxsize=1024)
def plan_for(value_type: Any) -> Plan:
    """Return the plan of a declared ``value_type``, built on its first use."""
    return Plan(value_type)


def _schema_text(value_type: Any, adapter: TypeAdapter[Any]) -> str | None:
    """Return the text of pydantic's core schema of ``value_type``; None for Any, object and
    types pydantic cannot describe (they take the general path)."""
    if value_type is Any or value_type is object:
        return None
    try:
        return repr(adapter.core_schema)
    except Exception:
        return None


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


def _direct_json(schema: str) -> bool:
    """Return True when pydantic's JSON serializer writes values of the schema whose text is
    ``schema`` directly (see ``_DIRECT_JSON_TYPES``)."""
    return set(_SCHEMA_TYPE.findall(schema)) <= _DIRECT_JSON_TYPES
