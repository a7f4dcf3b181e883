"""Checks and parsing of the names and IDs callers pass to the client API."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from uuid6 import uuid7

from engine import _codec
from engine.attribute import _State
from engine.errors import InvalidArgumentError

if TYPE_CHECKING:
    from engine._specs import FlowSpec

MAX_ID_LENGTH = 256


def new_id() -> str:
    """Return a new time-ordered unique ID (UUIDv7)."""
    return str(uuid7())


def state_key(name: str, instance: str) -> str:
    """Return the wire form of a state key: ``name`` or ``name/instance``."""
    return f"{name}/{instance}" if instance else name


def check_id(value: Any, what: str) -> str:
    """Return ``value`` if it is a usable Flow, run or request ID."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{what} must be a non-blank string", field=what)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgumentError(f"{what} must be at most {MAX_ID_LENGTH} characters", field=what)
    if "/" in value or any(ord(c) < 32 for c in value):
        raise InvalidArgumentError(f"{what} must not contain '/' or control characters", field=what)
    check_unicode(value, what)
    return value


def check_unicode(value: str, what: str) -> str:
    """Return ``value`` unless it holds lone surrogates, which no database can store."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            f"{what} must be valid Unicode text (no lone surrogates)", field=what
        ) from None
    return value


def to_datetime(us: int | None) -> datetime | None:
    """Convert stored microseconds to an aware UTC datetime."""
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, UTC)


def parse_key(spec: FlowSpec, key: Any, what: str) -> tuple[_State[Any], str]:
    """Return the state and instance a ``name`` or ``map/instance`` key addresses."""
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(f"{what}: names must be non-empty strings", field=what)
    check_unicode(key, what)
    name, sep, instance = key.partition("/")
    state = spec.state(name)
    if state is None:
        raise InvalidArgumentError(
            f"{what}: Flow type {spec.flow_type} declares no Attribute or AttributeMap "
            f"named {name!r}",
            field=what,
        )
    if state.is_map:
        if not sep or not instance.strip() or "/" in instance:
            raise InvalidArgumentError(
                f"{what}: address AttributeMap {name!r} as '{name}/<instance>' with a "
                "non-blank instance without '/'",
                field=what,
            )
    elif sep:
        raise InvalidArgumentError(
            f"{what}: {name!r} is an Attribute, not an AttributeMap", field=what
        )
    return state, instance


def parse_values(
    spec: FlowSpec, values: Mapping[str, Any], what: str
) -> dict[tuple[str, str], Any]:
    """Validate ``{"name" or "map/instance": value}`` against the Flow's declared types."""
    if not isinstance(values, Mapping):
        raise InvalidArgumentError(f"{what} must be an object", field=what)
    parsed: dict[tuple[str, str], Any] = {}
    for key, raw in values.items():
        state, instance = parse_key(spec, key, what)
        if raw is not None:
            raw = _codec.validate(state.value_type, raw, what=f"{what}.{key}", strict=False)
            _codec.to_jsonable(raw)
        parsed[(state.name, instance)] = raw
    return parsed
