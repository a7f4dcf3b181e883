"""RPCs and Attributes of a Flow."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Query

import engine
from app.deps import EngineDep, LimitsDep
from app.errors import responses
from app.limits import check_value_size, check_values_size
from app.schemas import (
    AttributesResponse,
    InvokeRpcBody,
    InvokeRpcOptionsBody,
    InvokeRpcResponse,
    SetAttributesBody,
    SetAttributesResponse,
)
from engine import AttributeLock, AttributeMapLoad, ChannelMapLoad

router = APIRouter(prefix="/api/v1/flows", tags=["rpcs-and-attributes"])


def _split(entries: list[str], what: str) -> list[tuple[str, str]]:
    pairs = []
    for entry in entries:
        name, sep, instance = entry.partition("/")
        if not sep or not name or not instance:
            raise engine.InvalidArgumentError(
                f"{what}: {entry!r} must be 'map/instance'", field=what
            )
        pairs.append((name, instance))
    return pairs


@router.post(
    "/{flowId}/rpcs/{rpcName}",
    operation_id="invokeRpc",
    response_model=InvokeRpcResponse,
    responses={
        **responses(400, 404, 409, 422),
        500: {"description": "The RPC handler raised (code RPC_HANDLER_ERROR)"},
        504: {"description": "The RPC handler timed out (code RPC_TIMEOUT)"},
    },
)
async def invoke_rpc(
    flowId: str,
    rpcName: str,
    eng: EngineDep,
    limits: LimitsDep,
    body: Annotated[InvokeRpcBody, Body(default_factory=InvokeRpcBody)],
) -> InvokeRpcResponse:
    """Invoke an RPC of the Flow's current run (or the given run)."""
    check_value_size(limits, body.input, "input")
    opts = body.options
    options = None
    if (
        opts.load_attribute_map_instances
        or opts.lock_attribute_map_instances
        or opts.load_channel_map_instances
        or opts.lock_retry_seconds is not None
    ):
        options = _invoke_options(opts)
    output = await eng.invoke_rpc(
        rpcName,
        flowId,
        body.input,
        run_id=body.run_id,
        options=options,
        flow_type=body.flow_type,
    )
    return InvokeRpcResponse(output=engine.to_json_data(output))


def _invoke_options(opts: InvokeRpcOptionsBody) -> engine.RPCInvokeOptions:
    """Return the loads and locks an invocation adds, each ``map/instance`` checked, and its
    lock retry."""
    return engine.RPCInvokeOptions(
        load_attribute_map_instances=tuple(
            AttributeMapLoad(n, i)
            for n, i in _split(opts.load_attribute_map_instances, "loadAttributeMapInstances")
        ),
        lock_attribute_map_instances=tuple(
            AttributeLock(n, i)
            for n, i in _split(opts.lock_attribute_map_instances, "lockAttributeMapInstances")
        ),
        load_channel_map_instances=tuple(
            ChannelMapLoad(n, i)
            for n, i in _split(opts.load_channel_map_instances, "loadChannelMapInstances")
        ),
        lock_retry=None
        if opts.lock_retry_seconds is None
        else timedelta(seconds=opts.lock_retry_seconds),
    )


@router.get(
    "/{flowId}/attributes",
    operation_id="getAttributes",
    response_model=AttributesResponse,
    responses=responses(400, 404, 422),
)
async def get_attributes(
    flowId: str,
    eng: EngineDep,
    name: Annotated[list[str], Query(description="'status' or 'progress/payment'; repeat")] = [],  # noqa: B006
    run_id: Annotated[str | None, Query(alias="runId", min_length=1, max_length=256)] = None,
    as_of_event_id: Annotated[
        int | None,
        Query(
            alias="asOfEventId",
            ge=1,
            le=2**63 - 1,
            description="Read the values as they were right after the commit that wrote this "
            "history event of the run (what a time travel to it restores); hard-delete "
            "values are never kept and are absent.",
        ),
    ] = None,
) -> AttributesResponse:
    """Read Attributes from one committed state (current or latest run), without locks."""
    values = await eng.get_attributes_json(flowId, name, run_id, as_of_event_id=as_of_event_id)
    return AttributesResponse(flow_id=values.flow_id, run_id=values.run_id, values=values.values)


@router.put(
    "/{flowId}/attributes",
    operation_id="setAttributes",
    response_model=SetAttributesResponse,
    responses=responses(400, 404, 409, 422),
)
async def set_attributes(
    flowId: str,
    body: SetAttributesBody,
    eng: EngineDep,
    limits: LimitsDep,
) -> SetAttributesResponse:
    """Write Attributes of the active run; on a closed run only erase hard-delete values."""
    check_values_size(limits, body.values, "values")
    flow_id, run_id = await eng.set_attributes(flowId, body.values, body.run_id)
    return SetAttributesResponse(flow_id=flow_id, run_id=run_id)
