"""Which values one invocation may hand to the next without decoding (``engine/_reuse.py``)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, ConfigDict, Field

from engine._reuse import immutable, reuse_of


class Colour(Enum):
    RED = "red"


class Point(BaseModel):
    model_config = ConfigDict(frozen=True)
    x: int
    at: datetime
    label: Annotated[str, Field(max_length=9)] = ""
    tags: tuple[str, ...] = ()
    colour: Colour | None = None
    kind: Literal["a", "b"] = "a"


class Node(BaseModel):
    model_config = ConfigDict(frozen=True)
    value: int
    next: Node | None = None


class Open(BaseModel):
    x: int


class Extra(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")
    x: int


class HoldsList(BaseModel):
    model_config = ConfigDict(frozen=True)
    xs: list[int]


@pytest.mark.parametrize(
    "value_type",
    [
        int,
        str,
        float,
        bool,
        bytes,
        datetime,
        Colour,
        Point,
        Node,
        Optional[Point],  # noqa: UP045
        tuple[Point, ...],
        frozenset[int],
        int | str,
    ],
)
def test_immutable_types_are_shared_as_they_are(value_type: Any) -> None:
    assert immutable(value_type)
    share = reuse_of(value_type)
    assert share is not None
    value = object()
    assert share(value) is value


@pytest.mark.parametrize("value_type", [list[Point], list[int]])
def test_lists_of_immutable_values_are_shared_as_shallow_copies(value_type: Any) -> None:
    share = reuse_of(value_type)
    assert share is list
    original = [1, 2]
    copy = share(original)
    assert copy == original and copy is not original


def test_dicts_of_immutable_values_are_shared_as_shallow_copies() -> None:
    assert reuse_of(dict[str, Point]) is dict
    assert reuse_of(dict[int, Point]) is None  # keys must be strings, as JSON's are


@pytest.mark.parametrize(
    "value_type",
    [Open, Extra, HoldsList, list[Open], list[list[int]], dict[str, list[int]], Any, object],
)
def test_values_that_can_change_in_place_are_decoded_by_each_reader(value_type: Any) -> None:
    assert reuse_of(value_type) is None
