"""Edges of the value codec, page tokens and instance keys that property tests found.

All fixed, and kept here so they stay fixed: an edited page token is refused (tokens carry a
digest), a token of deeply nested JSON is INVALID_PAGE_TOKEN (not a RecursionError), a string
with a lone surrogate is refused, a malformed ``{"$bytes": ...}`` marker is INVALID_ARGUMENT,
an instance key may not hold control characters, a UTC offset with seconds comes back at the
same instant (written at the nearest whole-minute offset, as RFC 3339 has no seconds there), a
``dict[str, str]`` whose only key is ``$bytes`` reads back as that dict (the marker means bytes
only where the declared type may hold bytes), and a declared type that can hold bytes is
checked as strictly as any other.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from engine import InvalidArgumentError, InvalidPageTokenError
from engine._codec import BYTES_MARKER, decode, encode, validate_client_value
from engine.attribute import check_instance_key
from tests.support.page_tokens import LISTINGS, TOKEN_ALPHABET, refused_or_same, unpadded


def _one_replaced(token: str) -> list[str]:
    """Every token with one character replaced, or one byte of its payload replaced by a
    digit, letter or separator (what someone who decodes the base64 would try)."""
    edited = [
        token[:at] + c + token[at + 1 :]
        for at in range(len(token))
        for c in TOKEN_ALPHABET
        if c != token[at]
    ]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    edited += [
        unpadded(raw[:at] + bytes([b]) + raw[at + 1 :])
        for at in range(len(raw))
        for b in b"0123456789abcdef-.:,"
        if b != raw[at]
    ]
    return edited


@pytest.mark.parametrize("listing", sorted(LISTINGS))
# Each example tries every edit of its token, so the first failure says enough: no shrinking.
@settings(max_examples=10, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_a_token_with_one_character_replaced_is_refused_or_decodes_to_the_same_position(
    listing: str, data: st.DataObject
) -> None:
    """Every replacement of one character of a real token, or of one byte of what it decodes
    to, makes it InvalidPageTokenError or changes nothing it decodes to (base64's unused low
    bits): never another position."""
    positions, encode_token, decode_token = LISTINGS[listing]
    token = encode_token(data.draw(positions))
    wrong = [e for e in _one_replaced(token) if not refused_or_same(decode_token, token, e)]
    assert not wrong, (listing, token, wrong[:3], [decode_token(e) for e in wrong[:3]])


@pytest.mark.parametrize("listing", ["search", "history", "channel"])
def test_a_token_of_deeply_nested_json_is_an_invalid_page_token(listing: str) -> None:
    """A token whose JSON nests deeper than Python's recursion limit is InvalidPageTokenError
    (today: RecursionError, which the API answers with 500)."""
    token = unpadded(b"[" * 1400)
    with pytest.raises(InvalidPageTokenError):
        LISTINGS[listing][2](token)


@settings(max_examples=100, deadline=None)
@given(
    st.datetimes(
        timezones=st.integers(-86399, 86399)
        .filter(lambda s: s % 60)
        .map(lambda s: timezone(timedelta(seconds=s)))
    )
)
@example(datetime(1900, 1, 1, tzinfo=timezone(timedelta(minutes=19, seconds=32))))
def test_a_datetime_with_a_utc_offset_in_seconds_comes_back_at_the_same_instant(
    value: datetime,
) -> None:
    """Python allows offsets with seconds (zoneinfo gives them to historical local times, e.g.
    Amsterdam's +00:19:32 before 1937); the stored value must be the same instant."""
    assert decode(datetime, encode(value, datetime)) == value


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()) | st.text())
def test_a_dict_whose_only_key_is_the_bytes_marker_reads_back(text: str) -> None:
    """``{"$bytes": "..."}`` is a valid ``dict[str, str]``; reading it back must not turn it
    into bytes (today: a ValidationError or binascii.Error on every read)."""
    value = {BYTES_MARKER: text}
    stored = encode(validate_client_value(dict[str, str], value, what="value"), dict[str, str])
    assert decode(dict[str, str], stored) == value


class Stamped(BaseModel):
    """A model written by pydantic's JSON serializer in one call, with a datetime."""

    n: int
    at: datetime


def test_a_historical_local_time_in_a_model_is_written_at_a_whole_minute_offset() -> None:
    """Amsterdam's +00:19:32 is written as the same instant at +00:20 (RFC 3339 offsets have
    no seconds), and reads back equal; the value written is not changed."""
    at = datetime(1900, 1, 1, 12, tzinfo=ZoneInfo("Europe/Amsterdam"))
    value = [Stamped(n=1, at=datetime(2025, 1, 1, tzinfo=UTC)), Stamped(n=2, at=at)]
    stored = encode(value, list[Stamped])
    assert '"1900-01-01T12:00:28+00:20"' in stored
    assert decode(list[Stamped], stored) == value
    assert value[1].at.tzinfo == ZoneInfo("Europe/Amsterdam")


def test_a_datetime_no_whole_minute_offset_can_hold_is_an_invalid_argument() -> None:
    """At the very end of year 9999, -23:59:59 has no whole-minute neighbour in range."""
    value = datetime.max.replace(tzinfo=timezone(-timedelta(hours=23, minutes=59, seconds=59)))
    with pytest.raises(InvalidArgumentError):
        encode(value, datetime)


class Mixed(BaseModel):
    """A model whose bytes field and dict field may both hold a ``$bytes`` object."""

    data: bytes
    labels: dict[str, str]
    anything: Any = None


def test_the_bytes_marker_is_bytes_where_the_declared_type_may_hold_bytes_only() -> None:
    """In one value, the marker is bytes in the bytes field and under Any (as stored before),
    and stays a dict in the ``dict[str, str]``; a union of both reads a stored marker as bytes,
    as before."""
    marker = {BYTES_MARKER: "AA=="}
    value = Mixed(data=b"\x00", labels=marker, anything=b"\x01")
    assert decode(Mixed, encode(value, Mixed)) == value
    stored = '{"data":{"$bytes":"AA=="},"labels":{"$bytes":"AA=="},"anything":{"$bytes":"AQ=="}}'
    assert decode(Mixed, stored) == value
    assert validate_client_value(Mixed, json.loads(stored), what="value") == value
    assert decode(dict[str, str] | bytes, '{"$bytes":"AA=="}') == b"\x00"


@pytest.mark.parametrize(
    ("field", "bad"), [("n", True), ("n", "7"), ("at", 0), ("inner", [{"n": "7", "data": "x"}])]
)
def test_a_type_that_holds_bytes_is_checked_strictly_at_any_depth(field: str, bad: Any) -> None:
    """Bools and numeric strings are not integers, nor numbers datetimes, in a model with bytes
    or in one nested in it; JSON's own forms (ISO text, text for bytes) still pass."""

    class Inner(BaseModel):
        n: int
        data: bytes

    class Outer(BaseModel):
        n: int
        data: bytes
        at: datetime | None = None
        inner: list[Inner] = []

    good = {"n": 1, "data": {BYTES_MARKER: "AA=="}, "at": "2025-01-01T00:00:00Z"}
    assert validate_client_value(Outer, {**good, "inner": [{"n": 2, "data": "x"}]}, what="v")
    with pytest.raises(InvalidArgumentError):
        validate_client_value(Outer, {**good, field: bad}, what="v")


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=4), st.characters(categories=["Cs"]), st.text(max_size=4))
def test_a_string_with_a_lone_surrogate_is_refused_or_reads_back(
    before: str, surrogate: str, after: str
) -> None:
    """JSON may spell a lone surrogate (``"\\ud800"``); the engine must refuse it with
    InvalidArgumentError or store something it can read back. Today it stores it, and every
    read of it fails."""
    text = before + surrogate + after
    try:
        stored = encode(validate_client_value(str, text, what="value"), str)
    except InvalidArgumentError:
        return
    assert decode(str, stored) == text


def _strict_base64(text: str) -> bool:
    """Return True when ``text`` is canonical base64, as ``encode`` writes it."""
    try:
        return base64.b64encode(base64.b64decode(text, validate=True)).decode() == text
    except (binascii.Error, ValueError):
        return False


@settings(max_examples=100, deadline=None)
@given(
    st.text(st.sampled_from("ABab01+/=-_!. \n"), max_size=9).filter(lambda s: not _strict_base64(s))
)
@example("a")
@example("!!")
def test_a_malformed_bytes_marker_from_a_client_is_an_invalid_argument(text: str) -> None:
    """``{"$bytes": s}`` with ``s`` not base64 is refused with InvalidArgumentError (today: a
    binascii.Error, or the junk characters dropped and other bytes stored)."""
    with pytest.raises(InvalidArgumentError):
        validate_client_value(bytes, {BYTES_MARKER: text}, what="value")


class Upload(BaseModel):
    """A model with an int and a bytes field."""

    n: int
    data: bytes


@settings(max_examples=50, deadline=None)
@given(st.booleans() | st.integers(-(2**63), 2**63 - 1).map(str))
def test_bools_and_numeric_strings_are_not_integers_in_a_type_that_holds_bytes(bad: Any) -> None:
    """``true`` or ``"7"`` for an int field is refused even when another field is bytes
    (today such types keep pydantic's lax check, which converts them)."""
    with pytest.raises(InvalidArgumentError):
        validate_client_value(Upload, {"n": bad, "data": {BYTES_MARKER: ""}}, what="input")


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=4), st.characters(categories=["Cc"]), st.text(max_size=4))
@example("a", "\x00", "b")
def test_an_instance_key_with_a_control_character_is_refused(
    before: str, control: str, after: str
) -> None:
    """Instance keys refuse control characters as Flow IDs do (check_id): a NUL in an
    AttributeMap instance is accepted today and then fails on PostgreSQL with a 500."""
    key = before + control + after
    if key.strip() and "/" not in key:
        with pytest.raises(InvalidArgumentError):
            check_instance_key(key, "instance")


class _Record(BaseModel):
    sequence: int
    name: str
    at: datetime
    tags: list[str]


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_RECORDS = st.lists(
    st.builds(
        _Record,
        sequence=st.integers(-(2**63), 2**63 - 1),
        name=_TEXT,
        at=st.datetimes(timezones=st.just(UTC)),
        tags=st.lists(_TEXT, max_size=3),
    ),
    max_size=5,
)


@settings(max_examples=100, deadline=None)
@given(_RECORDS)
def test_plain_types_written_by_pydantic_in_one_call_read_back_as_the_general_walk_writes(
    records: list[_Record],
) -> None:
    """A list of models of strings, integers and datetimes is written by pydantic's JSON
    serializer in one call; its JSON is the same data the general walk writes (text as UTF-8
    rather than escapes), and it reads back equal."""
    from engine._codec import adapter_for, plan_for, to_jsonable

    value_type = list[_Record]
    assert plan_for(value_type).direct_json
    stored = encode(records, value_type)
    general = to_jsonable(adapter_for(value_type).dump_python(records, mode="json"))
    assert json.loads(stored) == general
    assert decode(value_type, stored) == records


def test_types_that_may_hold_non_finite_numbers_or_bytes_take_the_general_walk() -> None:
    from engine._codec import plan_for

    assert not plan_for(float).direct_json
    assert not plan_for(list[float | int]).direct_json
    assert not plan_for(dict[str, Any]).direct_json
    assert not plan_for(bytes).direct_json
    with pytest.raises(InvalidArgumentError):
        encode([1.0, float("nan")], list[float])
