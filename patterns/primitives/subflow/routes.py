"""HTTP routes of the SubFlow primitive.

The parent's result comes from waitForFlow on the parent; its children are found the way any
client finds SubFlows, with SearchFlows on the ``ParentRunId`` system field, and each child's
output is read from its own result.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response, status
from pydantic import Field, ValidationInfo, field_validator

from engine import FlowClient, FlowInfo, FlowNotFoundError, FlowResult
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.subflow.flow import (
    DEFAULT_CHILDREN,
    MAX_CHILDREN,
    MIN_CHILDREN,
    ChildOutcome,
    FanOutFlow,
    FanOutInput,
    FanOutOutput,
    SquareOutput,
    check_fail_index,
)

DEFAULT_FLOW_ID = "primitive-subflow"
MAX_WAIT_SECONDS = 60.0
# One parent run has at most MAX_CHILDREN children; one page holds them all.
SEARCH_PAGE_SIZE = 1000

router = APIRouter(prefix="/primitives/subflow", tags=["primitive-subflow"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "description": "No such Flow, or it is not a FanOutFlow (FLOW_NOT_FOUND)",
        **PROBLEM,
    }
}


class SubFlowStartBody(RequestBody):
    """How many SquareFlow children to start (1 to 50), and which one should fail, if any."""

    children: int = Field(default=DEFAULT_CHILDREN, ge=MIN_CHILDREN, le=MAX_CHILDREN)
    fail_index: int | None = Field(
        default=None,
        ge=0,
        lt=MAX_CHILDREN,
        description="The index (0 to children - 1) of a child that fails instead of squaring; "
        "null for none",
    )

    @field_validator("fail_index")
    @classmethod
    def _within_children(cls, value: int | None, info: ValidationInfo) -> int | None:
        # Checked on the body too, not only by the Flow's input, so the 422 names this field.
        return check_fail_index(value, info)


class SubFlowStartResponse(StartResponse):
    """The FanOutFlow run."""


class ChildOutcomeInfo(Wire):
    """What the parent read of one child: its run, status, and square or error."""

    index: int
    flow_id: str
    run_id: str
    status: str
    square: int | None
    error_type: str | None
    error_message: str | None

    @classmethod
    def of(cls, outcome: ChildOutcome) -> ChildOutcomeInfo:
        """Return the wire form of one child's outcome."""
        return cls(
            index=outcome.index,
            flow_id=outcome.flow_id,
            run_id=outcome.run_id,
            status=outcome.status,
            square=outcome.square,
            error_type=outcome.error_type,
            error_message=outcome.error_message,
        )


class FanOutOutputInfo(Wire):
    """The parent's completion: one outcome per child in index order, and their squares."""

    children: list[ChildOutcomeInfo]
    squares: list[int | None] = Field(description="By index; null where the child failed")
    total: int = Field(description="The sum of the squares the children completed with")
    failed: int = Field(description="How many children closed without a square")


class SubFlowResultResponse(Wire):
    """The parent run's status and, once it completed, what it read of its children."""

    flow_id: str
    run_id: str
    status: str
    output: FanOutOutputInfo | None = Field(description="Null until the parent completes")
    error_type: str | None
    error_message: str | None


class SquareInfo(Wire):
    """What a SquareFlow completed with."""

    index: int
    number: int
    square: int


class SubFlowChildInfo(Wire):
    """One child run found by SearchFlows on ParentRunId, with its parent and result."""

    index: int = Field(description="The child's position in the parent's Wait")
    flow_id: str
    run_id: str
    flow_type: str
    status: str
    parent_flow_id: str
    parent_run_id: str
    output: SquareInfo | None = Field(description="Null while running or when it failed")
    error_type: str | None
    error_message: str | None


class SubFlowChildrenResponse(Wire):
    """The children of the parent's latest run, in index order."""

    flow_id: str
    run_id: str
    query: str = Field(description="The SearchFlows query that found them")
    children: list[SubFlowChildInfo]


@router.post(
    "/start",
    operation_id="startSubFlowParent",
    status_code=status.HTTP_201_CREATED,
    response_model=SubFlowStartResponse,
    responses={200: {"model": SubFlowStartResponse, "description": "Already running"}},
)
async def start(
    request: Request,
    response: Response,
    body: Annotated[SubFlowStartBody, Body(default_factory=SubFlowStartBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> SubFlowStartResponse:
    """Start a FanOutFlow that runs `children` SquareFlow SubFlows; 200 if it is running.

    Its Step waits with `Wait.all_of` on one `SubFlow.run` per child; the children start in the
    commit that begins the wait, as `SubFlow:<flowId>-FanOut-1-<index>`. Child `index` squares
    `index + 1`; the one at `failIndex` fails instead.
    """
    given = body
    payload = FanOutInput(children=given.children, fail_index=given.fail_index)
    return await start_or_report_running(
        request, response, SubFlowStartResponse, FanOutFlow, flow_id, payload
    )


@router.get(
    "/result",
    operation_id="getSubFlowParentResult",
    response_model=SubFlowResultResponse,
    responses=_NOT_FOUND,
)
async def result(
    request: Request,
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
    wait_seconds: Annotated[
        float,
        Query(
            alias="waitSeconds",
            ge=0,
            le=MAX_WAIT_SECONDS,
            description="How long to wait for the parent to close, 0 to 60",
        ),
    ] = 0.0,
) -> SubFlowResultResponse:
    """Read the latest FanOutFlow run's result, waiting up to `waitSeconds` for it to close.

    RUNNING with a null output while children are still open; once it completed, the output
    lists what `SubFlow.get_condition_results` gave for each child, in index order.
    """
    eng = client_of(request)
    info = await _describe_parent(eng, flow_id, "getSubFlowParentResult")
    read = await eng.wait_for_flow(flow_id, info.run_id, wait_seconds)
    output = None
    if read.completions:
        done = FanOutOutput.model_validate(read.completions[0].output)
        output = FanOutOutputInfo(
            children=[ChildOutcomeInfo.of(c) for c in done.children],
            squares=done.squares,
            total=done.total,
            failed=done.failed,
        )
    return SubFlowResultResponse(
        flow_id=read.flow_id,
        run_id=read.run_id,
        status=str(read.status),
        output=output,
        error_type=read.error_type,
        error_message=read.error_message,
    )


@router.get(
    "/children",
    operation_id="listSubFlowChildren",
    response_model=SubFlowChildrenResponse,
    responses=_NOT_FOUND,
)
async def children(
    request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> SubFlowChildrenResponse:
    """List the latest FanOutFlow run's children with SearchFlows on `ParentRunId`.

    Every run of the parent's Flow ID meets the same child Flow IDs (``ParentFlowId`` finds the
    children of all of them); ``ParentRunId`` names the children this run started. Each
    child's output comes from its own result.
    """
    eng = client_of(request)
    info = await _describe_parent(eng, flow_id, "listSubFlowChildren")
    query = f"ParentRunId = {_quote(info.run_id)}"
    found = (await eng.search_flows(query, SEARCH_PAGE_SIZE)).flows
    results = await asyncio.gather(*(eng.wait_for_flow(f.flow_id, f.run_id) for f in found))
    listed = [_child_info(f, r) for f, r in zip(found, results, strict=True)]
    listed.sort(key=lambda child: child.index)
    return SubFlowChildrenResponse(
        flow_id=info.flow_id, run_id=info.run_id, query=query, children=listed
    )


def _quote(text: str) -> str:
    """Return ``text`` as a SearchFlows string literal."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


async def _describe_parent(eng: FlowClient, flow_id: str, operation: str) -> FlowInfo:
    info = await eng.describe_flow(flow_id)
    if info.flow_type != FanOutFlow.flow_type():
        raise FlowNotFoundError(
            f"Flow {flow_id} is a {info.flow_type}, not a {FanOutFlow.flow_type()}",
            flow_id=flow_id,
            operation=operation,
        )
    return info


def _child_info(info: FlowInfo, result: FlowResult) -> SubFlowChildInfo:
    output = None
    if result.completions:
        done = SquareOutput.model_validate(result.completions[0].output)
        output = SquareInfo(index=done.index, number=done.number, square=done.square)
    return SubFlowChildInfo(
        # The derived Flow ID ends with the child's index in the parent's Wait.
        index=int(info.flow_id.rpartition("-")[2]),
        flow_id=info.flow_id,
        run_id=info.run_id,
        flow_type=info.flow_type,
        status=str(result.status),
        parent_flow_id=info.parent_flow_id or "",
        parent_run_id=info.parent_run_id or "",
        output=output,
        error_type=result.error_type,
        error_message=result.error_message,
    )
