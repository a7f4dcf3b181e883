"""The Python API returns Attribute values decoded with their definitions; REST keeps JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from engine import (
    Attribute,
    AttributeMap,
    EngineConfig,
    FailedPreconditionError,
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


class LabelFlowV1(Flow[None]):
    size = Attribute("size", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()


class LabelFlowV2(Flow[None]):
    """The same Flow type after its Attribute's declared type changed from str to int."""

    size = Attribute("size", int)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @classmethod
    def flow_type(cls) -> str:
        return "LabelFlowV1"


async def test_a_stored_value_its_changed_definition_refuses_is_an_engine_error_naming_it(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([LabelFlowV1()], engine_config) as eng:
        await eng.start_flow(
            LabelFlowV1, "label", None, StartFlowOptions(initial_attributes={"size": "large"})
        )
    async with running_engine([LabelFlowV2()], engine_config) as eng:
        with pytest.raises(FailedPreconditionError) as refused:
            await eng.get_attributes("label", ["size"])
        raw = await eng.get_attributes_json("label", ["size"])
    assert refused.value.field == "size"
    assert refused.value.detail.startswith(
        "the stored value of Attribute size no longer decodes as its declared type int"
    )
    assert raw.values == {"size": "large"}
