"""The API's JSON of the client's results, for ``--json``: built with the server's own wire
models, so a command prints what the server sent."""

from __future__ import annotations

from typing import Any

import engine
from app.schemas import (
    FlowInfoResponse,
    FlowResultResponse,
    HistoryEventResponse,
    HistoryResponse,
    PendingStepResponse,
    StreamMessageResponse,
    Wire,
)
from app.travel_schemas import (
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
    body: dict[str, Any] = dump(FlowResultResponse.of(result))
    return body


def history(page: engine.HistoryPage, events: list[engine.HistoryEvent]) -> dict[str, Any]:
    """Return getFlowHistory's JSON of ``page`` with ``events`` (every page's, when read
    whole)."""
    body: dict[str, Any] = dump(
        HistoryResponse(
            flow_id=page.flow_id,
            run_id=page.run_id,
            next_page_token=page.next_page_token,
            events=[HistoryEventResponse.of(e) for e in events],
        )
    )
    return body


def pending_steps(steps: list[engine.PendingStep]) -> list[dict[str, Any]]:
    """Return the ``steps`` of listPendingSteps' JSON."""
    return [dump(PendingStepResponse.of(s)) for s in steps]


def stream_message(message: engine.StreamMessage[Any]) -> dict[str, Any]:
    """Return a Stream message's JSON."""
    body: dict[str, Any] = dump(StreamMessageResponse.of(message))
    return body


def traveled(result: engine.TimeTravelResult) -> TimeTravelResponse:
    """Return the wire model of a traveled run."""
    return TimeTravelResponse.of(result)


def bulk_travel(result: engine.BulkTimeTravelResult) -> dict[str, Any]:
    """Return timeTravelFlows' JSON."""
    body: dict[str, Any] = dump(TimeTravelFlowsResponse.of(result))
    return body
