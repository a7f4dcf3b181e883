"""SearchFlows and WaitForAttributeMatch."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.deps import EngineDep, LimitsDep
from app.errors import responses
from app.limits import check_wait
from app.long_polls import while_connected
from app.schemas import (
    AttributeMatchBody,
    AttributeMatchResponse,
    FlowInfoResponse,
    SearchFlowsResponse,
)

router = APIRouter(prefix="/api/v1/flows", tags=["search"])


@router.get(
    "",
    operation_id="searchFlows",
    response_model=SearchFlowsResponse,
    responses=responses(400, 422),
)
async def search_flows(
    eng: EngineDep,
    query: Annotated[
        str,
        Query(
            description="A filter such as FlowType = 'AttributeFlow' AND "
            "keyword1 = 'completed', optionally ending in ORDER BY on "
            "system fields. Empty matches every run."
        ),
    ] = "",
    page_size: Annotated[int, Query(alias="pageSize", description="1 to 1000.")] = 100,
    page_token: Annotated[
        str,
        Query(
            alias="pageToken",
            description="nextPageToken of the previous page, with the same query and flowType.",
        ),
    ] = "",
    flow_type: Annotated[
        str | None,
        Query(
            alias="flowType",
            description="Confine the search to this Flow type. It is combined with the parsed "
            "query, so no filter text can widen it (unlike FlowType = '...' written into the "
            "query by hand).",
        ),
    ] = None,
) -> SearchFlowsResponse:
    """Search Flow runs (open and closed) by system fields and indexed Attributes.

    Newest first (StartTime, then run ID) unless the query says ORDER BY. Reads its own writes:
    a run written by an RPC that returned is found by the next search. Errors: 400
    INVALID_QUERY (with the position and what was expected), INVALID_ARGUMENT (pageSize),
    INVALID_PAGE_TOKEN (malformed, or issued for another query or flowType).
    """
    page = await eng.search_flows(query, page_size, page_token, flow_type=flow_type)
    return SearchFlowsResponse(
        flows=[FlowInfoResponse.of(f) for f in page.flows], next_page_token=page.next_page_token
    )


@router.post(
    "/{flowId}/attribute-matches",
    operation_id="waitForAttributeMatch",
    response_model=AttributeMatchResponse,
    responses=responses(400, 404, 422),
)
async def wait_for_attribute_match(
    request: Request,
    flowId: str,
    body: AttributeMatchBody,
    eng: EngineDep,
    limits: LimitsDep,
) -> AttributeMatchResponse | Response:
    """Wait until an Attribute, or one AttributeMap instance, of the active run matches.

    Answers as soon as a commit makes the comparison true, with the matched current value, or
    with matched=false when waitSeconds (at most 60) ends; a missing value never matches.
    Errors: 400 INVALID_ARGUMENT (hard-delete Attributes, object values, non-finite numbers,
    GT/GE/LT/LE on non-numeric values), 404 FLOW_NOT_ACTIVE_OR_NOT_FOUND (closed or missing).
    """
    check_wait(limits, body.wait_seconds)
    match = await while_connected(
        request,
        body.wait_seconds,
        eng.wait_for_attribute_match(
            flowId,
            body.name,
            body.operator,
            body.value,
            instance=body.instance,
            wait_seconds=body.wait_seconds,
        ),
    )
    if isinstance(match, Response):  # the client left
        return match
    return AttributeMatchResponse(matched=match.matched, value=match.value)
