"""Parsing of the Attribute names and values callers pass to the client API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._ids import check_unicode
from engine.attribute import _State
from engine.errors import InvalidArgumentError

if TYPE_CHECKING:
    from engine._specs import FlowSpec


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
            raw = _codec.validate_client_value(state.value_type, raw, what=f"{what}.{key}")
            _codec.to_jsonable(raw)
        parsed[(state.name, instance)] = raw
    return parsed
