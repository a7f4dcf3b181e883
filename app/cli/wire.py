"""The API's JSON of the client's results, for ``--json``: built with the server's own wire
models, so a command prints what the server sent."""

from __future__ import annotations

from typing import Any

import engine
from app.schemas import (
    CompletionResponse,
    FlowInfoResponse,
    FlowResultResponse,
    HistoryEventResponse,
    HistoryResponse,
    PendingStepResponse,
    StreamMessageResponse,
    Wire,
)
from app.travel_schemas import (
    FlowRunResponse,
    TimeTravelFailureResponse,
    TimeTravelFlowsResponse,
    TimeTravelResponse,
)


def dump(model: Wire) -> Any:
    """Return a wire model as the JSON the server sends (camelCase)."""
    return model.model_dump(mode="json", by_alias=True)


def flow_info(info: engine.FlowInfo) -> dict[str, Any]:
    """Return describeFlow's JSON."""
    body: dict[str, Any] = dump(FlowInfoResponse.of(info))
    return body


def flow_result(result: engine.FlowResult) -> dict[str, Any]:
    """Return waitForFlow's JSON."""
    body: dict[str, Any] = dump(
        FlowResultResponse(
            flow_id=result.flow_id,
            run_id=result.run_id,
            status=result.status,
            completions=[
                CompletionResponse(
                    step_type=c.step_type, step_execution_id=c.step_execution_id, output=c.output
                )
                for c in result.completions
            ],
            error_type=result.error_type,
            error_message=result.error_message,
        )
    )
    return body


def history(page: engine.HistoryPage, events: list[engine.HistoryEvent]) -> dict[str, Any]:
    """Return getFlowHistory's JSON of ``page`` with ``events`` (every page's, when read
    whole)."""
    body: dict[str, Any] = dump(
        HistoryResponse(
            flow_id=page.flow_id,
            run_id=page.run_id,
            next_page_token=page.next_page_token,
            events=[
                HistoryEventResponse(
                    event_id=e.event_id,
                    event_type=e.event_type,
                    at=e.at,
                    details=e.details,
                )
                for e in events
            ],
        )
    )
    return body


def pending_steps(steps: list[engine.PendingStep]) -> list[dict[str, Any]]:
    """Return the ``steps`` of listPendingSteps' JSON."""
    return [
        dump(
            PendingStepResponse(
                step_execution_id=s.step_execution_id,
                step_type=s.step_type,
                phase=s.phase,
                attempt=s.attempt,
                created_at=s.created_at,
                due_at=s.due_at,
                timers=s.timers,
                channels=s.channels,
                sub_flows=s.sub_flows,
            )
        )
        for s in steps
    ]


def stream_message(message: engine.StreamMessage[Any]) -> dict[str, Any]:
    """Return a Stream message's JSON."""
    body: dict[str, Any] = dump(
        StreamMessageResponse(
            value=engine.to_json_data(message.value),
            resume_token=message.resume_token,
            created_at=message.created_at,
            source=message.source,
        )
    )
    return body


def traveled(result: engine.TimeTravelResult) -> TimeTravelResponse:
    """Return the wire model of a traveled run."""
    return TimeTravelResponse(
        flow_id=result.flow_id, run_id=result.run_id, previous_run_id=result.previous_run_id
    )


def bulk_travel(result: engine.BulkTimeTravelResult) -> dict[str, Any]:
    """Return timeTravelFlows' JSON."""
    body: dict[str, Any] = dump(
        TimeTravelFlowsResponse(
            dry_run=result.dry_run,
            matched=[FlowRunResponse(flow_id=m.flow_id, run_id=m.run_id) for m in result.matched],
            traveled=[traveled(t) for t in result.traveled],
            failed=[
                TimeTravelFailureResponse(
                    flow_id=f.flow_id, run_id=f.run_id, code=f.code, detail=f.detail
                )
                for f in result.failed
            ],
        )
    )
    return body
