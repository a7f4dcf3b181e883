"""``app.client.decoding`` reads and checks values exactly as the engine's codec does.

The same declared type and the same JSON data give the same Python value, or the same error,
from ``decode_value`` as from the engine decoding the stored text, and from ``validate_value``
as from the engine validating a client's value; a ``{"$bytes": ...}`` object is bytes only
where the declared type may hold bytes. See tests/client/test_bytes_marker_parity.py for the
same through a real server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import engine
from app.client.decoding import decode_value, from_json_data, validate_value
from engine._codec import BYTES_MARKER, Plan, decode, validate_client_value


class Tagged(BaseModel):
    """A model with a bytes field next to fields that may hold a marker-shaped dict."""

    labels: dict[str, str] = {}
    extra: dict[str, Any] = {}
    data: bytes = b""


TYPES: list[Any] = [
    Any,
    bytes,
    dict[str, str],
    dict[str, bytes],
    dict[str, Any],
    list[bytes] | dict[str, str],
    Tagged,
    list[Tagged],
]

#: JSON data rich in marker-shaped objects: valid and invalid base64, at every depth.
MARKERS = st.fixed_dictionaries(
    {BYTES_MARKER: st.sampled_from(["aGk=", "AA==", "", "aGk", "!!"]) | st.integers()}
)
JSON_DATA = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["aGk=", "x"]) | MARKERS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["labels", "extra", "data", "k", BYTES_MARKER]), inner)
        | MARKERS
    ),
    max_leaves=8,
)


def _outcome(call: Any) -> tuple[str, Any]:
    """Return ("value", the result) or ("error", the exception's type and message)."""
    try:
        return "value", call()
    except (ValidationError, engine.InvalidArgumentError) as exc:
        return "error", (type(exc), str(exc))


def _typed(result: tuple[str, Any]) -> Any:
    """Return the outcome with the value's repr too, so b"hi" and {"$bytes": ...} differ."""
    kind, value = result
    return kind, value, repr(value) if kind == "value" else None


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TYPES), JSON_DATA)
def test_decode_value_gives_what_the_engine_decodes_of_the_same_stored_data(
    value_type: Any, data: Any
) -> None:
    stored = json.dumps(data, separators=(",", ":"))
    expected = _outcome(lambda: decode(value_type, stored))
    assert _typed(_outcome(lambda: decode_value(value_type, data))) == _typed(expected)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TYPES), JSON_DATA)
def test_validate_value_checks_as_the_engine_checks_a_clients_value(
    value_type: Any, data: Any
) -> None:
    expected = _outcome(
        lambda: engine.to_json_data(validate_client_value(value_type, data, what="input"))
    )
    got = _outcome(lambda: validate_value(value_type, data, what="input"))
    assert _typed(got) == _typed(expected)


@pytest.mark.parametrize(
    ("value_type", "data", "expected"),
    [
        (dict[str, str], {BYTES_MARKER: "aGk="}, {BYTES_MARKER: "aGk="}),
        (bytes, {BYTES_MARKER: "aGk="}, b"hi"),
        (dict[str, bytes], {BYTES_MARKER: "aGk="}, {BYTES_MARKER: b"aGk="}),
        (dict[str, bytes], {"k": {BYTES_MARKER: "aGk="}}, {"k": b"hi"}),
        (Any, [{BYTES_MARKER: "aGk="}], [b"hi"]),
        (list[bytes] | dict[str, str], {BYTES_MARKER: "aGk="}, {BYTES_MARKER: "aGk="}),
        (
            Tagged,
            {"labels": {BYTES_MARKER: "aGk="}, "extra": {BYTES_MARKER: "aGk="}, "data": "hi"},
            Tagged(labels={BYTES_MARKER: "aGk="}, extra={BYTES_MARKER: "aGk="}, data=b"hi"),
        ),
    ],
)
def test_a_marker_is_bytes_only_where_the_declared_type_may_hold_bytes(
    value_type: Any, data: Any, expected: Any
) -> None:
    assert repr(decode_value(value_type, data)) == repr(expected)
    assert repr(engine.from_json_data(data, value_type)) == repr(expected)


def test_a_dict_with_the_marker_key_is_sent_as_the_dict_it_is() -> None:
    """``validate_value`` used to read the marker as bytes, and refuse a ``dict[str, str]``."""
    value = {BYTES_MARKER: "aGk="}
    assert validate_value(dict[str, str], value, what="input") == value
    assert engine.validate_value(value, dict[str, str]) == value
    with pytest.raises(engine.InvalidArgumentError, match="^input: ") as caught:
        validate_value(dict[str, int], value, what="input")
    assert caught.value.field == "input"


def test_untyped_data_reads_every_marker_and_refuses_a_malformed_one() -> None:
    data = {"a": [{BYTES_MARKER: "aGk="}], "b": "aGk="}
    assert from_json_data(data) == {"a": [b"hi"], "b": "aGk="}
    with pytest.raises(engine.InvalidArgumentError, match="base64"):
        from_json_data({BYTES_MARKER: "aGk"})


def test_data_without_a_marker_is_read_without_a_pass_over_the_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The common case stays one pydantic call: no checking pass finds markers first."""

    def walked(plan: Plan) -> Any:
        raise AssertionError(f"the schema of {plan.value_type!r} was walked")

    monkeypatch.setattr(Plan, "marker_reader", property(walked))
    monkeypatch.setattr(Plan, "marker_checker", property(walked))
    data = {"labels": {"a": "b"}, "extra": {"n": [1]}, "data": "aGk="}
    assert decode_value(Tagged, data) == Tagged(labels={"a": "b"}, extra={"n": [1]}, data=b"aGk=")
    assert decode_value(list[Tagged], [data, data])[1].data == b"aGk="
