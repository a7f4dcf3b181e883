"""Encode and decode durable values as JSON text.

Values are validated against their declared type with pydantic. Bytes have no JSON form, so they
travel as ``{"$bytes": "<base64>"}``, which means bytes only where the declared type may hold
bytes; everything else uses pydantic's JSON mode, with datetimes at whole-minute UTC offsets.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable
from contextlib import suppress
from datetime import date, datetime, time
from enum import Enum
from functools import lru_cache, partial
from typing import Any, NamedTuple, cast
from uuid import UUID

from pydantic import TypeAdapter, ValidationError
from pydantic_core import (
    PydanticCustomError,
    PydanticSerializationError,
    SchemaValidator,
    core_schema,
)
from pydantic_core.core_schema import ValidationInfo

from engine._codec.datetimes import (
    at_whole_minute_offsets,
    seconds_offset_finder,
    whole_minute_offset,
)
from engine._codec.marker_schemas import (
    AS_SENT_CHOICE,
    MARKER_CHOICE,
    marker_checker,
    only_bytes_take_markers,
)
from engine.errors import InvalidArgumentError

BYTES_MARKER = "$bytes"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@lru_cache(maxsize=1024)
def adapter_for(value_type: Any) -> TypeAdapter[Any]:
    """Return a cached pydantic adapter for a declared value type."""
    return TypeAdapter(value_type)


def to_jsonable(value: Any) -> Any:
    """Turn a validated Python value into plain JSON data (bytes become a marker object)."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidArgumentError(f"integer {value} is outside the int64 range")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError("numbers must be finite (no NaN or infinity)")
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return {BYTES_MARKER: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        # The same form pydantic's JSON gives, so stored and returned times read alike.
        text = whole_minute_offset(value).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    # pydantic models, dataclasses and anything else pydantic knows how to dump.
    dumped = adapter_for(cast(Any, type(value))).dump_python(value, mode="python", by_alias=True)
    if dumped is value:
        raise InvalidArgumentError(f"values of type {type(value).__name__} cannot be stored")
    return to_jsonable(dumped)


def from_jsonable(data: Any) -> Any:
    """Undo the bytes marker anywhere in plain JSON data (as for a value of type ``Any``); a
    marker that is not base64 is refused."""
    return _read_markers(data, None)


#: Bytes markers a checking validator read, by identity: id -> (marker object, its bytes).
_Found = dict[int, tuple[Any, bytes]]


def _read_markers(data: Any, found: _Found | None) -> Any:
    """Undo every bytes marker in ``data``, noting each in ``found``."""
    if isinstance(data, dict):
        decoded = read_marker(data)
        if decoded is not data:
            if found is not None:
                found[id(data)] = (data, decoded)
            return decoded
        return {k: _read_markers(v, found) for k, v in data.items()}
    if isinstance(data, list):
        return [_read_markers(v, found) for v in data]
    return data


def read_marker(data: Any) -> Any:
    """Return the bytes a ``{"$bytes": "<base64>"}`` object stands for, and other data as it
    is; a marker that is not base64 is refused with InvalidArgumentError."""
    if not (isinstance(data, dict) and len(data) == 1 and isinstance(data.get(BYTES_MARKER), str)):
        return data
    text = data[BYTES_MARKER]
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        decoded = None
    # Only the spelling encode writes: other spellings would store other bytes.
    if decoded is None or base64.b64encode(decoded).decode("ascii") != text:
        raise InvalidArgumentError(f"{{{BYTES_MARKER!r}: ...}} must hold base64 text")
    return decoded


_NOT_A_MARKER = "not_a_marker"


def _read_here(data: Any, info: ValidationInfo) -> Any:
    """Read a marker where the declared type may be bytes (see ``marker_checker``)."""
    decoded = read_marker(data)
    if decoded is data:
        raise PydanticCustomError(_NOT_A_MARKER, "not a bytes marker")
    if info.context is not None:
        info.context[id(data)] = (data, decoded)
    return decoded


def _read_all(data: Any, info: ValidationInfo) -> Any:
    """Read every marker in data the declared type may hold anything in (``Any``)."""
    return _read_markers(data, info.context)


@lru_cache(maxsize=1024)
def _marker_checker(value_type: Any) -> SchemaValidator | None:
    """Return the checking validator of ``value_type`` (see ``marker_checker``); None when no
    place in it may hold bytes, so that a marker there is an object like any other."""
    try:
        return marker_checker(adapter_for(value_type).core_schema, _read_here, _read_all)
    except Exception:
        # A schema the checking copy cannot follow: every marker in it is bytes, as for Any.
        return SchemaValidator(
            core_schema.with_info_before_validator_function(_read_all, core_schema.any_schema())
        )


@lru_cache(maxsize=1024)
def _marker_reader(value_type: Any) -> Callable[[Any], Any] | None:
    """Return what replaces, in JSON data of ``value_type``, each marker that stands where the
    type may hold bytes by its bytes; None when the type may hold bytes nowhere."""
    checker = _marker_checker(value_type)
    if checker is None:
        return None
    with suppress(Exception):  # a schema the test cannot follow: the checking pass decides
        if only_bytes_take_markers(adapter_for(value_type).core_schema, BYTES_MARKER):
            return from_jsonable  # the same answer, without a checking pass
    return partial(_with_bytes, checker)


def _with_bytes(checker: SchemaValidator, data: Any) -> Any:
    """Return JSON ``data`` with each marker that stands where the declared type may hold
    bytes replaced by its bytes, the checking validator saying which those are."""
    if not isinstance(data, dict | list):
        return data  # markers are objects, found in objects and arrays only
    found: _Found = {}
    # What is wrong, the declared type's own validator (which runs next) says.
    with suppress(ValidationError):
        checker.validate_python(data, context=found)
    return _replace_found(data, found) if found else data


def _replace_found(data: Any, found: _Found) -> Any:
    """Return ``data`` with the very marker objects in ``found`` replaced by their bytes."""
    if isinstance(data, dict):
        hit = found.get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
        return {k: _replace_found(v, found) for k, v in data.items()}
    if isinstance(data, list):
        return [_replace_found(v, found) for v in data]
    return data


def validate(value_type: Any, value: Any, *, what: str, strict: bool) -> Any:
    """Validate ``value`` against ``value_type`` or raise InvalidArgumentError naming ``what``.

    ``strict`` is used for Python values written by handlers (``True`` stays a bool, ``1`` is not
    a bool); otherwise (values a handler returns for the engine to pass on) pydantic's lax mode
    may convert, so a dict becomes the declared model.
    """
    if value_type is Any or value_type is object:
        return value
    try:
        if strict:
            try:
                return adapter_for(value_type).validate_python(value, strict=True)
            except ValidationError:
                # Strict mode refuses an int for a float; widening is safe, nothing else is.
                if value_type is float and isinstance(value, int) and not isinstance(value, bool):
                    return float(value)
                raise
        read = _marker_reader(value_type)
        return adapter_for(value_type).validate_python(value if read is None else read(value))
    except ValidationError as exc:
        raise _invalid(what, exc) from None


def validate_client_value(value_type: Any, value: Any, *, what: str) -> Any:
    """Validate a value a client sent (a Flow or RPC input, an Attribute, a message) strictly.

    What the declared type's JSON Schema allows is what passes: ``true`` is not an integer and
    ``"7"`` is not a number, yet an ISO string is a datetime and a string an enum member, as
    in JSON. A Python value already of the declared type passes the first, cheap check; others
    are checked as the JSON they are, bytes as marker objects where the type may hold bytes.
    """
    if value_type is Any or value_type is object:
        return value
    adapter = adapter_for(value_type)
    try:
        try:
            return adapter.validate_python(value, strict=True)
        except ValidationError:
            data = to_jsonable(value)
            text = json.dumps(data, separators=(",", ":"), allow_nan=False)
            # Without bytes in the type, a marker under Any stays the object it is, as encode
            # (which then writes no marker) needs.
            checker = None if _has_no_bytes(value_type) else _marker_checker(value_type)
            if checker is None:
                return adapter.validate_json(text, strict=True)
            # JSON has no bytes: the checking copy reads them where they stand and checks the
            # rest strictly, then the declared type's own validator builds the value.
            checker.validate_json(text, strict=True)
            read = _marker_reader(value_type)
            return adapter.validate_python(data if read is None else read(data))
    except ValidationError as exc:
        raise _invalid(what, exc) from None


def _invalid(what: str, exc: ValidationError) -> InvalidArgumentError:
    errors = exc.errors()
    # A checking copy's errors: the data's own way through a bytes position says more.
    first = next((e for e in errors if e["type"] != _NOT_A_MARKER), errors[0])
    loc = (p for p in first.get("loc", ()) if p not in (MARKER_CHOICE, AS_SENT_CHOICE))
    where = ".".join(str(p) for p in loc)
    suffix = f" at {where}" if where else ""
    return InvalidArgumentError(f"{what}: {first.get('msg', 'invalid value')}{suffix}", field=what)


# Every digit to "0", "-" to "+", colons and quotes kept, anything else to " ": in JSON text
# so translated, a run of 19 zeros is a run of 19 digits (only then can an integer lie outside
# int64), and a datetime pydantic wrote with a UTC offset other than Z ends in '0+00:00"'
# (only such a one can have had seconds in its offset). A byte translation and a substring
# search take a few µs on a chunk of records, where a regular expression took tens.
_SHAPES = bytes(
    0x30 if 0x30 <= b <= 0x39 else 0x2B if b in b"+-" else b if b in b':"' else 0x20
    for b in range(256)
)
_INT64_DIGITS = b"0" * 19
_OFFSET_END = b'0+00:00"'


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
def _has_no_bytes(value_type: Any) -> bool:
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
def _direct_json(value_type: Any) -> bool:
    """Return True when values of ``value_type`` are written by pydantic's JSON serializer
    directly (see ``_DIRECT_JSON_TYPES``)."""
    schema = _schema_text(value_type)
    return schema is not None and set(_SCHEMA_TYPE.findall(schema)) <= _DIRECT_JSON_TYPES


class _Writer(NamedTuple):
    """How ``encode`` writes values of one declared type."""

    adapter: TypeAdapter[Any]
    #: pydantic's JSON serializer writes them in one call (see ``_DIRECT_JSON_TYPES``)
    direct: bool
    #: they can never hold bytes, so pydantic dumps them to JSON data
    no_bytes: bool
    #: a test for a datetime whose UTC offset has seconds where the type has datetimes
    seconds_offset: Callable[[Any], bool] | None


@lru_cache(maxsize=1024)
def _writer(value_type: Any) -> _Writer:
    """Return how ``encode`` writes values of ``value_type`` (one cached lookup per value)."""
    adapter = adapter_for(value_type)
    direct, no_bytes = _direct_json(value_type), _has_no_bytes(value_type)
    finder = None
    # Only pydantic writes offsets to the minute; the general walk handles them itself.
    if direct or no_bytes:
        with suppress(Exception):  # a schema the finder cannot follow: writes as before
            finder = seconds_offset_finder(adapter.core_schema)
    return _Writer(adapter, direct, no_bytes, finder)


def encode(value: Any, value_type: Any = None) -> str:
    """Serialize a validated value to compact JSON text.

    Values of a plain declared type (strings, integers, models of them, lists, ...) are written
    by pydantic in one call, in Rust. A declared type that cannot hold bytes is dumped by
    pydantic to JSON data, which ``json`` writes, refusing non-finite numbers; otherwise the
    general walk adds the bytes marker. Every way refuses integers outside int64 and lone
    surrogates, and writes a datetime whose UTC offset has seconds at a whole-minute offset.
    """
    writer = None if value_type is None else _writer(value_type)
    if writer is not None and writer.direct:
        try:
            raw = writer.adapter.dump_json(value, by_alias=True)
        except PydanticSerializationError:
            pass  # a lone surrogate: the general path below refuses it with its reason
        else:
            shapes = raw.translate(_SHAPES)
            found = writer.seconds_offset  # None unless the type has datetimes
            if found is not None and _OFFSET_END in shapes and found(value):
                return _encode_moved(value, value_type)
            if _INT64_DIGITS in shapes:
                to_jsonable(json.loads(raw))  # refuses an integer outside int64
            return raw.decode()
    if writer is not None and writer.no_bytes:
        data = writer.adapter.dump_python(value, mode="json", by_alias=True)
        try:
            text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        except ValueError:
            raise InvalidArgumentError("numbers must be finite (no NaN or infinity)") from None
        shapes = text.encode("ascii").translate(_SHAPES)
        found = writer.seconds_offset
        if found is not None and _OFFSET_END in shapes and found(value):
            return _encode_moved(value, value_type)
        if _INT64_DIGITS in shapes:
            to_jsonable(data)  # only long digit runs can be an int64 overflow: check exactly
        return _whole_unicode(text)
    return _whole_unicode(json.dumps(to_jsonable(value), separators=(",", ":"), allow_nan=False))


def _encode_moved(value: Any, value_type: Any) -> str:
    """Encode ``value`` with its datetimes moved to whole-minute UTC offsets (the same
    instants), as pydantic would write an offset with seconds to the minute."""
    moved = at_whole_minute_offsets(value)
    if moved is value:  # in objects it cannot copy: the general walk moves what it dumps
        return _whole_unicode(
            json.dumps(to_jsonable(value), separators=(",", ":"), allow_nan=False)
        )
    return encode(moved, value_type)


def _whole_unicode(text: str) -> str:
    """Return the JSON text unless a string in it holds a lone surrogate, which JSON can
    spell (``"\\ud800"``) but no reader can take back: refuse it."""
    if "\\ud" in text:  # surrogates are escaped: only then can one be alone
        _check_strings(json.loads(text))
    return text


def _check_strings(data: Any) -> None:
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError("text must be valid Unicode (no lone surrogates)") from None
    elif isinstance(data, dict):
        for key, value in data.items():
            _check_strings(key)
            _check_strings(value)
    elif isinstance(data, list):
        for value in data:
            _check_strings(value)


def decode(value_type: Any, text: str) -> Any:
    """Parse stored JSON text into a value of ``value_type``.

    A ``{"$bytes": ...}`` object is bytes where the declared type may hold bytes at its place,
    and an object like any other elsewhere (a ``dict[str, str]`` may have that key).
    """
    if value_type is Any or value_type is object:
        return from_jsonable(json.loads(text))
    return _decode_typed(value_type, text, _UNPARSED)


def decode_data(value_type: Any, data: Any) -> Any:
    """Return parsed JSON data (a value the REST API answered, say) as a value of
    ``value_type``, exactly as ``decode`` reads the same data as text."""
    if value_type is Any or value_type is object:
        return from_jsonable(data)
    # Through its text, pydantic reads it in JSON mode as decode does: Python mode converts
    # some values otherwise. The text also tells cheaply whether a marker is anywhere.
    return _decode_typed(value_type, json.dumps(data, separators=(",", ":")), data)


#: ``_decode_typed``'s data when only the text is at hand (null is data like any other).
_UNPARSED: Any = object()


def _decode_typed(value_type: Any, text: str, data: Any) -> Any:
    """Read the JSON ``text`` (whose parsed form is ``data``, unless ``_UNPARSED``) as a value
    of a declared ``value_type`` other than Any."""
    if BYTES_MARKER not in text:
        # No bytes inside: pydantic parses and validates in one pass, in Rust.
        return adapter_for(value_type).validate_json(text)
    read = _marker_reader(value_type)
    if read is None:  # no place may hold bytes: the marker is an object like any other
        return adapter_for(value_type).validate_json(text)
    parsed = json.loads(text) if data is _UNPARSED else data
    return adapter_for(value_type).validate_python(read(parsed))
