"""Time travel's five points, each resolved to the commit DESIGN §13 names, and the new run's
history: a copy of the old run's events up to the point, then TIME_TRAVELED.

One OrderFlow run is built once per test with a known history; forks (which leave it
untouched) take it to each point, so every point is checked against the same run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine import (
    Engine,
    EngineConfig,
    FailedPreconditionError,
    FlowAlreadyStartedError,
    FlowNotFoundError,
    InvalidArgumentError,
    StepMethod,
    TimeTravelOptions,
    TravelPoint,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support import travel_app
from tests.support.travel_app import OrderFlow, flows


@pytest.fixture(autouse=True)
def _charges_succeed() -> None:
    travel_app.BEHAVIOUR["charge"] = "ok"


async def events(eng: Engine, flow_id: str, run_id: str | None = None) -> list[Any]:
    page = await eng.get_flow_history(flow_id, run_id=run_id, page_size=1000)
    return page.events


def kinds(found: list[Any]) -> list[str]:
    return [str(e.event_type) for e in found]


async def declined_order(eng: Engine, flow_id: str = "order") -> str:
    """Run an order to FAILED: reserve, a note, payment p-1 consumed, Charge declines.

    Its events, one commit each unless said: 1 FLOW_STARTED, 2 STEP_CLOSED Reserve-1 (which
    queued Charge-1), 3 STEP_WAITING Charge-1 (its wait began), 4 RPC_COMMITTED (the note), 5
    CHANNEL_PUBLISHED p-1, 6 CHANNEL_CONSUMED (the wait met: Charge-1 moves to execute), 7
    STEP_CLOSED Charge-1 and 8 FLOW_CLOSED (one commit).
    """
    travel_app.BEHAVIOUR["charge"] = "decline"
    started = await eng.start_flow(OrderFlow, flow_id, "o-1")
    await settle(eng)  # Reserve committed; Charge-1 waits for a payment
    await eng.invoke_rpc("set_note", flow_id, "gift wrap")
    await eng.publish_to_channel(flow_id, "payments", "p-1")
    result = await eng.wait_for_flow(flow_id, wait_seconds=10)
    assert result.status == "FAILED", result
    travel_app.BEHAVIOUR["charge"] = "ok"
    assert kinds(await events(eng, flow_id)) == [
        "FLOW_STARTED",
        "STEP_CLOSED",
        "STEP_WAITING",
        "RPC_COMMITTED",
        "CHANNEL_PUBLISHED",
        "CHANNEL_CONSUMED",
        "STEP_CLOSED",
        "FLOW_CLOSED",
    ]
    return started.run_id


@pytest.fixture
async def eng(engine_config: EngineConfig) -> AsyncIterator[Engine]:
    async with running_engine(flows(), engine_config) as running:
        yield running


async def fork(eng: Engine, run_id: str, to: TravelPoint, target: str, **more: Any) -> str:
    options = TimeTravelOptions(run_id=run_id, to=to, fork_to_flow_id=target, **more)
    result = await eng.time_travel("order", options)
    assert (result.flow_id, result.previous_run_id) == (target, run_id)
    return result.run_id


async def test_each_point_kind_restores_the_state_right_after_its_commit(eng: Engine) -> None:
    run_id = await declined_order(eng)
    original = await events(eng, "order")
    points = {
        "begin": TravelPoint.beginning(),
        "event4": TravelPoint.event(4),
        "time5": TravelPoint.time(original[4].at),
        "charge": TravelPoint.step_type("Charge"),
        "wait": TravelPoint.step_execution("Charge-1"),
        "execute": TravelPoint.step_execution("Charge-1", StepMethod.EXECUTE),
    }
    copied = {"begin": 1, "event4": 4, "time5": 5, "charge": 2, "wait": 2, "execute": 6}
    for name, point in points.items():
        new_run = await fork(eng, run_id, point, f"fork-{name}", skip_writes_reapply=True)
        found = await events(eng, f"fork-{name}", new_run)
        n = copied[name]
        # The copy keeps each event's number, type, time and details.
        assert found[:n] == original[:n], name
        assert found[n].event_type == "TIME_TRAVELED", name
        assert found[n].details == {
            "previousRunId": run_id,
            "previousFlowId": "order",
            "to": found[n].details["to"],
            "reason": "",
            "skipWritesReapply": True,
        }
    await settle(eng)
    # BEGINNING: Reserve-1 runs again from the start (no note, no payment).
    begin = await eng.wait_for_flow("fork-begin")
    assert begin.status == "RUNNING"
    assert (await eng.get_attributes("fork-begin")).values == {"status": "reserved"}
    # EVENT 4 (the note's commit): Charge-1 waits again; the note was written by then.
    assert (await eng.get_attributes("fork-event4")).values == {
        "status": "reserved",
        "note": "gift wrap",
    }
    # TIME of event 5 (the payment's publication): the payment is pending again, same ID, and
    # the re-entered wait consumes it at once; Charge now succeeds.
    fifth = original[4].details["messageId"]
    done = await eng.wait_for_flow("fork-time5", wait_seconds=10)
    assert done.status == "COMPLETED", done
    consumed = [e for e in await events(eng, "fork-time5") if e.event_type == "CHANNEL_CONSUMED"]
    assert [e.details["messageIds"] for e in consumed] == [[fifth]]
    # STEP_TYPE and STEP_EXECUTION WAIT_FOR name the commit that queued Charge-1 (Reserve's).
    for name in ("charge", "wait"):
        assert (await eng.get_attributes(f"fork-{name}")).values == {"status": "reserved"}
        page = await eng.list_channel_messages(f"fork-{name}", "payments")
        assert page.messages == [], name
    # EXECUTE: Charge-1 runs execute at once with the payment it consumed, which is not
    # pending any more; its ID stays Charge-1.
    executed = await eng.wait_for_flow("fork-execute", wait_seconds=10)
    assert executed.status == "COMPLETED"
    assert executed.completions[0].output == {"order": "o-1", "charged": "charged:p-1"}
    after = await events(eng, "fork-execute")
    assert [(e.event_type, e.details.get("stepExecutionId")) for e in after[7:]] == [
        ("STEP_CLOSED", "Charge-1"),
        ("STEP_CLOSED", "Ship-1"),
        ("FLOW_CLOSED", None),
    ]
    # The forks left the original alone.
    assert await events(eng, "order") == original
    assert (await eng.describe_flow("order")).run_id == run_id


async def test_a_traveled_run_travels_again_to_points_before_its_first_travel(
    eng: Engine,
) -> None:
    run_id = await declined_order(eng)
    original = await events(eng, "order")
    first = await eng.time_travel(
        "order",
        TimeTravelOptions(
            run_id=run_id, to=TravelPoint.event(4), reason="fix", skip_writes_reapply=True
        ),
    )
    assert (await eng.wait_for_flow("order", wait_seconds=10)).status == "RUNNING"
    # STEP_TYPE Charge in the new run: its copied commit (2), not the travel's (5), which also
    # queued Charge-1 again: the earlier one is meant.
    second = await eng.time_travel(
        "order", TimeTravelOptions(run_id=first.run_id, to=TravelPoint.step_type("Charge"))
    )
    found = await events(eng, "order", second.run_id)
    assert found[:2] == original[:2]
    assert found[2].event_type == "TIME_TRAVELED"
    assert found[2].details["previousRunId"] == first.run_id
    # BEGINNING of the third run is still the original start.
    third = await eng.time_travel(
        "order", TimeTravelOptions(run_id=second.run_id, to=TravelPoint.beginning())
    )
    found = await events(eng, "order", third.run_id)
    assert found[0] == original[0]
    assert [e.event_type for e in found[:2]] == ["FLOW_STARTED", "TIME_TRAVELED"]
    # Every run stays readable by its ID; only the latest is RUNNING.
    statuses = [(await eng.describe_flow("order", r)).status for r in (run_id, first.run_id)]
    assert statuses == ["FAILED", "TERMINATED"]
    assert (await eng.describe_flow("order")).run_id == third.run_id


async def test_a_point_the_run_does_not_have_is_refused_naming_the_field(eng: Engine) -> None:
    run_id = await declined_order(eng)
    before = await events(eng, "order")
    refused = {
        "to.eventId": TravelPoint.event(99),
        "to.stepType": TravelPoint.step_type("Refund"),  # not a Step of OrderFlow
        "to.stepExecutionId": TravelPoint.step_execution("Ship-1"),  # Ship never ran
        "to.at": TravelPoint.time(before[0].at.replace(year=2001)),
    }
    for field, point in refused.items():
        with pytest.raises(InvalidArgumentError) as caught:
            await eng.time_travel("order", TimeTravelOptions(run_id=run_id, to=point))
        assert caught.value.field == field, caught.value
    with pytest.raises(FlowNotFoundError):
        await eng.time_travel("missing", TimeTravelOptions(run_id=run_id))
    with pytest.raises(FlowNotFoundError):
        await eng.time_travel("order", TimeTravelOptions(run_id="no-such-run"))
    # Nothing changed: the same run, the same history.
    assert (await eng.describe_flow("order")).run_id == run_id
    assert await events(eng, "order") == before


async def test_execute_of_an_execution_still_waiting_is_refused(eng: Engine) -> None:
    started = await eng.start_flow(OrderFlow, "order", "o-1")
    await settle(eng)  # Charge-1 waits for a payment
    with pytest.raises(InvalidArgumentError) as caught:
        await eng.time_travel(
            "order",
            TimeTravelOptions(
                run_id=started.run_id,
                to=TravelPoint.step_execution("Charge-1", StepMethod.EXECUTE),
            ),
        )
    assert caught.value.field == "to.method"
    assert (await eng.describe_flow("order")).status == "RUNNING"


async def test_only_the_latest_run_travels_and_a_fork_needs_a_free_flow_id(eng: Engine) -> None:
    run_id = await declined_order(eng)
    newer = await eng.time_travel("order", TimeTravelOptions(run_id=run_id))
    with pytest.raises(FailedPreconditionError) as caught:
        await eng.time_travel("order", TimeTravelOptions(run_id=run_id))
    assert caught.value.field == "runId"
    # A fork onto a Flow ID with a running run is refused; the source keeps running.
    await eng.start_flow(OrderFlow, "busy", "o-2")
    with pytest.raises(FlowAlreadyStartedError):
        await eng.time_travel(
            "order", TimeTravelOptions(run_id=newer.run_id, fork_to_flow_id="busy")
        )
    with pytest.raises(InvalidArgumentError) as same:
        await eng.time_travel(
            "order", TimeTravelOptions(run_id=newer.run_id, fork_to_flow_id="order")
        )
    assert same.value.field == "forkToFlowId"
    # The refused forks left the new run alone: it charges again (charges succeed now) and
    # completes. (Whether it is still running when the forks are refused is a race.)
    result = await eng.wait_for_flow("order", wait_seconds=10)
    assert (result.run_id, result.status) == (newer.run_id, "COMPLETED"), result


async def test_a_flow_type_without_a_change_log_cannot_travel_or_read_its_past(
    eng: Engine,
) -> None:
    started = await eng.start_flow("NoLogFlow", "nolog")
    assert await eng.invoke_rpc("bump", "nolog") == 1
    with pytest.raises(FailedPreconditionError):
        await eng.time_travel("nolog", TimeTravelOptions(run_id=started.run_id))
    with pytest.raises(FailedPreconditionError):
        await eng.get_attributes("nolog", as_of_event_id=1)
    assert (await eng.get_attributes("nolog")).values == {"count": 1}
    assert (await eng.describe_flow("nolog")).run_id == started.run_id
