"""Encode and decode durable values as JSON text.

Values are validated against their declared type with pydantic. Bytes have no JSON form, so they
travel as ``{"$bytes": "<base64>"}``; everything else uses pydantic's JSON mode.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from datetime import date, datetime, time
from enum import Enum
from functools import lru_cache
from typing import Any, cast
from uuid import UUID

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

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
        text = value.isoformat()
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
    """Undo the bytes marker in plain JSON data; a marker that is not base64 is refused."""
    if isinstance(data, dict):
        if len(data) == 1 and BYTES_MARKER in data and isinstance(data[BYTES_MARKER], str):
            text = data[BYTES_MARKER]
            try:
                decoded = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                decoded = None
            # Only the spelling encode writes: other spellings would store other bytes.
            if decoded is None or base64.b64encode(decoded).decode("ascii") != text:
                raise InvalidArgumentError(f"{{{BYTES_MARKER!r}: ...}} must hold base64 text")
            return decoded
        return {k: from_jsonable(v) for k, v in data.items()}
    if isinstance(data, list):
        return [from_jsonable(v) for v in data]
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
        return adapter_for(value_type).validate_python(from_jsonable(value))
    except ValidationError as exc:
        raise _invalid(what, exc) from None


def validate_client_value(value_type: Any, value: Any, *, what: str) -> Any:
    """Validate a value a client sent (a Flow or RPC input, an Attribute, a message) strictly.

    What the declared type's JSON Schema allows is what passes: ``true`` is not an integer and
    ``"7"`` is not a number, yet an ISO string is a datetime and a string an enum member, as
    in JSON. A Python value already of the declared type passes the first, cheap check; others
    are checked as the JSON they are. (A type that can hold bytes, which JSON carries as a
    marker object, keeps the lax check.)
    """
    if value_type is Any or value_type is object:
        return value
    adapter = adapter_for(value_type)
    try:
        try:
            return adapter.validate_python(value, strict=True)
        except ValidationError:
            if not _has_no_bytes(value_type):
                return adapter.validate_python(from_jsonable(value))
            text = json.dumps(to_jsonable(value), separators=(",", ":"), allow_nan=False)
            return adapter.validate_json(text, strict=True)
    except ValidationError as exc:
        raise _invalid(what, exc) from None


def _invalid(what: str, exc: ValidationError) -> InvalidArgumentError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    suffix = f" at {where}" if where else ""
    return InvalidArgumentError(f"{what}: {first.get('msg', 'invalid value')}{suffix}", field=what)


# Every digit to "0" and anything else to " ": a run of 19 zeros is then a run of 19 digits.
# A byte translation and a substring search take a few µs on a chunk of records, where a
# regular expression took tens.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_INT64_DIGITS = b"0" * 19


def _long_digit_run(text: bytes) -> bool:
    """Return True when the JSON ``text`` holds 19 digits in a row: only then can an integer
    in it lie outside int64."""
    return _INT64_DIGITS in text.translate(_DIGITS_ONLY)


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


def encode(value: Any, value_type: Any = None) -> str:
    """Serialize a validated value to compact JSON text.

    Values of a plain declared type (strings, integers, models of them, lists, ...) are written
    by pydantic in one call, in Rust. A declared type that cannot hold bytes is dumped by
    pydantic to JSON data, which ``json`` writes, refusing non-finite numbers; otherwise the
    general walk adds the bytes marker. Every way refuses integers outside int64 and lone
    surrogates.
    """
    if value_type is not None and _direct_json(value_type):
        try:
            raw = adapter_for(value_type).dump_json(value, by_alias=True)
        except PydanticSerializationError:
            pass  # a lone surrogate: the general path below refuses it with its reason
        else:
            if _long_digit_run(raw):
                to_jsonable(json.loads(raw))  # refuses an integer outside int64
            return raw.decode()
    if value_type is not None and _has_no_bytes(value_type):
        data = adapter_for(value_type).dump_python(value, mode="json", by_alias=True)
        try:
            text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        except ValueError:
            raise InvalidArgumentError("numbers must be finite (no NaN or infinity)") from None
        if _long_digit_run(text.encode("ascii")):
            to_jsonable(data)  # only long digit runs can be an int64 overflow: check exactly
        return _whole_unicode(text)
    return _whole_unicode(json.dumps(to_jsonable(value), separators=(",", ":"), allow_nan=False))


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
    """Parse stored JSON text into a value of ``value_type``."""
    if value_type is not Any and value_type is not object and BYTES_MARKER not in text:
        # No bytes inside: pydantic parses and validates in one pass, in Rust.
        return adapter_for(value_type).validate_json(text)
    data = from_jsonable(json.loads(text))
    if value_type is Any or value_type is object:
        return data
    return adapter_for(value_type).validate_python(data)
