"""Read durable values from JSON text, and validate values against their declared type."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from engine._codec.encoding import dumps, to_jsonable
from engine._codec.marker_schemas import AS_SENT_CHOICE, MARKER_CHOICE
from engine._codec.markers import BYTES_MARKER, NOT_A_MARKER, from_jsonable
from engine._codec.plans import Plan, plan_for
from engine.errors import InvalidArgumentError


def validate(value_type: Any, value: Any, *, what: str, strict: bool) -> Any:
    """Validate ``value`` against ``value_type`` or raise InvalidArgumentError naming ``what``.

    ``strict`` is used for Python values written by handlers (``True`` stays a bool, ``1`` is not
    a bool); otherwise (values a handler returns for the engine to pass on) pydantic's lax mode
    may convert, so a dict becomes the declared model.
    """
    if value_type is Any or value_type is object:
        return value
    plan = plan_for(value_type)
    try:
        if strict:
            try:
                return plan.validator.validate_python(value, strict=True)
            except ValidationError:
                # Strict mode refuses an int for a float; widening is safe, nothing else is.
                if value_type is float and isinstance(value, int) and not isinstance(value, bool):
                    return float(value)
                raise
        read = plan.marker_reader
        return plan.validator.validate_python(value if read is None else read(value))
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
    plan = plan_for(value_type)
    try:
        try:
            return plan.validator.validate_python(value, strict=True)
        except ValidationError:
            data = to_jsonable(value)
            text = dumps(data)
            # Without bytes in the type, a marker under Any stays the object it is, as encode
            # (which then writes no marker) needs.
            checker = None if plan.holds_no_bytes else plan.marker_checker
            if checker is None:
                return plan.validator.validate_json(text, strict=True)
            # JSON has no bytes: the checking copy reads them where they stand and checks the
            # rest strictly, then the declared type's own validator builds the value.
            checker.validate_json(text, strict=True)
            read = plan.marker_reader
            return plan.validator.validate_python(data if read is None else read(data))
    except ValidationError as exc:
        raise _invalid(what, exc) from None


def _invalid(what: str, exc: ValidationError) -> InvalidArgumentError:
    errors = exc.errors()
    # A checking copy's errors: the data's own way through a bytes position says more.
    first = next((e for e in errors if e["type"] != NOT_A_MARKER), errors[0])
    loc = (p for p in first.get("loc", ()) if p not in (MARKER_CHOICE, AS_SENT_CHOICE))
    where = ".".join(str(p) for p in loc)
    suffix = f" at {where}" if where else ""
    return InvalidArgumentError(f"{what}: {first.get('msg', 'invalid value')}{suffix}", field=what)


def decode(value_type: Any, text: str) -> Any:
    """Parse stored JSON text into a value of ``value_type``.

    A ``{"$bytes": ...}`` object is bytes where the declared type may hold bytes at its place,
    and an object like any other elsewhere (a ``dict[str, str]`` may have that key).
    """
    if value_type is Any or value_type is object:
        return from_jsonable(json.loads(text))
    plan = plan_for(value_type)
    if BYTES_MARKER not in text:
        # No bytes inside: pydantic parses and validates in one pass, in Rust.
        return plan.validator.validate_json(text)
    return _decode_marked(plan, text, _UNPARSED)


def decode_data(value_type: Any, data: Any) -> Any:
    """Return parsed JSON data (a value the REST API answered, say) as a value of
    ``value_type``, exactly as ``decode`` reads the same data as text."""
    if value_type is Any or value_type is object:
        return from_jsonable(data)
    # Through its text, pydantic reads it in JSON mode as decode does: Python mode converts
    # some values otherwise. The text also tells cheaply whether a marker is anywhere.
    text = _dumps_any_number(data)
    plan = plan_for(value_type)
    if BYTES_MARKER not in text:
        return plan.validator.validate_json(text)
    return _decode_marked(plan, text, data)


#: ``json.dumps(data, separators=(",", ":"))``, with one encoder made once.
_dumps_any_number = json.JSONEncoder(separators=(",", ":")).encode

#: ``_decode_marked``'s data when only the text is at hand (null is data like any other).
_UNPARSED: Any = object()


def _decode_marked(plan: Plan, text: str, data: Any) -> Any:
    """Read the JSON ``text`` (whose parsed form is ``data``, unless ``_UNPARSED``), which
    holds a bytes marker somewhere, as a value of the plan's type."""
    read = plan.marker_reader
    if read is None:  # no place may hold bytes: the marker is an object like any other
        return plan.validator.validate_json(text)
    parsed = json.loads(text) if data is _UNPARSED else data
    return plan.validator.validate_python(read(parsed))
