"""Time travel of a run: what happens to the run it leaves (closed as TERMINATED, its attempt
canceled and discarded, its locks freed, its waiters told), what the new run keeps (outside
writes reapplied or skipped, hard-delete values never restored, timeouts and Timers anew), and
forks, which leave the original alone."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Context,
    Engine,
    EngineConfig,
    Flow,
    ManualClock,
    RPCLockConflictError,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    Timer,
    TimeTravelOptions,
    TravelPoint,
    Wait,
    graceful_complete,
)
from engine.testing import settle, waiting_calls
from tests.conftest import running_engine
from tests.support import travel_app
from tests.support.travel_app import Hold, LockFlow, OrderFlow, flows
from tests.support.waiting import eventually


@pytest.fixture(autouse=True)
def _reset() -> None:
    travel_app.BEHAVIOUR["charge"] = "ok"


@pytest.fixture
def hold() -> Hold:
    """The test's own Hold, handed to the LockFlow ``eng`` registers."""
    return Hold()


@pytest.fixture
async def eng(engine_config: EngineConfig, hold: Hold) -> AsyncIterator[Engine]:
    async with running_engine(flows(hold), engine_config) as running:
        yield running


async def events(eng: Engine, flow_id: str, run_id: str | None = None) -> list[Any]:
    return (await eng.get_flow_history(flow_id, run_id=run_id, page_size=1000)).events


async def test_a_running_run_closes_as_terminated_and_its_attempt_is_discarded(
    eng: Engine, hold: Hold
) -> None:
    gate = hold.gates["h"] = threading.Event()
    started = await eng.start_flow(LockFlow, "locked", "h")
    await eventually(lambda: hold.calls == ["h"], what="HoldStep's first attempt")
    # HoldStep-1 runs and holds the ``total`` lock: an RPC on it conflicts.
    with pytest.raises(RPCLockConflictError):
        await eng.invoke_rpc("add", "locked", 5)
    waiting = asyncio.create_task(eng.wait_for_flow("locked", started.run_id, wait_seconds=30))
    await eventually(lambda: waiting_calls(eng).flow_results == 1, what="the waitForFlow call")
    traveled = await eng.time_travel(
        "locked", TimeTravelOptions(run_id=started.run_id, reason="stuck")
    )
    old = await waiting
    assert (old.run_id, old.status) == (started.run_id, "TERMINATED")
    assert old.error_message == "time travel: stuck"
    closed = (await events(eng, "locked", started.run_id))[-1]
    assert (closed.event_type, closed.details["reason"]) == ("FLOW_CLOSED", "time travel")
    # The canceled attempt returns now (a ``def`` handler runs on): its write and decision
    # are discarded, its lock goes, and the new run's HoldStep-1 takes it and completes.
    gate.set()
    new = await eng.wait_for_flow("locked", wait_seconds=10)
    assert (new.run_id, new.status) == (traveled.run_id, "COMPLETED")
    assert [c.output for c in new.completions] == ["done"]
    await settle(eng)
    assert (await eng.get_attributes("locked", run_id=started.run_id)).values == {}
    assert (await eng.get_attributes("locked")).values == {"total": 1}
    assert (await eng.wait_for_flow("locked", started.run_id)).status == "TERMINATED"
    assert hold.calls == ["h", "h"]


async def test_outside_writes_after_the_point_are_reapplied_in_commit_order(eng: Engine) -> None:
    started = await eng.start_flow(OrderFlow, "order", "o-1")
    await settle(eng)  # event 3: Charge-1 waits for a payment
    await eng.invoke_rpc("set_note", "order", "first")  # 4
    await eng.set_attributes("order", {"note": "second", "items/extra": 7})  # 5
    await eng.invoke_rpc("add", "order", 3)  # 6
    kept = await eng.publish_to_channel("order", "mail", "m-1")  # 7
    doomed = await eng.publish_to_channel("order", "mail", "m-2")  # 8
    await eng.delete_channel_message("order", "mail", doomed)  # 9
    await eng.invoke_rpc("pay", "order", "p-rpc")  # 10, 11; the wait consumes it
    result = await eng.wait_for_flow("order", wait_seconds=10)
    assert result.status == "COMPLETED"
    history = await events(eng, "order", started.run_id)
    paid = history[9].details["messageId"]
    # Back to before Charge-1's wait_for (commit 2), applying again what came from outside.
    again = await eng.time_travel(
        "order",
        TimeTravelOptions(run_id=started.run_id, to=TravelPoint.step_type("Charge"), reason="r"),
    )
    found = await events(eng, "order", again.run_id)
    assert [e.event_type for e in found[:3]] == ["FLOW_STARTED", "STEP_CLOSED", "TIME_TRAVELED"]
    reapplied = [e.details for e in found if e.event_type == "WRITES_REAPPLIED"]
    assert [e.event_type for e in found[3 : 3 + len(reapplied)]] == ["WRITES_REAPPLIED"] * 7

    def mail(message_id: str) -> list[dict[str, str]]:
        return [{"channel": "mail", "messageId": message_id}]

    assert [(d["attributes"], d["published"], d["deleted"]) for d in reapplied] == [
        (["note"], [], []),
        (["items/extra", "note"], [], []),
        (["total"], [], []),
        ([], mail(kept), []),
        ([], mail(doomed), []),
        ([], [], mail(doomed)),
        ([], [{"channel": "payments", "messageId": paid}], []),
    ]
    # Each names the first event of the commit it came from.
    assert [d["sourceEventId"] for d in reapplied] == [4, 5, 6, 7, 8, 9, 10]
    # The new run: the writes as last written, m-1 pending under its ID, and the payment
    # pending again until the re-entered wait consumed it.
    done = await eng.wait_for_flow("order", wait_seconds=10)
    assert (done.run_id, done.status) == (again.run_id, "COMPLETED")
    assert done.completions[0].output == {"order": "o-1", "charged": "charged:p-rpc"}
    consumed = [e.details for e in await events(eng, "order") if e.event_type == "CHANNEL_CONSUMED"]
    assert [c["messageIds"] for c in consumed] == [[paid]]
    values = await eng.get_attributes("order", ["note", "total", "items/extra"])
    assert values.values == {"note": "second", "total": 3, "items/extra": 7}
    pending = await eng.list_channel_messages("order", "mail")
    assert [(m.message_id, m.value) for m in pending.messages] == [(kept, "m-1")]


async def test_skip_writes_reapply_leaves_out_what_came_from_outside(eng: Engine) -> None:
    started = await eng.start_flow(OrderFlow, "order", "o-1")
    await settle(eng)
    await eng.invoke_rpc("set_note", "order", "after the point")
    await eng.publish_to_channel("order", "payments", "p-1")
    assert (await eng.wait_for_flow("order", wait_seconds=10)).status == "COMPLETED"
    again = await eng.time_travel(
        "order",
        TimeTravelOptions(
            run_id=started.run_id, to=TravelPoint.step_type("Charge"), skip_writes_reapply=True
        ),
    )
    await settle(eng)
    found = await events(eng, "order", again.run_id)
    assert "WRITES_REAPPLIED" not in [e.event_type for e in found]
    assert found[2].details["skipWritesReapply"] is True
    assert (await eng.get_attributes("order", ["note"])).values == {}
    assert (await eng.list_channel_messages("order", "payments")).messages == []
    # Charge-1 waits for a payment again.
    assert (await eng.describe_flow("order")).status == "RUNNING"


async def test_hard_delete_values_are_never_restored_nor_copied_to_a_fork(eng: Engine) -> None:
    options = StartFlowOptions(initial_attributes={"secret": "s-1"})
    started = await eng.start_flow(OrderFlow, "order", "o-1", options)
    await settle(eng)
    assert (await eng.get_attributes("order", ["secret"])).values == {"secret": "s-1"}
    await eng.invoke_rpc("forget", "order")  # deleted for good
    assert (await eng.get_attributes("order", ["secret"])).values == {}
    # Neither an as-of read of the start nor a travel back to it brings it back.
    assert (await eng.get_attributes("order", ["secret"], as_of_event_id=1)).values == {}
    fork = await eng.time_travel(
        "order", TimeTravelOptions(run_id=started.run_id, fork_to_flow_id="order-copy")
    )
    back = await eng.time_travel("order", TimeTravelOptions(run_id=started.run_id))
    await settle(eng)
    assert (await eng.get_attributes("order", ["secret"])).values == {}
    assert (await eng.get_attributes("order-copy", ["secret"])).values == {}
    # A value written later is the Flow ID's one value: the new run reads it, the fork not.
    await eng.set_attributes("order", {"secret": "s-2"})
    assert (await eng.get_attributes("order", ["secret"])).values == {"secret": "s-2"}
    assert (await eng.get_attributes("order-copy", ["secret"])).values == {}
    assert (fork.flow_id, back.flow_id) == ("order-copy", "order")


async def test_a_fork_leaves_the_original_running_and_untouched(eng: Engine) -> None:
    started = await eng.start_flow(OrderFlow, "order", "o-1")
    await settle(eng)
    await eng.invoke_rpc("set_note", "order", "kept")
    before = await events(eng, "order")
    fork = await eng.time_travel(
        "order",
        TimeTravelOptions(
            run_id=started.run_id, to=TravelPoint.event(3), fork_to_flow_id="order-fork"
        ),
    )
    await eng.publish_to_channel("order-fork", "payments", "p-fork")
    done = await eng.wait_for_flow("order-fork", wait_seconds=10)
    assert (done.run_id, done.status) == (fork.run_id, "COMPLETED")
    assert (await eng.get_attributes("order-fork", ["note"])).values == {"note": "kept"}
    # The original: the same run, still waiting, the same history.
    info = await eng.describe_flow("order")
    assert (info.run_id, info.status) == (started.run_id, "RUNNING")
    assert await events(eng, "order") == before
    forked = await eng.describe_flow("order-fork")
    assert (forked.flow_type, forked.parent_flow_id) == ("OrderFlow", None)


# -- time, on a manual clock -------------------------------------------------------------------


class Nap(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=30)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("rested")


class NapFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Nap())


def manual(config: EngineConfig) -> tuple[EngineConfig, ManualClock]:
    clock = ManualClock()
    return dataclasses.replace(config, clock=clock, retention=None), clock


async def test_timers_of_a_reentered_wait_and_the_flow_timeout_count_again_from_the_travel(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([NapFlow()], config) as eng:
        options = StartFlowOptions(timeout=timedelta(seconds=60))
        started = await eng.start_flow(NapFlow, "nap", None, options)
        await clock.advance_when_idle(20)  # the Timer would fire at 30 s, the timeout at 60
        traveled = await eng.time_travel(
            "nap", TimeTravelOptions(run_id=started.run_id, to=TravelPoint.step_type(Nap))
        )
        await clock.advance_when_idle(20)  # 40 s: the old Timer's time has passed
        assert (await eng.wait_for_flow("nap")).status == "RUNNING"
        await clock.advance_when_idle(10)  # 30 s after the travel: the new Timer fires
        result = await eng.wait_for_flow("nap")
        assert (result.run_id, result.status) == (traveled.run_id, "COMPLETED")

        # The Flow timeout too: 60 s from the travel, not from the start.
        second = await eng.start_flow(
            NapFlow, "late", None, StartFlowOptions(timeout=timedelta(seconds=60))
        )
        await eng.time_travel("late", TimeTravelOptions(run_id=second.run_id))
        await clock.advance_when_idle(29)
        newer = await eng.time_travel(
            "late",
            TimeTravelOptions(
                run_id=(await eng.describe_flow("late")).run_id, to=TravelPoint.beginning()
            ),
        )
        await clock.advance_when_idle(29)  # 58 s after the start: no Timer fired yet
        assert (await eng.wait_for_flow("late")).status == "RUNNING"
        await clock.advance_when_idle(2)  # 31 s after the last travel: its Timer fires
        assert (await eng.wait_for_flow("late")).run_id == newer.run_id
        assert (await eng.wait_for_flow("late")).status == "COMPLETED"
