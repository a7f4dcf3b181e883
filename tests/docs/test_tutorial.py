"""The tutorial's Flow (docs/examples/fulfillment.py) does what the tutorial says it does."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from engine import (
    EngineConfig,
    FlowNotActiveOrNotFoundError,
    ManualClock,
    StartFlowOptions,
)
from engine.testing import settle
from tests.conftest import running_engine

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "examples" / "fulfillment.py"
ADDRESS = {"address": "1 Quay Street"}


@pytest.fixture(scope="module")
def tutorial() -> types.ModuleType:
    """Import the tutorial's module from its file, as DEXLITE_REGISTRY would."""
    spec = importlib.util.spec_from_file_location("fulfillment", TUTORIAL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the Steps' annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def manual_config(engine_config: EngineConfig) -> tuple[EngineConfig, ManualClock]:
    """Return a config on a ManualClock (no retention: its hourly check is a deadline too)."""
    clock = ManualClock()
    return dataclasses.replace(engine_config, clock=clock, retention=None), clock


async def test_an_order_is_charged_on_the_retry_and_ships_to_the_changed_address(
    tutorial: types.ModuleType, manual_config: tuple[EngineConfig, ManualClock]
) -> None:
    config, clock = manual_config
    order = {"items": ["kettle", "teapot"], "cents": 4200}
    async with running_engine([tutorial.FulfillmentFlow()], config) as eng:
        await eng.start_flow(
            "FulfillmentFlow", "order-1", order, StartFlowOptions(initial_attributes=ADDRESS)
        )
        await settle(eng)  # the first charge attempt timed out; its retry waits 2 s
        assert (await eng.get_attributes("order-1", ["status"])).values == {"status": "checked"}
        await clock.advance_when_idle(2)
        paid = await eng.get_attributes("order-1", ["status", "charge_id", "receipt"])
        assert paid.values == {
            "status": "paid",
            "charge_id": "charge-order-1",
            "receipt": "2 item(s), 42.00",
        }
        # SendReceipt's branch ended with dead_end; Ship waits out the packing time.
        waiting = await eng.wait_for_flow("order-1")
        assert (waiting.status, waiting.completions) == ("RUNNING", [])
        previous = await eng.invoke_rpc("change_address", "order-1", "9 Harbour Road")
        assert previous == "1 Quay Street"
        await clock.advance_when_idle(tutorial.PACKING_TIME.total_seconds())
        result = await eng.wait_for_flow("order-1")
        with pytest.raises(FlowNotActiveOrNotFoundError):  # a locked RPC needs a running Flow
            await eng.invoke_rpc("change_address", "order-1", "too late")
        found = await eng.search_flows("FlowType = 'FulfillmentFlow' AND keyword1 = 'shipped'")
    assert result.status == "COMPLETED"
    assert [(c.step_type, c.output) for c in result.completions] == [
        ("Ship", "2 item(s) shipped to 9 Harbour Road")
    ]
    assert [info.flow_id for info in found.flows] == ["order-1"]


async def test_a_declined_card_takes_the_failure_route_after_three_attempts(
    tutorial: types.ModuleType, manual_config: tuple[EngineConfig, ManualClock]
) -> None:
    config, clock = manual_config
    order = {"items": ["piano"], "cents": 950_000}
    async with running_engine([tutorial.FulfillmentFlow()], config) as eng:
        await eng.start_flow(
            "FulfillmentFlow", "order-2", order, StartFlowOptions(initial_attributes=ADDRESS)
        )
        await settle(eng)
        await clock.advance_when_idle(2)  # the second attempt
        assert (await eng.wait_for_flow("order-2")).status == "RUNNING"
        await clock.advance_when_idle(4)  # the third, after a doubled interval
        result = await eng.wait_for_flow("order-2")
        status = await eng.get_attributes("order-2", ["status"])
        history = await eng.get_flow_history("order-2")
    assert (result.status, result.error_type, result.error_message) == (
        "FAILED",
        "PaymentDeclinedError",
        "9500.00 is over the card's limit",
    )
    assert status.values == {"status": "payment-failed"}
    failed = [e for e in history.events if e.event_type == "STEP_ATTEMPT_FAILED"]
    assert len(failed) == 2  # the third failure closed the Step and took the route


@pytest.mark.parametrize(
    ("order", "initial", "error"),
    [
        ({"items": [], "cents": 100}, ADDRESS, ("EmptyOrder", "an order needs at least one item")),
        ({"items": ["mug"], "cents": 900}, {}, ("NoAddress", "the order has no delivery address")),
    ],
)
async def test_an_order_that_cannot_ship_fails_at_once(
    tutorial: types.ModuleType,
    engine_config: EngineConfig,
    order: dict[str, object],
    initial: dict[str, str],
    error: tuple[str, str],
) -> None:
    async with running_engine([tutorial.FulfillmentFlow()], engine_config) as eng:
        await eng.start_flow(
            "FulfillmentFlow", "order-3", order, StartFlowOptions(initial_attributes=initial)
        )
        result = await eng.wait_for_flow("order-3", wait_seconds=10)
    assert (result.status, result.error_type, result.error_message) == ("FAILED", *error)
