"""HTTP routes of the RPC canceling Steps primitive."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import Field

from engine import FlowNotFoundError, StartFlowOptions
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.rpc_canceling_steps.flow import (
    DEFAULT_DELIVERY_SECONDS,
    DEFAULT_SECTION_SECONDS,
    DEFAULT_SECTIONS,
    MAX_SECONDS,
    MAX_SECTIONS,
    REPORT_GENERATING,
    ReportFlow,
    ReportInput,
)

DEFAULT_FLOW_ID = "primitive-rpc-canceling-steps"
# A declaration used to name the RPC and the Attributes; it does no I/O.
FLOW = ReportFlow()

router = APIRouter(prefix="/primitives/rpc-canceling-steps", tags=["primitive-rpc-canceling-steps"])


class ReportStartBody(RequestBody):
    """How long the simulated work takes; every field has a default."""

    sections: int = Field(default=DEFAULT_SECTIONS, ge=1, le=MAX_SECTIONS)
    section_seconds: float = Field(default=DEFAULT_SECTION_SECONDS, ge=0, le=MAX_SECONDS)
    delivery_seconds: float = Field(default=DEFAULT_DELIVERY_SECONDS, ge=0, le=MAX_SECONDS)


class ReportStartResponse(StartResponse):
    """The ReportFlow run."""


class ReportStopResponse(Wire):
    """Whether the Stop went ahead: false when the report was already ready or stopped."""

    stopped: bool


class ReportStatusResponse(Wire):
    """The latest run's committed report status and report, and the run's status."""

    flow_id: str
    run_id: str
    flow_status: str
    report_status: str | None
    report: list[str] | None


@router.post(
    "/start",
    operation_id="startReportFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=ReportStartResponse,
    responses={200: {"model": ReportStartResponse, "description": "Already running"}},
)
async def start(
    request: Request,
    response: Response,
    body: Annotated[ReportStartBody, Body(default_factory=ReportStartBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> ReportStartResponse:
    """Start a ReportFlow with its report status `generating`; 200 if it is already running."""
    given = body
    payload = ReportInput(
        sections=given.sections,
        section_seconds=given.section_seconds,
        delivery_seconds=given.delivery_seconds,
    )
    # The status commits with the start, so a Stop sent at once already finds a report to stop.
    options = StartFlowOptions(initial_attributes={FLOW.report_status.name: REPORT_GENERATING})
    return await start_or_report_running(
        request, response, ReportStartResponse, ReportFlow, flow_id, payload, options
    )


@router.post(
    "/stop",
    operation_id="stopReport",
    response_model=ReportStopResponse,
    responses={404: {"description": "No such Flow, or it has closed", **PROBLEM}},
)
async def stop(request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID) -> ReportStopResponse:
    """Invoke the stop_report RPC, which cancels GenerateReport and starts FinishReportStop.

    `stopped: false` when the report was already ready or stopped. `stopped: true` does not
    promise the report was stopped: it may have committed just before the cancellation, and
    then FinishReportStop lets the Flow deliver it. Read the outcome from the status route.
    """
    stopped = await client_of(request).invoke_rpc(FLOW.stop_report, flow_id)
    return ReportStopResponse(stopped=stopped)


@router.get(
    "/status",
    operation_id="getReportStatus",
    response_model=ReportStatusResponse,
    responses={404: {"description": "No such Flow (FLOW_NOT_FOUND)", **PROBLEM}},
)
async def report_status(
    request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> ReportStatusResponse:
    """Return the latest run's status with its committed report status and report."""
    eng = client_of(request)
    info = await eng.describe_flow(flow_id)
    if info.flow_type != ReportFlow.flow_type():
        raise FlowNotFoundError(
            f"Flow {flow_id} is a {info.flow_type}, not a {ReportFlow.flow_type()}",
            flow_id=flow_id,
            operation="getReportStatus",
        )
    # Read the run just described, so a newer run cannot mix its values in.
    values = (
        await eng.get_attributes(
            flow_id, [FLOW.report_status.name, FLOW.report.name], run_id=info.run_id
        )
    ).values
    return ReportStatusResponse(
        flow_id=flow_id,
        run_id=info.run_id,
        flow_status=info.status,
        report_status=values.get(FLOW.report_status.name),
        report=values.get(FLOW.report.name),
    )
