"""The codec's plans: what it decides about a declared type is decided once, on first use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from engine import InvalidArgumentError
from engine._codec import (
    BYTES_MARKER,
    Plan,
    adapter_for,
    decode,
    encode,
    plan_for,
    validate,
    validate_client_value,
)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)

    sequence: int
    name: str
    at: datetime


def _counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Return the list of types whose plan is built from now on."""
    built: list[Any] = []
    build = Plan.__init__

    def counting(plan: Plan, value_type: Any) -> None:
        built.append(value_type)
        build(plan, value_type)

    monkeypatch.setattr(Plan, "__init__", counting)
    return built


def test_a_type_s_plan_is_built_on_its_first_use_and_not_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Fresh(BaseModel):
        name: str
        data: bytes

    built = _counting_builds(monkeypatch)
    value = Fresh(name="a", data=b"hi")
    text = encode(value, Fresh)
    assert built == [Fresh]
    assert encode(value, Fresh) == text
    assert decode(Fresh, text) == value
    assert validate(Fresh, value, what="v", strict=True) == value
    lax = {"name": "a", "data": {BYTES_MARKER: "aGk="}}
    assert validate(Fresh, lax, what="v", strict=False) == value
    assert validate_client_value(Fresh, {"name": "a", "data": b"hi"}, what="v") == value
    assert built == [Fresh]
    assert plan_for(Fresh) is plan_for(Fresh)


def test_each_declared_type_has_a_plan_of_its_own() -> None:
    records, texts, chunks = plan_for(list[_Record]), plan_for(list[str]), plan_for(bytes)
    assert len({id(records), id(texts), id(chunks)}) == 3
    assert (records.value_type, texts.value_type, chunks.value_type) == (
        list[_Record],
        list[str],
        bytes,
    )
    assert records.adapter is adapter_for(list[_Record])
    assert (records.direct_json, texts.direct_json, chunks.direct_json) == (True, True, False)
    assert (records.holds_no_bytes, texts.holds_no_bytes, chunks.holds_no_bytes) == (
        True,
        True,
        False,
    )
    # Only a type with datetimes looks for offsets with seconds.
    assert records.seconds_offset is not None
    assert texts.seconds_offset is None
    # A marker is an object like any other in a dict[str, str]; bytes in a dict[str, bytes].
    assert plan_for(dict[str, str]).marker_reader is None
    assert plan_for(dict[str, bytes]).marker_reader is not None


def test_the_marker_reader_is_decided_on_its_first_need_and_kept() -> None:
    class Holder(BaseModel):
        labels: dict[str, str]
        data: bytes

    plan = plan_for(Holder)
    value = Holder(labels={BYTES_MARKER: "aGk="}, data=b"hi")
    text = encode(value, Holder)
    assert decode(Holder, text) == value
    reader = plan.marker_reader
    assert reader is not None
    assert decode(Holder, text) == value
    assert plan.marker_reader is reader
    assert plan.marker_checker is plan.marker_checker


def test_a_model_whose_schema_pydantic_defers_is_written_by_its_own_plan() -> None:
    """With ``defer_build``, pydantic builds the schema on first use: the plan is that use, so
    a first encode already knows the model holds bytes and floats."""

    class Deferred(BaseModel):
        model_config = ConfigDict(defer_build=True)

        data: bytes
        ratio: float
        at: datetime

    value = Deferred(data=b"\xff\x00", ratio=0.5, at=datetime(2024, 5, 1, tzinfo=UTC))
    text = encode(value, Deferred)
    assert text == (
        f'{{"data":{{"{BYTES_MARKER}":"/wA="}},"ratio":0.5,"at":"2024-05-01T00:00:00Z"}}'
    )
    plan = plan_for(Deferred)
    assert (plan.direct_json, plan.holds_no_bytes) == (False, False)
    assert decode(Deferred, text) == value
    with pytest.raises(InvalidArgumentError, match="finite"):
        encode(Deferred(data=b"", ratio=float("nan"), at=value.at), Deferred)
