"""Values and results between the wire and the engine's types.

Values cross the wire as the JSON data :func:`engine.to_json_data` makes (bytes as
``{"$bytes": "<base64>"}``, datetimes as ISO text); with a declared type they are validated
by :func:`engine.validate_value` and read by :func:`engine.from_json_data`, the engine's own
codec, so the same declared type and data give the same value (or error) as in process.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import engine


def from_json_data(data: Any) -> Any:
    """Return untyped JSON data with every bytes marker turned back into bytes (as the engine
    reads a value of type ``Any``)."""
    return engine.from_json_data(data)


def validate_value(value_type: Any, value: Any, *, what: str) -> Any:
    """Validate a value the caller sends as the engine does, and return its JSON data.

    A Python value of the declared type passes the strict check; anything else must be what
    the type's JSON Schema allows (``true`` is not an integer), as the server would judge it.
    Raises InvalidArgumentError naming ``what`` (the field the engine names).
    """
    return engine.to_json_data(engine.validate_value(value, value_type, what=what))


def decode_value(value_type: Any, data: Any) -> Any:
    """Return JSON data from the server as a value of ``value_type`` (JSON data for Any, with
    bytes markers read), as the engine decodes the stored value in process."""
    return engine.from_json_data(data, value_type)


def parse_time(text: Any) -> datetime:
    """Return an RFC 3339 time of the wire as an aware datetime."""
    return datetime.fromisoformat(str(text))


def parse_optional_time(text: Any) -> datetime | None:
    """Return an RFC 3339 time of the wire, or None for null."""
    return None if text is None else parse_time(text)


def seconds(value: timedelta | None) -> float | int | None:
    """Return a duration as wire seconds: a whole number stays an int."""
    if value is None:
        return None
    total = value.total_seconds()
    return int(total) if total.is_integer() else total


def duration(value: Any) -> timedelta | None:
    """Return wire seconds (or null) as a timedelta."""
    return None if value is None else timedelta(seconds=value)


def without_nones(body: dict[str, Any]) -> dict[str, Any]:
    """Return ``body`` without its null members (the server's defaults apply)."""
    return {k: v for k, v in body.items() if v is not None}


# -- results ------------------------------------------------------------------------------------


def flow_info(data: dict[str, Any]) -> engine.FlowInfo:
    """Return a FlowInfo of its wire form."""
    return engine.FlowInfo(
        flow_id=data["flowId"],
        run_id=data["runId"],
        flow_type=data["flowType"],
        status=data["status"],
        started_at=parse_time(data["startedAt"]),
        closed_at=parse_optional_time(data.get("closedAt")),
        indexed_attributes=dict(data.get("indexedAttributes") or {}),
        parent_flow_id=data.get("parentFlowId"),
        parent_run_id=data.get("parentRunId"),
    )


def flow_result(data: dict[str, Any]) -> engine.FlowResult:
    """Return a FlowResult of its wire form (completion outputs stay JSON data)."""
    return engine.FlowResult(
        flow_id=data["flowId"],
        run_id=data["runId"],
        status=data["status"],
        completions=[
            engine.StepCompletion(c["stepType"], c["stepExecutionId"], c.get("output"))
            for c in data["completions"]
        ],
        error_type=data.get("errorType"),
        error_message=data.get("errorMessage"),
    )


def history_page(data: dict[str, Any]) -> engine.HistoryPage:
    """Return a HistoryPage of its wire form (details stay JSON, as the engine gives them)."""
    return engine.HistoryPage(
        flow_id=data["flowId"],
        run_id=data["runId"],
        events=[
            engine.HistoryEvent(
                event_id=e["eventId"],
                event_type=e["eventType"],
                at=parse_time(e["at"]),
                details=dict(e.get("details") or {}),
            )
            for e in data["events"]
        ],
        next_page_token=data.get("nextPageToken") or "",
    )


def pending_steps(data: dict[str, Any]) -> engine.PendingSteps:
    """Return PendingSteps of their wire form."""
    return engine.PendingSteps(
        flow_id=data["flowId"],
        run_id=data["runId"],
        steps=[
            engine.PendingStep(
                step_execution_id=s["stepExecutionId"],
                step_type=s["stepType"],
                phase=s["phase"],
                attempt=s["attempt"],
                created_at=parse_time(s["createdAt"]),
                due_at=parse_optional_time(s.get("dueAt")),
                timers=[parse_time(t) for t in s.get("timers", [])],
                channels=list(s.get("channels", [])),
                sub_flows=list(s.get("subFlows", [])),
            )
            for s in data["steps"]
        ],
    )


def stream_message(data: dict[str, Any], value_type: Any) -> engine.StreamMessage[Any]:
    """Return a StreamMessage of its wire form, its value decoded with the Stream's type."""
    return engine.StreamMessage(
        value=decode_value(value_type, data.get("value")),
        resume_token=data["resumeToken"],
        created_at=parse_time(data["createdAt"]),
        source=data["source"],
    )


def flow_type_description(data: dict[str, Any]) -> engine.FlowTypeDescription:
    """Return a FlowTypeDescription of its wire form."""
    return engine.FlowTypeDescription(
        flow_type=data["flowType"],
        start_step=data.get("startStep"),
        input_schema=data["inputSchema"],
        steps=[
            engine.StepTypeDescription(
                step_type=s["stepType"],
                input_schema=s["inputSchema"],
                has_wait_for=s["hasWaitFor"],
                wait_for_locks=list(s["waitForLocks"]),
                execute_locks=list(s["executeLocks"]),
            )
            for s in data["steps"]
        ],
        rpcs=[
            engine.RPCDescription(
                name=r["name"],
                input_schema=r["inputSchema"],
                output_schema=r["outputSchema"],
                lock_attributes=list(r["lockAttributes"]),
                is_transactional=r["isTransactional"],
                timeout_seconds=r["timeoutSeconds"],
            )
            for r in data["rpcs"]
        ],
        attributes=[
            engine.AttributeDescription(
                name=a["name"],
                kind=a["kind"],
                schema=a["schema"],
                hard_delete_on_null=a["hardDeleteOnNull"],
                index=None
                if a.get("index") is None
                else engine.IndexDescription(a["index"]["type"], a["index"].get("key")),
            )
            for a in data["attributes"]
        ],
        streams=[
            engine.StreamDescription(
                name=s["name"], schema=s["schema"], stream_capacity_bytes=s["streamCapacityBytes"]
            )
            for s in data["streams"]
        ],
    )
