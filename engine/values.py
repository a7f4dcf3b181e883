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


def from_json_data(data: Any, value_type: Any = Any) -> Any:
    """Return JSON data as a value of ``value_type``, the way the engine reads a stored value.

    The inverse of :func:`to_json_data`, for JSON data the REST API answers (an RPC output,
    an Attribute, a message): the same data and declared type give the value the Engine gives
    in process. A ``{"$bytes": "<base64>"}`` object is bytes where ``value_type`` may hold
    bytes at its place (anywhere, for ``Any``), and an object like any other elsewhere (a
    ``dict[str, str]`` may have that key). The rest is validated by pydantic in its lax JSON
    mode: ISO text becomes a datetime, an object the declared model.

    Raises pydantic's ``ValidationError`` for data ``value_type`` does not accept, and
    InvalidArgumentError for a bytes marker that is not base64.
    """
    return _codec.decode_data(value_type, data)


def validate_value(value: Any, value_type: Any, *, what: str = "value") -> Any:
    """Validate ``value`` as the engine validates a value a client sends (a Flow or RPC input,
    an Attribute, a Channel message), and return it as a value of ``value_type``.

    A Python value of the declared type passes as it is; anything else must be what the type's
    JSON Schema allows, as JSON data: ``true`` is not an integer and ``"7"`` not a number, yet
    ISO text is a datetime, and ``{"$bytes": "<base64>"}`` bytes where the type may hold bytes.
    Raises InvalidArgumentError naming ``what`` (its ``field``).
    """
    return _codec.validate_client_value(value_type, value, what=what)
