"""A hard-delete Attribute holds string and object values only (seed 002: "Numeric and Boolean
value types are rejected"): a declaration loose enough to admit numbers (Any, object, an Enum
of numbers) passes the Registry, so each value is checked when it is written."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeMap,
    Context,
    EngineConfig,
    Flow,
    InvalidArgumentError,
    RPCResult,
    StartFlowOptions,
    StepList,
    rpc,
)
from tests.conftest import running_engine


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


class LooseVaultFlow(Flow[None]):
    anything = Attribute("anything", Any, hard_delete_on_null=True)
    thing = Attribute("thing", object, hard_delete_on_null=True)
    level = Attribute("level", Level, hard_delete_on_null=True)
    notes = AttributeMap("notes", Any, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def store(self, context: Context, input: Any) -> RPCResult[None]:
        self.anything.set(context, input)
        return RPCResult(None)


async def test_numbers_and_booleans_are_refused_when_written(engine_config: EngineConfig) -> None:
    async with running_engine([LooseVaultFlow()], engine_config) as eng:
        await eng.start_flow(LooseVaultFlow, "vault")
        refused = []
        for values in (
            {"anything": 5},
            {"anything": True},
            {"thing": 2.5},
            {"level": Level.HIGH},
            {"notes/k": 0},
        ):
            with pytest.raises(InvalidArgumentError) as error:
                await eng.set_attributes("vault", values)
            refused.append((error.value.field, error.value.detail))
        with pytest.raises(InvalidArgumentError) as at_start:
            await eng.start_flow(
                LooseVaultFlow, "vault-2", options=StartFlowOptions(initial_attributes={"thing": 1})
            )
        with pytest.raises(InvalidArgumentError) as by_rpc:  # staging its writes refuses it
            await eng.invoke_rpc("store", "vault", 7)
        await eng.set_attributes("vault", {"anything": {"pin": "0000"}, "notes/k": "text"})
        kept = await eng.get_attributes("vault", ["anything", "notes/k"])
    assert [field for field, _ in refused] == ["anything", "anything", "thing", "level", "notes/k"]
    assert refused[0][1] == (
        "hard-delete Attribute anything holds string or object values only, not a number or a "
        "Boolean (got int 5)"
    )
    assert at_start.value.field == "thing"
    assert by_rpc.value.field == "anything"
    assert kept.values == {"anything": {"pin": "0000"}, "notes/k": "text"}
