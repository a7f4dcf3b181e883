"""Every error the server answers with is raised as the engine's own class, with its fields,
in process and over REST alike."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import engine
from engine import (
    ChannelMessageNotFoundError,
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowTypeNotFoundError,
    InvalidArgumentError,
    InvalidPageTokenError,
    InvalidQueryError,
    RPCHandlerError,
    RPCLockConflictError,
    RPCNotFoundError,
    ScheduleAlreadyExistsError,
    ScheduleNotFoundError,
    StartFlowOptions,
    TimeTravelOptions,
    TravelPoint,
)
from tests.client.served_flows import ORDERS, Orders, Payload
from tests.client.test_calls import PAYLOAD
from tests.support.waiting import eventually


async def test_a_missing_flow_is_flow_not_found(flows: engine.FlowClient, flow_id: str) -> None:
    with pytest.raises(FlowNotFoundError) as caught:
        await flows.describe_flow(flow_id)
    assert type(caught.value) is FlowNotFoundError and flow_id in caught.value.detail
    assert caught.value.code == "FLOW_NOT_FOUND" and not caught.value.retryable


async def test_an_rpc_on_a_missing_flow_is_not_active_or_not_found(
    flows: engine.FlowClient, flow_id: str
) -> None:
    with pytest.raises(FlowNotActiveOrNotFoundError) as caught:
        await flows.invoke_rpc("increment", flow_id, 1)
    assert type(caught.value) is FlowNotActiveOrNotFoundError
    assert caught.value.flow_id == flow_id


async def test_a_second_start_names_the_running_run(flows: engine.FlowClient, flow_id: str) -> None:
    first = await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(FlowAlreadyStartedError) as caught:
        await flows.start_flow(
            Orders,
            flow_id,
            PAYLOAD,
            StartFlowOptions(id_reuse_policy=engine.IdReusePolicy.REJECT_DUPLICATE),
        )
    assert type(caught.value) is FlowAlreadyStartedError
    assert (caught.value.run_id, caught.value.flow_id) == (first.run_id, flow_id)


async def test_an_unknown_flow_type_is_flow_type_not_found(
    flows: engine.FlowClient, flow_id: str
) -> None:
    with pytest.raises(FlowTypeNotFoundError):
        await flows.start_flow("Nope", flow_id)


async def test_a_held_lock_is_a_retryable_lock_conflict_with_its_key(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await flows.start_flow(Orders, flow_id, PAYLOAD)

    async def hold() -> None:
        # The probes below may hold the lock first: the holder tries again until it has it.
        while True:
            try:
                await flows.invoke_rpc(ORDERS.hold, flow_id, 2.0)
                return
            except RPCLockConflictError:
                await asyncio.sleep(0.01)

    holding = asyncio.create_task(hold())

    async def conflict() -> RPCLockConflictError:
        try:
            await flows.invoke_rpc(ORDERS.increment, flow_id, 1)
        except RPCLockConflictError as exc:
            return exc
        raise AssertionError("no conflict yet")

    found = await eventually(conflict, what="a lock conflict")
    await holding
    assert type(found) is RPCLockConflictError and found.key == "counter"
    assert found.retryable and found.code == "RPC_LOCK_CONFLICT"
    assert found.detail.startswith("RPC lock conflict: attribute key counter is locked by ")


async def test_an_input_the_rpc_refuses_is_invalid_argument_naming_it(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(InvalidArgumentError) as typed:
        await flows.invoke_rpc(ORDERS.increment, flow_id, "seven")
    with pytest.raises(InvalidArgumentError) as by_name:
        await flows.invoke_rpc("echo", flow_id, {"name": 1})
    with pytest.raises(InvalidArgumentError) as null_only:
        await flows.invoke_rpc(ORDERS.boom, flow_id, 1)
    assert type(typed.value) is InvalidArgumentError
    assert typed.value.field == "input of RPC increment"
    assert by_name.value.field == "input of RPC echo"
    assert null_only.value.field == "input"


async def test_a_bad_page_size_names_its_field(flows: engine.FlowClient, flow_id: str) -> None:
    await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(InvalidArgumentError) as caught:
        await flows.list_channel_messages(flow_id, "go", page_size=0)
    with pytest.raises(InvalidPageTokenError):
        await flows.search_flows("", page_token="not-a-token")
    assert (type(caught.value), caught.value.field) == (InvalidArgumentError, "pageSize")


async def test_a_query_that_does_not_parse_says_where(flows: engine.FlowClient) -> None:
    with pytest.raises(InvalidQueryError) as caught:
        await flows.search_flows("state = ")
    assert type(caught.value) is InvalidQueryError and caught.value.position == 8


async def test_an_unknown_rpc_is_rpc_not_found(flows: engine.FlowClient, flow_id: str) -> None:
    await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(RPCNotFoundError):
        await flows.invoke_rpc("nope", flow_id)


async def test_a_raising_handler_names_its_error_type(
    flows: engine.FlowClient, flow_id: str
) -> None:
    await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(RPCHandlerError) as caught:
        await flows.invoke_rpc(ORDERS.boom, flow_id)
    assert (caught.value.error_type, caught.value.detail) == (
        "ValueError",
        "RPC boom raised ValueError: boom",
    )


async def test_a_deleted_message_is_no_longer_found(flows: engine.FlowClient, flow_id: str) -> None:
    await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(ChannelMessageNotFoundError):
        await flows.delete_channel_message(flow_id, "go", str(uuid.uuid4()))


async def test_schedules_not_found_and_already_existing(flows: engine.FlowClient) -> None:
    schedule_id = f"s-{uuid.uuid4().hex[:8]}"
    spec = engine.ScheduleSpec(
        schedule_id, "Orders", engine.to_json_data(PAYLOAD), cron="@daily", paused=True
    )
    await flows.create_schedule(spec)
    with pytest.raises(ScheduleAlreadyExistsError):
        await flows.create_schedule(spec)
    await flows.delete_schedule(schedule_id)
    with pytest.raises(ScheduleNotFoundError) as caught:
        await flows.describe_schedule(schedule_id)
    assert type(caught.value) is ScheduleNotFoundError


async def test_a_travel_point_the_run_lacks_names_its_field(
    flows: engine.FlowClient, flow_id: str
) -> None:
    started = await flows.start_flow(Orders, flow_id, PAYLOAD)
    with pytest.raises(InvalidArgumentError) as caught:
        await flows.time_travel(
            flow_id, TimeTravelOptions(run_id=started.run_id, to=TravelPoint.event(999))
        )
    assert caught.value.field is not None and "event" in caught.value.field.lower()


async def test_a_stream_by_name_needs_its_flow_type(flows: engine.FlowClient, flow_id: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await flows.write_stream(flow_id, "progress", PAYLOAD, source="test")
    assert caught.value.field == "flowType"


def test_payload_is_the_served_type() -> None:
    # The tests above rely on the module's Payload being what the server declares.
    assert Orders.payload.value_type is Payload
