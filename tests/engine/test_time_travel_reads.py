"""As-of reads (``asOfEventId``) against a replay of the run's writes, and time travel by a
SearchFlows query (with its dry run, over Flows of two types)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine import (
    Engine,
    EngineConfig,
    FlowNotFoundError,
    InvalidArgumentError,
    StartFlowOptions,
    TravelPoint,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support import travel_app
from tests.support.travel_app import OrderFlow, RefundFlow, flows


@pytest.fixture(autouse=True)
def _charges_succeed() -> None:
    travel_app.BEHAVIOUR["charge"] = "ok"


@pytest.fixture
async def eng(engine_config: EngineConfig) -> AsyncIterator[Engine]:
    async with running_engine(flows(), engine_config) as running:
        yield running


async def event_count(eng: Engine, flow_id: str, run_id: str | None = None) -> int:
    return len((await eng.get_flow_history(flow_id, run_id=run_id, page_size=1000)).events)


async def test_an_as_of_read_at_every_event_equals_a_replay_of_the_writes(eng: Engine) -> None:
    rng = random.Random(25)
    options = StartFlowOptions(initial_attributes={"note": "start", "items/a": 1})
    started = await eng.start_flow(OrderFlow, "order", "o-1", options)
    await settle(eng)  # Reserve writes status and items/o-1; Charge-1 waits
    # The replay: what each commit left, applied to a model as the writes went.
    model: dict[str, Any] = {"note": "start", "items/a": 1, "status": "reserved", "items/o-1": 1}
    after: list[tuple[int, dict[str, Any]]] = [(await event_count(eng, "order"), dict(model))]
    for n in range(40):
        kind = rng.choice(["note", "unset", "add", "set", "items"])
        if kind == "note":
            await eng.invoke_rpc("set_note", "order", f"n{n}")
            model["note"] = f"n{n}"
        elif kind == "unset":
            await eng.invoke_rpc("set_note", "order", None)
            model.pop("note", None)
        elif kind == "add":
            model["total"] = await eng.invoke_rpc("add", "order", n)
        elif kind == "set":
            await eng.set_attributes("order", {"note": f"s{n}", "total": -n})
            model.update(note=f"s{n}", total=-n)
        else:
            key = rng.choice(["a", "b"])
            value = None if rng.random() < 0.3 else n
            await eng.set_attributes("order", {f"items/{key}": value})
            if value is None:
                model.pop(f"items/{key}", None)
            else:
                model[f"items/{key}"] = value
        after.append((await event_count(eng, "order"), dict(model)))
    keys = ["note", "total", "status", "items/a", "items/b", "items/o-1"]
    last = 0
    for count, expected in after:
        # Every event of a commit reads the state right after that commit.
        for event_id in range(last + 1, count + 1):
            found = await eng.get_attributes("order", keys, as_of_event_id=event_id)
            want = {k: v for k, v in expected.items() if k in keys}
            if event_id <= 2:  # the start's commit, then Reserve's
                want = (
                    {"note": "start", "items/a": 1}
                    if event_id == 1
                    else {"note": "start", "items/a": 1, "status": "reserved", "items/o-1": 1}
                )
            assert found.values == want, event_id
            assert found.run_id == started.run_id
        last = count
    # With no names: every singleton Attribute, as get_attributes does; JSON on the wire form.
    whole = await eng.get_attributes_json("order", as_of_event_id=last)
    assert whole.values == {k: v for k, v in after[-1][1].items() if "/" not in k}
    assert (await eng.get_attributes("order")).values == whole.values


async def test_an_as_of_read_refuses_an_event_or_run_it_does_not_have(eng: Engine) -> None:
    started = await eng.start_flow(OrderFlow, "order", "o-1")
    await settle(eng)
    count = await event_count(eng, "order")
    with pytest.raises(InvalidArgumentError) as caught:
        await eng.get_attributes("order", as_of_event_id=count + 1)
    assert caught.value.field == "asOfEventId"
    with pytest.raises(InvalidArgumentError):
        await eng.get_attributes("order", as_of_event_id=0)
    with pytest.raises(FlowNotFoundError):
        await eng.get_attributes("order", run_id="other", as_of_event_id=1)
    with pytest.raises(InvalidArgumentError) as name:
        await eng.get_attributes("order", ["nope"], as_of_event_id=1)
    assert name.value.field == "name"
    found = await eng.get_attributes("order", run_id=started.run_id, as_of_event_id=count)
    assert found.values == {"status": "reserved"}


async def test_a_travel_by_query_moves_each_latest_match_once_and_lists_failures(
    eng: Engine,
) -> None:
    travel_app.BEHAVIOUR["charge"] = "decline"
    for n in range(3):
        await eng.start_flow(OrderFlow, f"order-{n}", f"o-{n}")
        await eng.publish_to_channel(f"order-{n}", "payments", f"p-{n}")
    await eng.start_flow(RefundFlow, "refund-0", "r-0")
    await settle(eng)
    # A RUNNING order is not matched; the refund completed, so a type-crossing query sees it.
    await eng.start_flow(OrderFlow, "order-running", "o-r")
    await settle(eng)
    query = "(FlowType = 'OrderFlow' AND Status = 'FAILED') OR FlowType = 'RefundFlow'"
    to = TravelPoint.step_type("Charge")
    dry = await eng.time_travel_flows(query, to, dry_run=True)
    assert dry.dry_run is True
    assert sorted(m.flow_id for m in dry.matched) == ["order-0", "order-1", "order-2", "refund-0"]
    assert (dry.traveled, dry.failed) == ([], [])
    # The dry run changed nothing.
    for n in range(3):
        assert (await eng.describe_flow(f"order-{n}")).status == "FAILED"
    travel_app.BEHAVIOUR["charge"] = "ok"  # the fix is deployed: travel them back
    done = await eng.time_travel_flows(query, to, reason="ChargeCard fixed", limit=10)
    assert sorted(t.flow_id for t in done.traveled) == ["order-0", "order-1", "order-2"]
    [failure] = done.failed
    assert (failure.flow_id, failure.code) == ("refund-0", "INVALID_ARGUMENT")
    assert failure.detail == "to.stepType: Flow type RefundFlow has no Step type Charge"
    for traveled in done.traveled:
        result = await eng.wait_for_flow(traveled.flow_id, wait_seconds=10)
        assert (result.run_id, result.status) == (traveled.run_id, "COMPLETED")
        # Reapplied, the client's payment is pending again and charged.
        number = traveled.flow_id.rsplit("-", 1)[1]
        assert result.completions[0].output["charged"] == f"charged:p-{number}"
    # Traveled once: their old runs still match, but are not the latest any more.
    again = await eng.time_travel_flows(query, to, dry_run=True)
    assert [m.flow_id for m in again.matched] == ["refund-0"]
    # limit bounds the matches; a point other than BEGINNING and STEP_TYPE is refused.
    assert len((await eng.time_travel_flows("", to, dry_run=True, limit=2)).matched) == 2
    with pytest.raises(InvalidArgumentError) as caught:
        await eng.time_travel_flows(query, TravelPoint.event(1))
    assert caught.value.field == "to.kind"
    with pytest.raises(InvalidArgumentError) as limit:
        await eng.time_travel_flows(query, to, limit=0)
    assert limit.value.field == "limit"
    assert (await eng.describe_flow("order-running")).status == "RUNNING"
    # A traveled run's old run is readable and unchanged.
    for traveled in done.traveled:
        old = await eng.describe_flow(traveled.flow_id, run_id=traveled.previous_run_id)
        assert old.status == "FAILED"
