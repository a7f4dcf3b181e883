"""The bytes marker: bytes travel in JSON as ``{"$bytes": "<base64>"}``.

``read_marker`` reads one marker and ``from_jsonable`` every marker in data of type ``Any``;
``read_here`` and ``read_all`` are the validator functions with which a checking copy of a
declared type's schema (see ``marker_schemas``) finds the markers that stand where the type may
hold bytes, and ``with_bytes`` replaces those.
"""

from __future__ import annotations

import binascii
from contextlib import suppress
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError, SchemaValidator
from pydantic_core.core_schema import ValidationInfo

from engine.errors import InvalidArgumentError

BYTES_MARKER = "$bytes"
#: The error type with which ``read_here`` refuses data that is not a marker.
NOT_A_MARKER = "not_a_marker"


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
        # As base64.b64decode(text, validate=True), without its Python-level steps.
        decoded = binascii.a2b_base64(text, strict_mode=True)
    except ValueError:  # binascii.Error too; and text that is not ASCII
        decoded = None
    # Only the spelling encode writes: other spellings would store other bytes.
    if decoded is None or binascii.b2a_base64(decoded, newline=False).decode("ascii") != text:
        raise InvalidArgumentError(f"{{{BYTES_MARKER!r}: ...}} must hold base64 text")
    return decoded


def read_here(data: Any, info: ValidationInfo) -> Any:
    """Read a marker where the declared type may be bytes (see ``marker_checker``)."""
    decoded = read_marker(data)
    if decoded is data:
        raise PydanticCustomError(NOT_A_MARKER, "not a bytes marker")
    if info.context is not None:
        info.context[id(data)] = (data, decoded)
    return decoded


def read_all(data: Any, info: ValidationInfo) -> Any:
    """Read every marker in data the declared type may hold anything in (``Any``)."""
    return _read_markers(data, info.context)


def with_bytes(checker: SchemaValidator, data: Any) -> Any:
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
