"""The Python API returns Attribute values decoded with their definitions; REST keeps JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel

from engine import (
    Attribute,
    AttributeMap,
    EngineConfig,
    Flow,
    StartFlowOptions,
    StepList,
)
from tests.conftest import running_engine


class Address(BaseModel):
    city: str
    zip: str


@dataclass
class Point:
    x: int
    y: int


class TypedFlow(Flow[None]):
    blob = Attribute("blob", bytes)
    when = Attribute("when", datetime)
    address = Attribute("address", Address)
    point = Attribute("point", Point)
    marks = AttributeMap("marks", datetime)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


async def test_get_attributes_decodes_every_value_and_the_json_form_stays_wire_json(
    engine_config: EngineConfig,
) -> None:
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    initial = {
        "blob": b"\x00\xffdata",
        "when": at,
        "address": Address(city="Oslo", zip="0150"),
        "point": Point(3, 4),
        "marks/first": at,
    }
    async with running_engine([TypedFlow()], engine_config) as eng:
        await eng.start_flow(TypedFlow, "t", options=StartFlowOptions(initial_attributes=initial))
        typed = await eng.get_attributes("t", ["blob", "when", "address", "point", "marks/first"])
        wire = await eng.get_attributes_json("t", ["blob", "when", "address", "point"])
    assert typed.values == initial
    assert type(typed.values["address"]) is Address and type(typed.values["point"]) is Point
    assert wire.values["address"] == {"city": "Oslo", "zip": "0150"}
    assert wire.values["point"] == {"x": 3, "y": 4}
    assert isinstance(wire.values["when"], str) and isinstance(wire.values["blob"], dict)
