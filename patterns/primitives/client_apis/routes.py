"""HTTP routes of the client APIs primitive.

Three of them read a ShipmentFlow from outside, each with one client call and no RPC:
GetAttributes, SearchFlows and WaitForAttributeMatch. The others start a shipment and move its
stage on with an RPC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import Field

from engine import MatchOperator, StartFlowOptions
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.client_apis.flow import STAGE_CREATED, STAGE_INDEX_KEY, ShipmentFlow

DEFAULT_FLOW_ID = "primitive-client-apis"
DEFAULT_FILTER = f"{STAGE_INDEX_KEY} = 'shipped'"
MAX_WAIT_SECONDS = 60.0
# A declaration used to name the RPC and the Attribute; it does no I/O.
FLOW = ShipmentFlow()
FLOW_TYPE = ShipmentFlow.flow_type()

router = APIRouter(prefix="/primitives/client-apis", tags=["primitive-client-apis"])


class ShipmentStartResponse(StartResponse):
    """The ShipmentFlow run."""


class SetStageBody(RequestBody):
    """The stage to move to."""

    stage: str = Field(min_length=1, max_length=64)


class SetStageResponse(Wire):
    """The stage before the RPC (null when unset) and the stage it committed."""

    previous: str | None
    stage: str


class ShipmentAttributesResponse(Wire):
    """The run's committed stage (null when unset)."""

    flow_id: str
    run_id: str
    stage: str | None


class ShipmentInfo(Wire):
    """One ShipmentFlow run that matched, with its indexed stage."""

    flow_id: str
    run_id: str
    status: str
    stage: str | None
    started_at: datetime


class ShipmentSearchResponse(Wire):
    """The query that ran, one page of matches, and the next page's token ("" on the last)."""

    query: str
    flows: list[ShipmentInfo]
    next_page_token: str


class WaitForStageBody(RequestBody):
    """The stage to wait for, and for how long."""

    stage: str = Field(min_length=1, max_length=64)
    wait_seconds: float = Field(default=10.0, ge=0, le=MAX_WAIT_SECONDS)


class WaitForStageResponse(Wire):
    """Whether the stage matched before the wait ended, and the matched value."""

    matched: bool
    stage: str | None


def scoped_query(caller_filter: str) -> str:
    """Return ``FlowType = 'ShipmentFlow' AND (<caller_filter>)``, as Dex recommends.

    The parentheses keep an OR in the filter from escaping the scope.
    """
    scope = f"FlowType = '{FLOW_TYPE}'"
    return f"{scope} AND ({caller_filter})" if caller_filter.strip() else scope


@router.post(
    "/start",
    operation_id="startShipmentFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=ShipmentStartResponse,
    responses={200: {"model": ShipmentStartResponse, "description": "Already running"}},
)
async def start(
    request: Request, response: Response, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> ShipmentStartResponse:
    """Start an RPC-only ShipmentFlow at stage `created`; 200 if it is already running."""
    options = StartFlowOptions(initial_attributes={FLOW.stage.name: STAGE_CREATED})
    return await start_or_report_running(
        request, response, ShipmentStartResponse, ShipmentFlow, flow_id, None, options
    )


@router.post(
    "/set-stage",
    operation_id="setShipmentStage",
    response_model=SetStageResponse,
    responses={
        404: {"description": "No such Flow, or it has closed", **PROBLEM},
        409: {"description": "Another RPC holds the stage lock", **PROBLEM},
    },
)
async def set_stage(
    body: SetStageBody, request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> SetStageResponse:
    """Invoke set_stage, which locks the stage, sets it and returns the previous one.

    The new stage commits with its search value, so the next search and any waiting
    WaitForAttributeMatch see it at once.
    """
    previous = await client_of(request).invoke_rpc(FLOW.set_stage, flow_id, body.stage)
    return SetStageResponse(previous=previous, stage=body.stage)


@router.get(
    "/attributes",
    operation_id="getShipmentAttributes",
    response_model=ShipmentAttributesResponse,
    responses={
        400: {"description": "The Flow ID belongs to another Flow type", **PROBLEM},
        404: {"description": "No such Flow (FLOW_NOT_FOUND)", **PROBLEM},
    },
)
async def attributes(
    request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> ShipmentAttributesResponse:
    """Read the stage with GetAttributes: committed state only, no lock, no handler."""
    read = await client_of(request).get_attributes(flow_id, [FLOW.stage.name])
    return ShipmentAttributesResponse(
        flow_id=read.flow_id, run_id=read.run_id, stage=read.values.get(FLOW.stage.name)
    )


@router.get(
    "/search",
    operation_id="searchShipments",
    response_model=ShipmentSearchResponse,
    responses={
        400: {"description": "INVALID_QUERY, INVALID_ARGUMENT or INVALID_PAGE_TOKEN", **PROBLEM}
    },
)
async def search(
    request: Request,
    caller_filter: Annotated[
        str,
        Query(
            alias="filter",
            max_length=2048,
            description="A filter on keyword1 (the stage) or system fields, without ORDER BY; "
            "empty for every shipment",
        ),
    ] = DEFAULT_FILTER,
    page_size: Annotated[int, Query(alias="pageSize", description="1 to 1000")] = 20,
    page_token: Annotated[
        str, Query(alias="pageToken", description="nextPageToken, with the same filter")
    ] = "",
) -> ShipmentSearchResponse:
    """Search ShipmentFlow runs with `FlowType = 'ShipmentFlow' AND (<filter>)`, newest first.

    keyword1 is the stage here but AttributeFlow's status elsewhere, so the scope matters. The
    engine also applies the Flow type to the parsed query, so even a filter with unbalanced
    parentheses cannot widen it. A query error's position counts in the scoped query.
    """
    query = scoped_query(caller_filter)
    page = await client_of(request).search_flows(query, page_size, page_token, flow_type=FLOW_TYPE)
    return ShipmentSearchResponse(
        query=query,
        flows=[
            ShipmentInfo(
                flow_id=info.flow_id,
                run_id=info.run_id,
                status=info.status,
                stage=info.indexed_attributes.get(STAGE_INDEX_KEY),
                started_at=info.started_at,
            )
            for info in page.flows
        ],
        next_page_token=page.next_page_token,
    )


@router.post(
    "/wait-for-stage",
    operation_id="waitForShipmentStage",
    response_model=WaitForStageResponse,
    responses={
        400: {"description": "Bad wait (INVALID_ARGUMENT)", **PROBLEM},
        404: {"description": "No active run (FLOW_NOT_ACTIVE_OR_NOT_FOUND)", **PROBLEM},
    },
)
async def wait_for_stage(
    body: WaitForStageBody, request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> WaitForStageResponse:
    """Wait with WaitForAttributeMatch until the stage equals `stage`, up to `waitSeconds`.

    Answers as soon as a set-stage commit makes it match (or at once if it already does), else
    `matched: false` when the wait ends. Send set-stage from a second tab or a shell meanwhile.
    """
    match = await client_of(request).wait_for_attribute_match(
        flow_id,
        FLOW.stage.name,
        MatchOperator.EQ,
        body.stage,
        wait_seconds=body.wait_seconds,
    )
    return WaitForStageResponse(matched=match.matched, stage=match.value)
