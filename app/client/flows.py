"""Flow lifecycle over REST: start, wait, stop, search, history, pending Steps, Flow types and
time travel."""

from __future__ import annotations

from typing import Any

import engine
from app.client.base import ClientBase, segment
from app.client.decoding import (
    flow_info,
    flow_result,
    flow_type_description,
    history_page,
    pending_steps,
    seconds,
    validate_value,
    without_nones,
)
from app.client.flow_types import FlowRef, flow_type_name


class FlowCalls(ClientBase):
    """The Flow lifecycle calls of :class:`app.client.Client`."""

    async def start_flow(
        self,
        flow: FlowRef,
        flow_id: str,
        input: Any = None,
        options: engine.StartFlowOptions | None = None,
    ) -> engine.StartFlowResult:
        """Start a run of ``flow`` with ``input`` (startFlow); see ``Engine.start_flow``.

        With the Flow's declared input type (a Flow class or instance, or the Registry) the
        input is validated here first, as the engine validates it.
        """
        name = flow_type_name(flow)
        info = self._types.get(flow)
        if info is not None and info.input_type is not None:
            data = validate_value(info.input_type, input, what="input")
        else:
            data = engine.to_json_data(input)
        opts = options or engine.StartFlowOptions()
        body = {
            "flowType": name,
            "flowId": flow_id,
            "input": data,
            "options": without_nones(
                {
                    "initialAttributes": {
                        k: engine.to_json_data(v) for k, v in dict(opts.initial_attributes).items()
                    },
                    "idReusePolicy": str(opts.id_reuse_policy),
                    "timeoutSeconds": seconds(opts.timeout),
                    "requestId": opts.request_id,
                    "ignoreAlreadyStarted": opts.ignore_already_started,
                    "startDelaySeconds": seconds(opts.start_delay),
                }
            ),
        }
        answer = await self._call("POST", "/api/v1/flows", "startFlow", body=body)
        self._types.remember_run(answer["flowId"], answer["runId"], name)
        return engine.StartFlowResult(answer["flowId"], answer["runId"], answer["started"])

    async def wait_for_flow(
        self, flow_id: str, run_id: str | None = None, wait_seconds: float = 0.0
    ) -> engine.FlowResult:
        """Return the run's result, waiting up to ``wait_seconds`` for it to close
        (waitForFlow); a run still open when the wait ends comes back RUNNING."""
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}/result",
            "waitForFlow",
            params=without_nones({"runId": run_id, "waitSeconds": wait_seconds}),
            wait_seconds=wait_seconds,
        )
        return flow_result(data)

    async def stop_flow(
        self,
        flow_id: str,
        stop_type: engine.StopType | str = engine.StopType.CANCEL,
        reason: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Close the active run with CANCELED, TERMINATED or FAILED (stopFlow); return its
        run ID."""
        data = await self._call(
            "POST",
            f"/api/v1/flows/{segment(flow_id)}/stop",
            "stopFlow",
            params={"runId": run_id} if run_id else None,
            body=without_nones({"type": str(stop_type), "reason": reason}),
        )
        return str(data["runId"])

    async def search_flows(
        self,
        query: str = "",
        page_size: int = 100,
        page_token: str = "",
        *,
        flow_type: str | None = None,
    ) -> engine.SearchPage:
        """Return one page of the runs matching ``query`` (searchFlows).

        ``flow_type`` confines the search to one Flow type; the server combines it with the
        parsed query, so no filter text can widen it (as ``Engine.search_flows`` does).
        """
        if not isinstance(query, str):
            raise engine.InvalidQueryError("query must be a string", position=0, field="query")
        if flow_type is not None and not isinstance(flow_type, str):
            raise engine.InvalidArgumentError(
                "flow_type must be a non-empty string", field="flowType"
            )
        params: dict[str, Any] = {"query": query, "pageSize": page_size, "pageToken": page_token}
        if flow_type is not None:
            params["flowType"] = flow_type
        data = await self._call("GET", "/api/v1/flows", "searchFlows", params=params)
        flows = [flow_info(f) for f in data["flows"]]
        for found in flows:
            self._types.remember_run(found.flow_id, found.run_id, found.flow_type)
        return engine.SearchPage(flows, data.get("nextPageToken") or "")

    async def get_flow_history(
        self, flow_id: str, run_id: str | None = None, page_size: int = 100, page_token: str = ""
    ) -> engine.HistoryPage:
        """Return a page of the run's history, oldest first (getFlowHistory)."""
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}/history",
            "getFlowHistory",
            params=without_nones(
                {"runId": run_id, "pageSize": page_size, "pageToken": page_token or None}
            ),
        )
        return history_page(data)

    async def list_pending_steps(
        self, flow_id: str, run_id: str | None = None
    ) -> engine.PendingSteps:
        """Return the run's pending Step executions, oldest first (listPendingSteps)."""
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}/pending-steps",
            "listPendingSteps",
            params={"runId": run_id} if run_id else None,
        )
        return pending_steps(data)

    async def fetch_flow_types(self) -> list[engine.FlowTypeDescription]:
        """Ask the server for its Flow types (listFlowTypes) and keep them for
        :meth:`list_flow_types`."""
        data = await self._call("GET", "/api/v1/flow-types", "listFlowTypes")
        self._flow_types = [flow_type_description(d) for d in data["flowTypes"]]
        return list(self._flow_types)

    def list_flow_types(self) -> list[engine.FlowTypeDescription]:
        """Describe every Flow type served (listFlowTypes), without I/O.

        The FlowClient call is synchronous: it returns what :meth:`fetch_flow_types` fetched
        last, else the client's Registry described (RPC timeouts as declared, the engine's
        default for the others). Raises FailedPreconditionError with neither.
        """
        if self._flow_types is not None:
            return list(self._flow_types)
        if self.registry is not None:
            return self.registry.describe(engine.EngineConfig().default_rpc_timeout)
        raise engine.FailedPreconditionError(
            "the client has no Registry: await fetch_flow_types() before list_flow_types()",
            operation="listFlowTypes",
        )

    # -- time travel ----------------------------------------------------------------------------

    async def time_travel(
        self, flow_id: str, options: engine.TimeTravelOptions
    ) -> engine.TimeTravelResult:
        """Take the Flow's latest run back to a point (timeTravelFlow); see
        ``Engine.time_travel``."""
        body = without_nones(
            {
                "runId": options.run_id,
                "to": travel_point(options.to),
                "reason": options.reason,
                "skipWritesReapply": options.skip_writes_reapply,
                "forkToFlowId": options.fork_to_flow_id,
            }
        )
        data = await self._call(
            "POST", f"/api/v1/flows/{segment(flow_id)}/time-travel", "timeTravelFlow", body=body
        )
        return engine.TimeTravelResult(data["flowId"], data["runId"], data["previousRunId"])

    async def time_travel_flows(
        self,
        query: str,
        to: engine.TravelPoint,
        *,
        reason: str = "",
        skip_writes_reapply: bool = False,
        dry_run: bool = False,
        limit: int = 100,
    ) -> engine.BulkTimeTravelResult:
        """Take the latest run of every Flow ``query`` matches back to ``to``
        (timeTravelFlows)."""
        body = {
            "query": query,
            "to": travel_point(to),
            "reason": reason,
            "skipWritesReapply": skip_writes_reapply,
            "dryRun": dry_run,
            "limit": limit,
        }
        data = await self._call("POST", "/api/v1/time-travel", "timeTravelFlows", body=body)
        return engine.BulkTimeTravelResult(
            dry_run=data["dryRun"],
            matched=[engine.FlowRunRef(m["flowId"], m["runId"]) for m in data["matched"]],
            traveled=[
                engine.TimeTravelResult(t["flowId"], t["runId"], t["previousRunId"])
                for t in data["traveled"]
            ],
            failed=[
                engine.TimeTravelFailure(f["flowId"], f["runId"], f["code"], f["detail"])
                for f in data["failed"]
            ],
        )


def travel_point(point: engine.TravelPoint) -> dict[str, Any]:
    """Return the wire form of a travel point."""
    return without_nones(
        {
            "kind": str(point.kind),
            "eventId": point.event_id,
            "at": None if point.at is None else engine.to_json_data(point.at),
            "stepType": point.step_type_name,
            "stepExecutionId": point.step_execution_id,
            "method": str(point.method),
        }
    )
