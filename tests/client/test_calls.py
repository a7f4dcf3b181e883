"""Every FlowClient call gives the same answer in process and over REST."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest

import engine
from engine import (
    RPCInvokeOptions,
    ScheduleSpec,
    StartFlowOptions,
    TimeTravelOptions,
    TravelPoint,
)
from tests.client.served_flows import HOUR, ORDERS, Orders, Payload
from tests.support.waiting import eventually

AT = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
PAYLOAD = Payload(name="first", at=AT, data=b"\x00\xffbytes", tags=["a", "b"])


async def _started(flows: engine.FlowClient, flow_id: str) -> str:
    started = await flows.start_flow(Orders, flow_id, PAYLOAD)
    return started.run_id


async def _pending(flows: engine.FlowClient, flow_id: str) -> engine.PendingSteps:
    async def waiting() -> engine.PendingSteps | None:
        found = await flows.list_pending_steps(flow_id)
        return found if found.steps and found.steps[0].phase == "WAITING" else None

    return await eventually(waiting, what="the start Step to wait")


async def test_a_started_flow_is_described_and_found(
    flows: engine.FlowClient, flow_id: str
) -> None:
    started = await flows.start_flow(ORDERS, flow_id, PAYLOAD)
    info = await flows.describe_flow(flow_id)
    await flows.set_attributes(flow_id, {"status": "placed"})
    page = await flows.search_flows(f"state = 'placed' AND FlowId = '{flow_id}'")
    confined = await flows.search_flows(f"FlowId = '{flow_id}'", flow_type="Orders")
    assert started.started and started.flow_id == flow_id
    assert (info.flow_id, info.run_id, info.flow_type, info.status) == (
        flow_id,
        started.run_id,
        "Orders",
        "RUNNING",
    )
    assert info.started_at.tzinfo is not None and info.closed_at is None
    assert [f.run_id for f in page.flows] == [started.run_id]
    assert [f.run_id for f in confined.flows] == [started.run_id]


async def test_an_idempotent_start_answers_the_same_run(
    flows: engine.FlowClient, flow_id: str
) -> None:
    options = StartFlowOptions(request_id="r-1", ignore_already_started=True)
    first = await flows.start_flow("Orders", flow_id, PAYLOAD, options)
    again = await flows.start_flow("Orders", flow_id, PAYLOAD, options)
    assert (first.started, again.started, again.run_id) == (True, False, first.run_id)


async def test_a_stopped_flow_waits_no_longer(flows: engine.FlowClient, flow_id: str) -> None:
    run_id = await _started(flows, flow_id)
    running = await flows.wait_for_flow(flow_id, wait_seconds=0.2)
    stopped = await flows.stop_flow(flow_id, engine.StopType.TERMINATE, "enough")
    result = await flows.wait_for_flow(flow_id, run_id, wait_seconds=5)
    assert running.status == "RUNNING" and stopped == run_id
    assert (result.status, result.completions) == ("TERMINATED", [])


async def test_typed_rpc_input_and_output_round_trip(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await _started(flows, flow_id)
    echoed = await flows.invoke_rpc(ORDERS.echo, flow_id, PAYLOAD)
    by_dict = await flows.invoke_rpc(ORDERS.echo, flow_id, engine.to_json_data(PAYLOAD))
    later = await flows.invoke_rpc(ORDERS.stamp, flow_id, AT)
    by_name = await flows.invoke_rpc("increment", flow_id, 2)
    assert echoed == PAYLOAD and isinstance(echoed, Payload)
    assert by_dict == PAYLOAD and echoed.data == b"\x00\xffbytes"
    assert later == AT + HOUR and isinstance(later, datetime)
    assert by_name == 2


async def test_typed_attributes_read_back_as_written(
    flows: engine.FlowClient, flow_id: str
) -> None:
    run_id = await _started(flows, flow_id)
    written = await flows.set_attributes(
        flow_id,
        {"placed_at": AT, "blob": b"\x01\x02", "payload": PAYLOAD, "notes/a": "note"},
    )
    found = await flows.get_attributes(flow_id, ["placed_at", "blob", "payload", "notes/a"])
    every = await flows.get_attributes(flow_id)
    assert written == (flow_id, run_id)
    assert found.values == {
        "placed_at": AT,
        "blob": b"\x01\x02",
        "payload": PAYLOAD,
        "notes/a": "note",
    }
    assert isinstance(found.values["payload"], Payload)
    assert set(every.values) == {"placed_at", "blob", "payload"}


async def test_invoke_options_load_and_lock_map_instances(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await _started(flows, flow_id)
    await flows.invoke_rpc(
        ORDERS.write_note,
        flow_id,
        "locked",
        options=RPCInvokeOptions(lock_attribute_map_instances=(Orders.notes.lock("a"),)),
    )
    note = await flows.invoke_rpc(
        ORDERS.read_note,
        flow_id,
        "a",
        options=RPCInvokeOptions(load_attribute_map_instances=(Orders.notes.load("a"),)),
    )
    await flows.publish_to_channel(flow_id, Orders.inbox, PAYLOAD, instance="k")
    pending = await flows.invoke_rpc(
        ORDERS.peek_inbox,
        flow_id,
        "k",
        options=RPCInvokeOptions(load_channel_map_instances=(Orders.inbox.load_messages("k"),)),
    )
    assert note == "locked"
    assert pending == [PAYLOAD] and isinstance(pending[0], Payload)


async def test_invocations_that_retry_lock_conflicts_take_turns_and_all_succeed(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await _started(flows, flow_id)
    turns = RPCInvokeOptions(lock_retry=timedelta(seconds=30))
    answers = await asyncio.gather(
        *(flows.invoke_rpc(ORDERS.increment, flow_id, 1, options=turns) for _ in range(20))
    )
    # Each got the counter's lock in its turn: no value lost or seen twice.
    assert sorted(answers) == list(range(1, 21))


async def test_a_lock_retry_out_of_bounds_is_refused_before_the_rpc_runs(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await _started(flows, flow_id)
    for retry in (timedelta(0), timedelta(seconds=61)):
        with pytest.raises(engine.InvalidArgumentError) as refused:
            await flows.invoke_rpc(
                ORDERS.increment, flow_id, 1, options=RPCInvokeOptions(lock_retry=retry)
            )
        assert refused.value.field == "lockRetry"
    assert await flows.invoke_rpc(ORDERS.increment, flow_id, 1) == 1


async def test_an_attribute_match_answers_the_matched_value(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await _started(flows, flow_id)
    missed = await flows.wait_for_attribute_match(flow_id, "counter", "GE", 3, wait_seconds=0.1)
    await flows.invoke_rpc(ORDERS.increment, flow_id, 4)
    matched = await flows.wait_for_attribute_match(
        flow_id, "counter", engine.MatchOperator.GE, 3, wait_seconds=5
    )
    assert (missed.matched, matched.matched, matched.value) == (False, True, 4)


async def test_channel_messages_are_published_listed_and_deleted(
    flows: engine.FlowClient, flow_id: str
) -> None:
    run_id = await _started(flows, flow_id)
    first = await flows.publish_to_channel(flow_id, Orders.inbox, PAYLOAD, instance="k")
    second = await flows.publish_to_channel(flow_id, "inbox", PAYLOAD, instance="k")
    listed = await flows.list_channels(flow_id)
    page = await flows.list_channel_messages(flow_id, Orders.inbox, instance="k", page_size=1)
    await flows.delete_channel_message(flow_id, "inbox", first, instance="k")
    rest = await flows.list_channel_messages(flow_id, "inbox", instance="k")
    assert listed == engine.ChannelList(
        flow_id, run_id, [engine.ChannelInfo("go", None, 0), engine.ChannelInfo("inbox", "k", 2)]
    )
    assert [m.message_id for m in page.messages] == [first] and page.next_page_token
    assert page.messages[0].value == PAYLOAD and page.messages[0].published_at.tzinfo
    assert [(m.message_id, m.value) for m in rest.messages] == [(second, PAYLOAD)]


async def test_a_go_message_completes_the_waiting_step(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await _started(flows, flow_id)
    await flows.publish_to_channel(flow_id, Orders.go, "now")
    result = await flows.wait_for_flow(flow_id, wait_seconds=10)
    history = await flows.get_flow_history(flow_id)
    assert result.status == "COMPLETED"
    assert [(c.step_type, c.step_execution_id, c.output) for c in result.completions] == [
        ("Nap", "Nap-1", "first")
    ]
    assert history.events[0].event_id == 1 and history.events[0].at.tzinfo is not None
    assert history.events[-1].event_type == "FLOW_CLOSED"


async def test_pending_steps_and_skip_timers(flows: engine.FlowClient, flow_id: str) -> None:
    await _started(flows, flow_id)
    pending = await _pending(flows, flow_id)
    [nap] = pending.steps
    fired = await flows.skip_timers(flow_id, nap.step_execution_id)
    result = await flows.wait_for_flow(flow_id, wait_seconds=10)
    assert (nap.step_type, nap.step_execution_id, nap.attempt, nap.channels) == (
        "Nap",
        "Nap-1",
        1,
        ["go"],
    )
    assert len(nap.timers) == 1 and HOUR <= nap.timers[0] - nap.created_at < HOUR * 1.01
    assert (fired, result.status) == (1, "COMPLETED")


async def test_stream_messages_are_written_read_and_listed(
    flows: engine.FlowClient, flow_id: str
) -> None:
    first = await flows.write_stream(flow_id, Orders.progress, PAYLOAD, source="test")
    await flows.write_stream(
        flow_id, "progress", engine.to_json_data(PAYLOAD), source="again", flow_type=Orders
    )
    message = await flows.read_stream(flow_id, Orders.progress, wait_seconds=5)
    after = await flows.read_stream(flow_id, "progress", first, flow_type="Orders")
    page = await flows.list_stream_messages(flow_id, Orders.progress, page_size=1)
    assert message is not None and after is not None
    assert (message.value, message.resume_token, message.source) == (PAYLOAD, first, "test")
    assert isinstance(message.value, Payload) and message.created_at.tzinfo is not None
    assert (after.value, after.source) == (PAYLOAD, "again")
    assert [m.source for m in page.messages] == ["again"] and page.next_page_token


async def test_time_travel_goes_back_and_reads_as_of_an_event(
    flows: engine.FlowClient, flow_id: str
) -> None:
    run_id = await _started(flows, flow_id)
    await flows.set_attributes(flow_id, {"status": "one"})
    await flows.set_attributes(flow_id, {"status": "two"})
    events = (await flows.get_flow_history(flow_id)).events
    first_write = next(e.event_id for e in events if e.event_type == "ATTRIBUTES_SET")
    as_of = await flows.get_attributes(flow_id, ["status"], run_id, as_of_event_id=first_write)
    traveled = await flows.time_travel(
        flow_id,
        TimeTravelOptions(
            run_id=run_id, to=TravelPoint.beginning(), reason="retry", skip_writes_reapply=True
        ),
    )
    now = await flows.get_attributes(flow_id, ["status"])
    old = await flows.describe_flow(flow_id, run_id)
    dry = await flows.time_travel_flows(
        f"FlowId = '{flow_id}'", TravelPoint.beginning(), dry_run=True
    )
    assert as_of.values == {"status": "one"}
    assert (traveled.flow_id, traveled.previous_run_id) == (flow_id, run_id)
    assert traveled.run_id != run_id and now.run_id == traveled.run_id and now.values == {}
    assert old.status == "TERMINATED"
    assert dry.dry_run and dry.matched == [engine.FlowRunRef(flow_id, traveled.run_id)]
    assert (dry.traveled, dry.failed) == ([], [])


async def test_schedules_are_created_described_triggered_and_deleted(
    flows: engine.FlowClient,
) -> None:
    schedule_id = f"s-{uuid.uuid4().hex[:8]}"
    spec = ScheduleSpec(
        schedule_id=schedule_id,
        flow_type="Orders",
        input=engine.to_json_data(PAYLOAD),
        every=timedelta(hours=1),
        start_options=StartFlowOptions(initial_attributes={"status": "scheduled"}),
        paused=True,
        note="held",
    )
    created = await flows.create_schedule(spec)
    described = await flows.describe_schedule(schedule_id)
    triggered = await flows.trigger_schedule(schedule_id)
    unpaused = await flows.unpause_schedule(schedule_id, "go")
    listed = await flows.list_schedules()
    await flows.delete_schedule(schedule_id)
    # The input comes back as its JSON data with bytes restored, in process as over REST.
    stored = dataclasses.replace(spec, input={**engine.to_json_data(PAYLOAD), "data": PAYLOAD.data})
    assert created.spec == stored and described.spec == stored
    assert created.next_action_times == [] and created.created_at.tzinfo is not None
    assert triggered.started and triggered.flow_id.startswith(f"{schedule_id}-")
    status = await flows.get_attributes(triggered.flow_id, ["status"])
    assert status.values == {"status": "scheduled"}
    assert (unpaused.spec.paused, unpaused.spec.note, len(unpaused.next_action_times)) == (
        False,
        "go",
        5,
    )
    assert schedule_id in [s.schedule_id for s in listed.schedules]
    assert [a.flow_id for a in unpaused.recent_actions] == [triggered.flow_id]


async def test_flow_types_describe_the_registry(flows: engine.FlowClient) -> None:
    if hasattr(flows, "fetch_flow_types"):
        await flows.fetch_flow_types()
    [orders] = flows.list_flow_types()
    assert orders.flow_type == "Orders" and orders.start_step == "Nap"
    assert "echo" in [r.name for r in orders.rpcs]
