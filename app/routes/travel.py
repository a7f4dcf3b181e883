"""Time travel: one Flow back to a point (or forked), many Flows by a query."""

from __future__ import annotations

from fastapi import APIRouter, status

import engine
from app.deps import EngineDep
from app.errors import responses
from app.travel_schemas import (
    TimeTravelBody,
    TimeTravelFlowsBody,
    TimeTravelFlowsResponse,
    TimeTravelResponse,
)

router = APIRouter(prefix="/api/v1", tags=["time-travel"])


@router.post(
    "/flows/{flowId}/time-travel",
    operation_id="timeTravelFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=TimeTravelResponse,
    responses=responses(400, 404, 409, 422),
)
async def time_travel_flow(
    flowId: str,
    body: TimeTravelBody,
    eng: EngineDep,
) -> TimeTravelResponse:
    """Take the Flow's latest run back to a point and let it run again from there.

    An open run closes as TERMINATED; the new run starts from the whole run state right after
    the point's commit, then (unless skipWritesReapply) what RPCs and clients wrote, published
    and deleted afterwards is applied again. forkToFlowId creates the new run under another
    Flow ID instead. 409 FAILED_PRECONDITION when runId is not the latest run; 400
    INVALID_ARGUMENT naming the field for a point the run does not have.
    """
    result = await eng.time_travel(
        flowId,
        engine.TimeTravelOptions(
            run_id=body.run_id,
            to=body.to.to_point(),
            reason=body.reason,
            skip_writes_reapply=body.skip_writes_reapply,
            fork_to_flow_id=body.fork_to_flow_id,
        ),
    )
    return TimeTravelResponse.of(result)


@router.post(
    "/time-travel",
    operation_id="timeTravelFlows",
    response_model=TimeTravelFlowsResponse,
    responses=responses(400, 422),
)
async def time_travel_flows(body: TimeTravelFlowsBody, eng: EngineDep) -> TimeTravelFlowsResponse:
    """Travel the latest runs a SearchFlows query matches back to BEGINNING or a Step type.

    Each run travels in its own commit; one that cannot is listed under failed with its
    Problem code. dryRun lists the matches and changes nothing.
    """
    result = await eng.time_travel_flows(
        body.query,
        body.to.to_point(),
        reason=body.reason,
        skip_writes_reapply=body.skip_writes_reapply,
        dry_run=body.dry_run,
        limit=body.limit,
    )
    return TimeTravelFlowsResponse.of(result)
