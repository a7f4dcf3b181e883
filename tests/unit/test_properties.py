"""Properties of the value codec (no database).

A value of a declared type comes back equal (and of the same type, float sign and UTC offset
included) from ``encode`` then ``decode``; its JSON form is what a client may send for it; any
JSON is accepted exactly when it is a valid value; bools and numeric strings are not integers;
integers outside int64 and non-finite floats are refused with InvalidArgumentError. IDs and
instance keys are in ``test_id_properties.py``; cases where the engine breaks these rules are
in ``test_properties_found.py``.
"""

from __future__ import annotations

import json
import math
import types
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from typing import Any, Union, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from engine import InvalidArgumentError
from engine._codec import (
    BYTES_MARKER,
    INT64_MAX,
    INT64_MIN,
    decode,
    encode,
    validate_client_value,
)

# -- declared types and values of them ----------------------------------------------------------


class Color(Enum):
    """An Enum with string and integer members."""

    RED = "red"
    GREEN = "green"
    ANSWER = 42


class Reading(BaseModel):
    """A pydantic model with a field of every scalar kind (bytes too: the codec's slow path)."""

    sensor: str
    value: float
    count: int
    ok: bool
    at: datetime
    tags: list[str]
    color: Color
    raw: bytes | None = None


class Tally(BaseModel):
    """A pydantic model without bytes (the codec's fast, strict path)."""

    n: int
    label: str


INT64 = st.integers(INT64_MIN, INT64_MAX)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
# Offsets in whole minutes: pydantic writes no seconds of an offset (see the found file).
OFFSETS = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
AWARE = st.datetimes(timezones=OFFSETS | st.just(UTC))
# A dict whose only key is the bytes marker reads back as bytes (see the found file).
KEYS = st.text(max_size=6).filter(lambda k: k != BYTES_MARKER)

READINGS = st.builds(
    Reading,
    sensor=st.text(),
    value=FINITE,
    count=INT64,
    ok=st.booleans(),
    at=AWARE,
    tags=st.lists(st.text(), max_size=3),
    color=st.sampled_from(Color),
    raw=st.none() | st.binary(max_size=16),
)

Case = tuple[Any, st.SearchStrategy[Any]]

SCALARS: list[Case] = [
    (int, INT64),
    (float, FINITE),
    (str, st.text()),
    (bool, st.booleans()),
    (type(None), st.none()),
    (Color, st.sampled_from(Color)),
    (Tally, st.builds(Tally, n=INT64, label=st.text())),
]
LEAVES: list[Case] = [
    *SCALARS,
    (bytes, st.binary(max_size=32)),
    (datetime, AWARE),
    (Reading, READINGS),
]


def containers(inner: st.SearchStrategy[Case]) -> st.SearchStrategy[Case]:
    """Wrap a (type, values) case in a list, a str-keyed dict or an Optional."""
    return st.one_of(
        inner.map(lambda c: (list[c[0]], st.lists(c[1], max_size=4))),
        inner.map(lambda c: (dict[str, c[0]], st.dictionaries(KEYS, c[1], max_size=4))),
        inner.map(lambda c: (c[0] | None, st.none() | c[1])),
    )


@st.composite
def typed_values(draw: st.DrawFn, leaves: list[Case] = LEAVES) -> tuple[Any, Any]:
    """Draw a declared type (scalars, lists, dicts, Optionals of them) and a value of it."""
    value_type, values = draw(st.recursive(st.sampled_from(leaves), containers, max_leaves=3))
    return value_type, draw(values)


def assert_same(got: Any, want: Any) -> None:
    """Assert equal values of the same types, with the same float signs and UTC offsets."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, float):
        assert math.copysign(1.0, got) == math.copysign(1.0, want) and got == want, (got, want)
    elif isinstance(want, datetime):
        assert got == want and got.utcoffset() == want.utcoffset(), (got, want)
    elif isinstance(want, list):
        assert len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), (got, want)
        for key in want:
            assert_same(got[key], want[key])
    elif isinstance(want, BaseModel):
        assert_same(dict(got), dict(want))
    else:
        assert got == want, (got, want)


# -- round trips ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(typed_values())
def test_decoding_an_encoded_value_gives_back_an_equal_value_of_its_type(
    case: tuple[Any, Any],
) -> None:
    """``decode(T, encode(v, T))`` is ``v`` for every value of every supported declared type."""
    value_type, value = case
    assert_same(decode(value_type, encode(value, value_type)), value)


@settings(max_examples=300, deadline=None)
@given(typed_values())
def test_a_client_may_send_the_json_form_of_any_valid_value(case: tuple[Any, Any]) -> None:
    """The JSON form the codec writes is what a client sends for a value: it passes the client
    check and means that same value."""
    value_type, value = case
    wire = json.loads(encode(value, value_type))
    assert_same(validate_client_value(value_type, wire, what="value"), value)


# -- what a client may send ------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(INT64_MAX - 2, INT64_MAX + 2) | st.integers(INT64_MIN - 2, INT64_MIN + 2),
    st.integers(2**1023, 2**1100),
    st.floats(),  # NaN and infinities too: Python's json module reads NaN and Infinity
    st.text(max_size=6),
    st.sampled_from(["7", "-1", "1.5", "true", "null", "red", "42", "GREEN", ""]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
# Declared types whose JSON form is unique (no bytes, datetimes or models): a reference can
# then say from the JSON alone whether it is a valid value.
PLAIN_LEAVES: list[Case] = [case for case in SCALARS if case[0] is not Tally]


def _finite_float(value: int | float) -> bool:
    """Return True when ``value`` is a finite float or an int that converts to one."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def conforms(value_type: Any, data: Any) -> bool:
    """The reference: is JSON ``data`` a valid value of ``value_type`` (as its JSON Schema and
    int64/finite rules say)?"""
    origin = get_origin(value_type)
    if origin in (Union, types.UnionType):
        return any(conforms(t, data) for t in get_args(value_type))
    if origin is list:
        (item,) = get_args(value_type)
        return type(data) is list and all(conforms(item, d) for d in data)
    if origin is dict:
        _, item = get_args(value_type)
        return type(data) is dict and all(conforms(item, d) for d in data.values())
    if value_type is int:
        return type(data) is int and INT64_MIN <= data <= INT64_MAX
    if value_type is float:
        return type(data) in (int, float) and _finite_float(data)
    if value_type is Color:
        return any(type(data) is type(m.value) and data == m.value for m in Color)
    if value_type is type(None):
        return data is None
    return type(data) is value_type


def expected(value_type: Any, data: Any) -> Any:
    """The reference: the Python value conforming JSON ``data`` stands for."""
    origin = get_origin(value_type)
    if origin in (Union, types.UnionType):
        return next(expected(t, data) for t in get_args(value_type) if conforms(t, data))
    if origin is list:
        return [expected(get_args(value_type)[0], d) for d in data]
    if origin is dict:
        return {k: expected(get_args(value_type)[1], d) for k, d in data.items()}
    if value_type is float:
        return float(data)
    if value_type is Color:
        return Color(data)
    return data


@st.composite
def plain_types(draw: st.DrawFn) -> Any:
    """Draw a declared type without bytes, datetimes or models."""
    value_type, _ = draw(st.recursive(st.sampled_from(PLAIN_LEAVES), containers, max_leaves=3))
    return value_type


@settings(max_examples=400, deadline=None)
@given(value_type=plain_types(), data=JSON_VALUES)
def test_a_client_value_is_accepted_exactly_when_it_is_the_json_of_a_valid_value(
    value_type: Any, data: Any
) -> None:
    """Any JSON is accepted (and stored) exactly when it is a valid value of the declared type,
    and then means that value; otherwise it is refused with InvalidArgumentError."""
    if conforms(value_type, data):
        value = validate_client_value(value_type, data, what="value")
        encode(value, value_type)
        assert_same(value, expected(value_type, data))
    else:
        with pytest.raises(InvalidArgumentError):
            encode(validate_client_value(value_type, data, what="value"), value_type)


NOT_INTEGERS = st.booleans() | INT64.map(str) | st.sampled_from(["7", " 7", "0x7", "7.0"])


@st.composite
def holders_of_a_non_integer(draw: st.DrawFn) -> tuple[Any, Any]:
    """Draw a bytes-free declared type holding an int and JSON where that int is a bool or a
    numeric string (the rest valid)."""
    bad = draw(NOT_INTEGERS)
    value_type: Any = int
    data: Any = bad
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["list", "dict", "optional", "model"]))
        if kind == "list":
            value_type, data = list[value_type], [*draw(st.lists(st.just(data))), data]
        elif kind == "dict":
            value_type, data = dict[str, value_type], {draw(KEYS): data}
        elif kind == "optional":
            value_type = value_type | None
        elif value_type is int:
            value_type, data = Tally, {"n": data, "label": draw(st.text(max_size=4))}
    return value_type, data


@settings(max_examples=200, deadline=None)
@given(holders_of_a_non_integer())
def test_bools_and_numeric_strings_are_never_integers_from_a_client(
    case: tuple[Any, Any],
) -> None:
    """``true`` or ``"7"`` where an int is declared is refused, at any depth, naming the field."""
    value_type, data = case
    with pytest.raises(InvalidArgumentError) as info:
        validate_client_value(value_type, data, what="input")
    assert info.value.field == "input"


# -- numbers outside the stored range ------------------------------------------------------------

OUT_OF_INT64 = st.integers(max_value=INT64_MIN - 1) | st.integers(min_value=INT64_MAX + 1)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def _reading(**overrides: Any) -> tuple[Reading, dict[str, Any]]:
    """Return a Reading with ``overrides`` and the JSON a client would send for it."""
    fields: dict[str, Any] = {
        "sensor": "s",
        "value": 1.5,
        "count": 1,
        "ok": True,
        "at": datetime(2025, 1, 1, tzinfo=UTC),
        "tags": [],
        "color": Color.RED,
        "raw": b"\x00",
    }
    wire = {**fields, "at": "2025-01-01T00:00:00Z", "color": "red", "raw": {BYTES_MARKER: "AA=="}}
    fields.update(overrides)
    wire.update(overrides)
    return Reading(**fields), wire


@st.composite
def out_of_range_values(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    """Draw (declared type, Python value, client JSON) holding an integer outside int64 or a
    non-finite float, at the top, in a container, or in a model (with and without bytes)."""
    if draw(st.booleans()):
        bad, scalar, field = draw(OUT_OF_INT64), int, "count"
    else:
        bad, scalar, field = draw(NON_FINITE), float, "value"
    shapes = ["scalar", "list", "dict", "optional", "bytes-union", "model"]
    shape = draw(st.sampled_from([*shapes, "model-list"] if scalar is int else shapes))
    if shape == "model":
        value, wire = _reading(**{field: bad})
        return Reading, value, wire
    if shape == "model-list":
        return list[Tally], [Tally(n=bad, label="x")], [{"n": bad, "label": "x"}]
    value_type, value = {
        "scalar": (scalar, bad),
        "list": (list[scalar], [draw(INT64 if scalar is int else FINITE), bad]),
        "dict": (dict[str, scalar], {"k": bad}),
        "optional": (scalar | None, bad),
        "bytes-union": (list[bytes | scalar], [b"x", bad]),
    }[shape]
    wire = [{BYTES_MARKER: "eA=="}, bad] if shape == "bytes-union" else value
    return value_type, value, wire


@settings(max_examples=200, deadline=None)
@given(out_of_range_values())
def test_integers_outside_int64_and_non_finite_floats_are_refused_as_invalid_arguments(
    case: tuple[Any, Any, Any],
) -> None:
    """Such a number is never stored: encoding it, or taking it from a client, raises
    InvalidArgumentError (no other exception, no warning)."""
    value_type, value, wire = case
    with pytest.raises(InvalidArgumentError):
        encode(value, value_type)
    with pytest.raises(InvalidArgumentError):
        encode(validate_client_value(value_type, wire, what="value"), value_type)
