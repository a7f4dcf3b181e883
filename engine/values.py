"""Public helpers for durable values."""

from __future__ import annotations

from typing import Any

from engine import _codec


def to_json_data(value: Any) -> Any:
    """Return ``value`` as plain JSON data, the way the engine stores it.

    Models and dataclasses become objects (by alias), datetimes ISO strings, bytes
    ``{"$bytes": "<base64>"}``; non-finite floats and integers outside int64 are refused.
    """
    return _codec.to_jsonable(value)
