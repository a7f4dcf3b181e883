"""Write durable values as JSON text: pydantic's JSON where the declared type allows, else the
general walk (``to_jsonable``), which writes bytes as markers."""

from __future__ import annotations

import binascii
import json
import math
from datetime import date, datetime, time
from enum import Enum
from typing import Any, cast
from uuid import UUID

from pydantic_core import PydanticSerializationError

from engine._codec.datetimes import at_whole_minute_offsets, whole_minute_offset
from engine._codec.markers import BYTES_MARKER
from engine._codec.plans import adapter_for, plan_for
from engine.errors import InvalidArgumentError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: ``json.dumps(data, separators=(",", ":"), allow_nan=False)``: one encoder made once, where
#: ``json.dumps`` with arguments makes one per call (three Python calls more).
dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


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
        # base64.b64encode, without its Python-level call
        return {BYTES_MARKER: binascii.b2a_base64(bytes(value), newline=False).decode("ascii")}
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


def encode(value: Any, value_type: Any = None) -> str:
    """Serialize a validated value to compact JSON text.

    Values of a plain declared type (strings, integers, models of them, lists, ...) are written
    by pydantic in one call, in Rust. A declared type that cannot hold bytes is dumped by
    pydantic to JSON data, which ``json`` writes, refusing non-finite numbers; otherwise the
    general walk adds the bytes marker. Every way refuses integers outside int64 and lone
    surrogates, and writes a datetime whose UTC offset has seconds at a whole-minute offset.
    """
    plan = None if value_type is None else plan_for(value_type)
    if plan is not None and plan.direct_json:
        try:
            raw = plan.serializer.to_json(value, by_alias=True)
        except PydanticSerializationError:
            pass  # a lone surrogate: the general path below refuses it with its reason
        else:
            shapes = raw.translate(_SHAPES)
            found = plan.seconds_offset  # None unless the type has datetimes
            if found is not None and _OFFSET_END in shapes and found(value):
                return _encode_moved(value, value_type)
            if _INT64_DIGITS in shapes:
                to_jsonable(json.loads(raw))  # refuses an integer outside int64
            return raw.decode()
    if plan is not None and plan.holds_no_bytes:
        data = plan.serializer.to_python(value, mode="json", by_alias=True)
        try:
            text = dumps(data)
        except ValueError:
            raise InvalidArgumentError("numbers must be finite (no NaN or infinity)") from None
        shapes = text.encode("ascii").translate(_SHAPES)
        found = plan.seconds_offset
        if found is not None and _OFFSET_END in shapes and found(value):
            return _encode_moved(value, value_type)
        if _INT64_DIGITS in shapes:
            to_jsonable(data)  # only long digit runs can be an int64 overflow: check exactly
    else:
        text = dumps(to_jsonable(value))
    if "\\ud" in text:  # see _check_strings
        _check_strings(json.loads(text))
    return text


def _encode_moved(value: Any, value_type: Any) -> str:
    """Encode ``value`` with its datetimes moved to whole-minute UTC offsets (the same
    instants), as pydantic would write an offset with seconds to the minute."""
    moved = at_whole_minute_offsets(value)
    if moved is value:  # in objects it cannot copy: the general walk moves what it dumps
        return encode(value)
    return encode(moved, value_type)


def _check_strings(data: Any) -> None:
    """Refuse JSON data a string of which holds a lone surrogate, which JSON can spell
    (``"\\ud800"``) but no reader can take back. JSON text escapes surrogates, so only text
    with ``\\ud`` in it can hold one."""
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
