"""A small synchronous client of dexlite's REST API, for the command line.

One method per operation of DESIGN §5 that the CLI uses; each returns the decoded JSON body. An
error answer (application/problem+json) raises :class:`APIError` with its ``code``, HTTP status
and ``detail``; a server that cannot be reached raises it too, with no status.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict, cast
from urllib.parse import quote

import httpx

from app.cli.errors import APIError

#: Seconds a request may take beyond the long poll it asks the server for.
TIMEOUT_SECONDS = 30.0


class FlowInfo(TypedDict):
    """A run's identity and status (describeFlow, searchFlows)."""

    flowId: str
    runId: str
    flowType: str
    status: str
    startedAt: str
    closedAt: str | None
    indexedAttributes: dict[str, Any]
    parentFlowId: str | None
    parentRunId: str | None


class SearchPage(TypedDict):
    """A page of searchFlows."""

    flows: list[FlowInfo]
    nextPageToken: str


class HistoryEvent(TypedDict):
    """One event of a run's history."""

    eventId: int
    eventType: str
    at: str
    details: dict[str, Any]


class HistoryPage(TypedDict):
    """A page of getFlowHistory, oldest first."""

    flowId: str
    runId: str
    events: list[HistoryEvent]
    nextPageToken: str


class PendingStep(TypedDict):
    """A Step execution of a run that has not closed, and what it waits on (listPendingSteps)."""

    stepExecutionId: str
    stepType: str
    phase: str
    attempt: int
    createdAt: str
    dueAt: str | None
    timers: list[str]
    channels: list[str]
    subFlows: list[str]


class PendingSteps(TypedDict):
    """The pending Step executions of a run (listPendingSteps)."""

    flowId: str
    runId: str
    steps: list[PendingStep]


class StreamMessage(TypedDict):
    """One Stream message."""

    value: Any
    resumeToken: str
    createdAt: str
    source: str


class TravelResult(TypedDict):
    """The run a time travel created and the run it came from (timeTravelFlow)."""

    flowId: str
    runId: str
    previousRunId: str


class FlowRun(TypedDict):
    """A run of a Flow (a match of timeTravelFlows)."""

    flowId: str
    runId: str


class TravelFailure(TypedDict):
    """A matched run that could not travel, with the problem it met (timeTravelFlows)."""

    flowId: str
    runId: str
    code: str
    detail: str


class BulkTravelResult(TypedDict):
    """What timeTravelFlows matched, traveled and could not travel."""

    dryRun: bool
    matched: list[FlowRun]
    traveled: list[TravelResult]
    failed: list[TravelFailure]


class ScheduleAction(TypedDict):
    """A Flow a Schedule started: for which time, when, and its run's status now."""

    scheduledAt: str
    startedAt: str
    flowId: str
    runId: str
    status: str


class Schedule(TypedDict):
    """A Schedule's description (describeSchedule, createSchedule, ...)."""

    scheduleId: str
    flowType: str
    input: Any
    everySeconds: int | None
    every: int | None
    cron: str | None
    timezone: str
    overlap: str
    catchupWindowSeconds: float
    startOptions: dict[str, Any]
    paused: bool
    note: str
    nextActionTimes: list[str]
    recentActions: list[ScheduleAction]
    running: list[str]
    skipped: int
    createdAt: str
    updatedAt: str


class SchedulePage(TypedDict):
    """A page of listSchedules, by ID."""

    schedules: list[Schedule]
    nextPageToken: str


class _NoInput:
    """The type of :data:`NO_INPUT`."""

    def __repr__(self) -> str:
        return "NO_INPUT"


#: Passed as ``input`` when the user gave none: the request then carries no ``input`` field.
NO_INPUT: Final = _NoInput()


def _segment(value: str) -> str:
    """Return ``value`` escaped as one path segment (a ``/`` in an ID stays in the ID)."""
    return quote(value, safe="")


def _params(**values: Any) -> dict[str, Any]:
    """Return the query parameters that are set."""
    return {name: value for name, value in values.items() if value is not None}


class Client:
    """The REST API at ``base_url``, with an optional bearer ``token``.

    ``transport`` replaces the network (tests pass an ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=TIMEOUT_SECONDS, transport=transport
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        wait_seconds: float = 0.0,
    ) -> Any:
        """Send one request; return its JSON body, or raise :class:`APIError`."""
        try:
            response = self._http.request(
                method,
                path,
                params=params,
                json=body,
                timeout=TIMEOUT_SECONDS + wait_seconds,
            )
        except httpx.TimeoutException as exc:
            raise APIError("TIMEOUT", f"{self.base_url} did not answer in time ({exc})") from exc
        except httpx.TransportError as exc:
            raise APIError("CONNECTION_ERROR", f"cannot reach {self.base_url}: {exc}") from exc
        if not response.is_success:
            raise _problem(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            detail = f"{response.url} answered {response.status_code} with a body that is not JSON"
            raise APIError("INVALID_RESPONSE", detail, response.status_code) from None

    def start_flow(
        self, flow_type: str, flow_id: str, input: Any, options: dict[str, Any]
    ) -> dict[str, Any]:
        """startFlow: ``{flowId, runId, started}``."""
        body: dict[str, Any] = {"flowType": flow_type, "flowId": flow_id}
        if input is not NO_INPUT:
            body["input"] = input
        if options:
            body["options"] = options
        return cast(dict[str, Any], self.request("POST", "/api/v1/flows", body=body))

    def list_flow_types(self) -> list[dict[str, Any]]:
        """listFlowTypes: every Flow type the server runs, with its input schema and RPCs."""
        body = self.request("GET", "/api/v1/flow-types")
        return cast(list[dict[str, Any]], body["flowTypes"])

    def describe_flow(self, flow_id: str, run_id: str | None = None) -> FlowInfo:
        """describeFlow: the current (or given) run of ``flow_id``."""
        path = f"/api/v1/flows/{_segment(flow_id)}"
        return cast(FlowInfo, self.request("GET", path, params=_params(runId=run_id)))

    def wait_for_flow(
        self, flow_id: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> dict[str, Any]:
        """waitForFlow: the run's status and, once closed, its completions or error."""
        path = f"/api/v1/flows/{_segment(flow_id)}/result"
        params = _params(runId=run_id, waitSeconds=wait_seconds)
        return cast(
            dict[str, Any], self.request("GET", path, params=params, wait_seconds=wait_seconds)
        )

    def search_flows(self, query: str, page_size: int | None, page_token: str) -> SearchPage:
        """searchFlows: one page of the runs matching ``query``."""
        params = _params(query=query, pageSize=page_size, pageToken=page_token or None)
        return cast(SearchPage, self.request("GET", "/api/v1/flows", params=params))

    def stop_flow(
        self, flow_id: str, stop_type: str, reason: str | None, run_id: str | None = None
    ) -> dict[str, Any]:
        """stopFlow: ``{flowId, runId}`` of the run asked to stop."""
        path = f"/api/v1/flows/{_segment(flow_id)}/stop"
        body = {"type": stop_type, "reason": reason}
        return cast(
            dict[str, Any], self.request("POST", path, params=_params(runId=run_id), body=body)
        )

    def flow_history(
        self, flow_id: str, run_id: str | None, page_size: int | None, page_token: str
    ) -> HistoryPage:
        """getFlowHistory: one page of the run's events, oldest first."""
        path = f"/api/v1/flows/{_segment(flow_id)}/history"
        params = _params(runId=run_id, pageSize=page_size, pageToken=page_token or None)
        return cast(HistoryPage, self.request("GET", path, params=params))

    def invoke_rpc(
        self, flow_id: str, rpc_name: str, input: Any, run_id: str | None = None
    ) -> dict[str, Any]:
        """invokeRpc: ``{output}``."""
        path = f"/api/v1/flows/{_segment(flow_id)}/rpcs/{_segment(rpc_name)}"
        body: dict[str, Any] = {} if input is NO_INPUT else {"input": input}
        if run_id is not None:
            body["runId"] = run_id
        return cast(dict[str, Any], self.request("POST", path, body=body))

    def get_attributes(
        self, flow_id: str, names: list[str], run_id: str | None = None
    ) -> dict[str, Any]:
        """getAttributes: ``{flowId, runId, values}``; unset names are absent."""
        path = f"/api/v1/flows/{_segment(flow_id)}/attributes"
        params = _params(name=names or None, runId=run_id)
        return cast(dict[str, Any], self.request("GET", path, params=params))

    def list_channels(self, flow_id: str, run_id: str | None = None) -> dict[str, Any]:
        """listChannels: ``{flowId, runId, channels: [{name, instance, size}]}``."""
        path = f"/api/v1/flows/{_segment(flow_id)}/channels"
        return cast(dict[str, Any], self.request("GET", path, params=_params(runId=run_id)))

    def set_attributes(
        self, flow_id: str, values: dict[str, Any], run_id: str | None = None
    ) -> dict[str, Any]:
        """setAttributes: ``{flowId, runId}``; a None value erases the Attribute's value."""
        path = f"/api/v1/flows/{_segment(flow_id)}/attributes"
        body: dict[str, Any] = {"values": values}
        if run_id is not None:
            body["runId"] = run_id
        return cast(dict[str, Any], self.request("PUT", path, body=body))

    def publish_to_channel(
        self, flow_id: str, channel: str, value: Any, instance: str | None = None
    ) -> dict[str, Any]:
        """publishToChannel: ``{messageId}`` of the message published to the running run."""
        path = f"/api/v1/flows/{_segment(flow_id)}/channels/{_segment(channel)}/messages"
        body: dict[str, Any] = {"value": value}
        if instance is not None:
            body["instance"] = instance
        return cast(dict[str, Any], self.request("POST", path, body=body))

    def list_pending_steps(self, flow_id: str, run_id: str | None = None) -> PendingSteps:
        """listPendingSteps: the run's Step executions that have not closed."""
        path = f"/api/v1/flows/{_segment(flow_id)}/pending-steps"
        return cast(PendingSteps, self.request("GET", path, params=_params(runId=run_id)))

    def time_travel(
        self,
        flow_id: str,
        run_id: str,
        to: dict[str, Any],
        *,
        reason: str = "",
        skip_writes_reapply: bool = False,
        fork_to_flow_id: str | None = None,
    ) -> TravelResult:
        """timeTravelFlow: take run ``run_id`` (the latest) back to the point ``to``.

        Args:
            flow_id: The Flow ID whose latest run travels.
            run_id: That latest run; the server refuses any other (FAILED_PRECONDITION).
            to: The point as the API spells it, e.g. ``{"kind": "EVENT", "eventId": 3}``.
            reason: Why, kept in the new run's TIME_TRAVELED event.
            skip_writes_reapply: Leave out what RPCs and clients wrote after the point.
            fork_to_flow_id: Create the new run under this Flow ID instead.

        Returns:
            ``{flowId, runId, previousRunId}`` of the new run.
        """
        path = f"/api/v1/flows/{_segment(flow_id)}/time-travel"
        body: dict[str, Any] = {
            "runId": run_id,
            "to": to,
            "reason": reason,
            "skipWritesReapply": skip_writes_reapply,
        }
        if fork_to_flow_id is not None:
            body["forkToFlowId"] = fork_to_flow_id
        return cast(TravelResult, self.request("POST", path, body=body))

    def time_travel_all(
        self,
        query: str,
        to: dict[str, Any],
        *,
        reason: str = "",
        skip_writes_reapply: bool = False,
        dry_run: bool = False,
        limit: int | None = None,
    ) -> BulkTravelResult:
        """timeTravelFlows: take the latest runs ``query`` matches back to the point ``to``.

        Args:
            query: A searchFlows query (not empty).
            to: BEGINNING or STEP_TYPE, as the API spells it.
            reason: Why, kept in each new run's TIME_TRAVELED event.
            skip_writes_reapply: Leave out what RPCs and clients wrote after the point.
            dry_run: Only list the matching runs; change nothing.
            limit: At most this many runs; None for the server's default (100).

        Returns:
            The matched, traveled and failed runs.
        """
        body: dict[str, Any] = {
            "query": query,
            "to": to,
            "reason": reason,
            "skipWritesReapply": skip_writes_reapply,
            "dryRun": dry_run,
        }
        if limit is not None:
            body["limit"] = limit
        return cast(BulkTravelResult, self.request("POST", "/api/v1/time-travel", body=body))

    def skip_timers(
        self, flow_id: str, step_execution_id: str, run_id: str | None = None
    ) -> dict[str, Any]:
        """skipTimers: ``{fired}``, how many Timers of the pending execution fired now."""
        path = f"/api/v1/flows/{_segment(flow_id)}/timers/skip"
        body: dict[str, Any] = {"stepExecutionId": step_execution_id}
        if run_id is not None:
            body["runId"] = run_id
        return cast(dict[str, Any], self.request("POST", path, body=body))

    def create_schedule(self, spec: dict[str, Any]) -> Schedule:
        """createSchedule: the new Schedule's description."""
        return cast(Schedule, self.request("POST", "/api/v1/schedules", body=spec))

    def list_schedules(self, page_size: int | None, page_token: str) -> SchedulePage:
        """listSchedules: one page of Schedules by ID."""
        params = _params(pageSize=page_size, pageToken=page_token or None)
        return cast(SchedulePage, self.request("GET", "/api/v1/schedules", params=params))

    def describe_schedule(self, schedule_id: str) -> Schedule:
        """describeSchedule: the spec, next times, recent actions, running Flows, skips."""
        return cast(Schedule, self.request("GET", _schedule_path(schedule_id)))

    def update_schedule(self, schedule_id: str, spec: dict[str, Any]) -> Schedule:
        """updateSchedule: replace the spec (what ``spec`` leaves out takes its default)."""
        return cast(Schedule, self.request("PUT", _schedule_path(schedule_id), body=spec))

    def delete_schedule(self, schedule_id: str) -> None:
        """deleteSchedule; the Flows it started keep running."""
        self.request("DELETE", _schedule_path(schedule_id))

    def pause_schedule(self, schedule_id: str, note: str, *, paused: bool = True) -> Schedule:
        """pauseSchedule (unpauseSchedule with ``paused`` False), with a note saying why."""
        path = _schedule_path(schedule_id, "pause" if paused else "unpause")
        return cast(Schedule, self.request("POST", path, body={"note": note}))

    def trigger_schedule(self, schedule_id: str) -> dict[str, Any]:
        """triggerSchedule: ``{flowId, runId, started}`` of one action now."""
        path = _schedule_path(schedule_id, "trigger")
        return cast(dict[str, Any], self.request("POST", path))

    def backfill_schedule(self, schedule_id: str, start_at: str, end_at: str) -> dict[str, Any]:
        """backfillSchedule: ``{started: [flowId], skipped}`` for the times in [start, end)."""
        path = _schedule_path(schedule_id, "backfill")
        body = {"startAt": start_at, "endAt": end_at}
        return cast(dict[str, Any], self.request("POST", path, body=body))

    def newest_stream_message(
        self, flow_type: str, flow_id: str, stream: str
    ) -> StreamMessage | None:
        """listStreamMessages with one message: the newest retained, or None."""
        page = self.request(
            "GET", _stream_path(flow_type, flow_id, stream, "messages"), params={"pageSize": 1}
        )
        messages = cast(list[StreamMessage], page["messages"])
        return messages[0] if messages else None

    def read_stream(
        self, flow_type: str, flow_id: str, stream: str, resume_token: str, wait_seconds: float
    ) -> StreamMessage | None:
        """readStream: the message after ``resume_token``, or None when the wait ended."""
        path = _stream_path(flow_type, flow_id, stream, "next")
        params = {"resumeToken": resume_token, "waitSeconds": wait_seconds}
        answer = self.request("GET", path, params=params, wait_seconds=wait_seconds)
        return cast("StreamMessage | None", answer["message"])


def _schedule_path(schedule_id: str, action: str = "") -> str:
    path = f"/api/v1/schedules/{_segment(schedule_id)}"
    return f"{path}/{action}" if action else path


def _stream_path(flow_type: str, flow_id: str, stream: str, leaf: str) -> str:
    return f"/api/v1/streams/{_segment(flow_type)}/{_segment(flow_id)}/{_segment(stream)}/{leaf}"


def _problem(response: httpx.Response) -> APIError:
    """Return the error an unsuccessful answer stands for."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        detail = str(body.get("detail") or body.get("title") or "")
        position = body.get("position")
        if isinstance(position, int) and f"at position {position}" not in detail:
            detail += f" (at position {position} of the query)"
        return APIError(body["code"], detail, response.status_code, body)
    # Not one of ours (a proxy in between, say): name the status.
    detail = response.reason_phrase or "unexpected answer"
    return APIError(f"HTTP_{response.status_code}", detail, response.status_code, body)
