"""Flow lifecycle: start, describe, wait for the result, stop, history, pending Steps."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request, Response, status

import engine
from app.deps import EngineDep, LimitsDep, PageSizeQuery, PageTokenQuery, RunIdQuery
from app.errors import responses
from app.limits import check_value_size, check_values_size
from app.long_polls import while_connected
from app.schemas import (
    FlowInfoResponse,
    FlowResultResponse,
    HistoryEventResponse,
    HistoryResponse,
    PendingStepResponse,
    PendingStepsResponse,
    StartFlowBody,
    StartFlowResponse,
    StopFlowBody,
    StopFlowResponse,
)

router = APIRouter(prefix="/api/v1/flows", tags=["flows"])


@router.post(
    "",
    operation_id="startFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=StartFlowResponse,
    responses={
        200: {
            "model": StartFlowResponse,
            "description": "Already started by this requestId (ignoreAlreadyStarted)",
        },
        **responses(400, 404, 409, 422),
    },
)
async def start_flow(
    body: StartFlowBody, eng: EngineDep, limits: LimitsDep, response: Response
) -> StartFlowResponse:
    """Start a Flow run; its initial Attributes commit with the start."""
    opts = body.options
    check_value_size(limits, body.input, "input")
    check_values_size(limits, opts.initial_attributes, "options.initialAttributes")
    result = await eng.start_flow(
        body.flow_type,
        body.flow_id,
        body.input,
        engine.StartFlowOptions(
            initial_attributes=opts.initial_attributes,
            id_reuse_policy=opts.id_reuse_policy,
            timeout=timedelta(seconds=opts.timeout_seconds) if opts.timeout_seconds else None,
            request_id=opts.request_id,
            ignore_already_started=opts.ignore_already_started,
            start_delay=(
                None
                if opts.start_delay_seconds is None
                else timedelta(seconds=opts.start_delay_seconds)
            ),
        ),
    )
    if not result.started:
        response.status_code = status.HTTP_200_OK
    return StartFlowResponse(flow_id=result.flow_id, run_id=result.run_id, started=result.started)


@router.get(
    "/{flowId}",
    operation_id="describeFlow",
    response_model=FlowInfoResponse,
    responses=responses(400, 404, 422),
)
async def describe_flow(flowId: str, eng: EngineDep, run_id: RunIdQuery = None) -> FlowInfoResponse:
    """Describe the Flow's latest run (or the given run)."""
    info = await eng.describe_flow(flowId, run_id)
    return FlowInfoResponse.of(info)


@router.get(
    "/{flowId}/result",
    operation_id="waitForFlow",
    response_model=FlowResultResponse,
    responses=responses(400, 404, 422),
)
async def wait_for_flow(
    request: Request,
    flowId: str,
    eng: EngineDep,
    run_id: RunIdQuery = None,
    wait_seconds: Annotated[float, Query(alias="waitSeconds", ge=0, le=60)] = 0,
) -> FlowResultResponse | Response:
    """Return the run's result, waiting up to waitSeconds for it to close."""
    result = await while_connected(
        request, wait_seconds, eng.wait_for_flow(flowId, run_id, wait_seconds)
    )
    if isinstance(result, Response):  # the client left
        return result
    return FlowResultResponse.of(result)


@router.post(
    "/{flowId}/stop",
    operation_id="stopFlow",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=StopFlowResponse,
    responses=responses(400, 404, 422),
)
async def stop_flow(
    flowId: str,
    eng: EngineDep,
    body: Annotated[StopFlowBody, Body(default_factory=StopFlowBody)],
    run_id: RunIdQuery = None,
) -> StopFlowResponse:
    """Stop the active run: CANCEL, TERMINATE or FAIL."""
    stopped = await eng.stop_flow(flowId, body.type, body.reason, run_id)
    return StopFlowResponse(flow_id=flowId, run_id=stopped)


@router.get(
    "/{flowId}/history",
    operation_id="getFlowHistory",
    response_model=HistoryResponse,
    responses=responses(400, 404, 422),
)
async def get_flow_history(
    flowId: str,
    eng: EngineDep,
    run_id: RunIdQuery = None,
    page_size: PageSizeQuery = 100,
    page_token: PageTokenQuery = "",
) -> HistoryResponse:
    """Return the run's history events, oldest first, one page at a time."""
    page = await eng.get_flow_history(flowId, run_id, page_size, page_token)
    return HistoryResponse(
        flow_id=page.flow_id,
        run_id=page.run_id,
        next_page_token=page.next_page_token,
        events=[HistoryEventResponse.of(e) for e in page.events],
    )


@router.get(
    "/{flowId}/pending-steps",
    operation_id="listPendingSteps",
    response_model=PendingStepsResponse,
    responses=responses(400, 404, 422),
)
async def list_pending_steps(
    flowId: str,
    eng: EngineDep,
    run_id: RunIdQuery = None,
) -> PendingStepsResponse:
    """Return the run's pending Step executions, oldest first: each one's phase, attempt, due
    time and what it waits on (Timers, Channels, SubFlows); none once the run has closed."""
    found = await eng.list_pending_steps(flowId, run_id)
    return PendingStepsResponse(
        flow_id=found.flow_id,
        run_id=found.run_id,
        steps=[PendingStepResponse.of(s) for s in found.steps],
    )
