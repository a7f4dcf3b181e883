"""The RPC canceling Steps primitive (the seed's report/stop example) over HTTP, and the race
between the report's commit and a Stop, made deterministic with a gated RPC."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import httpx

from engine import (
    Context,
    EngineConfig,
    Flow,
    RPCResult,
    StartFlowOptions,
    StepList,
    rpc,
)
from engine.testing import settle
from patterns.primitives.rpc_canceling_steps.flow import (
    REPORT_READY,
    ReportFlow,
    ReportInput,
)
from tests.conftest import running_engine

BASE = "/primitives/rpc-canceling-steps"
FLOW_ID = "primitive-rpc-canceling-steps"


async def start(client: httpx.AsyncClient, flow_id: str, **body: Any) -> httpx.Response:
    response = await client.post(f"{BASE}/start", params={"flowId": flow_id}, json=body)
    assert response.status_code == 201, response.text
    return response


async def stop(client: httpx.AsyncClient, flow_id: str) -> httpx.Response:
    return await client.post(f"{BASE}/stop", params={"flowId": flow_id})


async def status(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"{BASE}/status", params={"flowId": flow_id})
    assert response.status_code == 200, response.text
    return response.json()


async def result(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10})
    assert response.status_code == 200, response.text
    return response.json()


def progress_path(flow_id: str) -> str:
    return f"/api/v1/streams/ReportFlow/{flow_id}/report-progress"


async def progress(client: httpx.AsyncClient, flow_id: str) -> list[Any]:
    response = await client.get(f"{progress_path(flow_id)}/messages")
    assert response.status_code == 200, response.text
    return [m["value"] for m in response.json()["messages"]]


async def history(client: httpx.AsyncClient, flow_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/flows/{flow_id}/history")
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


async def test_start_commits_the_generating_status_and_a_second_start_finds_the_run(
    make_client: Any,
) -> None:
    async with make_client() as client:
        first = await client.post(f"{BASE}/start")  # no body: the defaults
        again = await client.post(f"{BASE}/start")
        seen = await status(client, FLOW_ID)
        stopped = await stop(client, FLOW_ID)
    assert first.status_code == 201
    assert first.json()["flowId"] == FLOW_ID and first.json()["started"] is True
    assert again.status_code == 200
    assert again.json() == {**first.json(), "started": False}
    assert seen == {
        "flowId": FLOW_ID,
        "runId": first.json()["runId"],
        "flowStatus": "RUNNING",
        "reportStatus": "generating",
        "report": None,
    }
    assert stopped.json() == {"stopped": True}


async def test_stop_while_generating_cancels_the_step_and_finish_report_stop_records_it(
    make_app: Any,
) -> None:
    flow_id = "report-stopped"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id, sections=20, sectionSeconds=0.1)
        # The first section's progress message proves GenerateReport is running.
        first = await client.get(f"{progress_path(flow_id)}/next", params={"waitSeconds": 5})
        assert first.json()["message"]["value"] == 1
        stopped = await stop(client, flow_id)
        done = await result(client, flow_id)
        seen = await status(client, flow_id)
        written = await progress(client, flow_id)
        # A Step attempt that kept running would keep the engine busy until it had written
        # every section; settled, nothing runs that could still write.
        await settle(served.engine)
        later = await progress(client, flow_id)
        again = await stop(client, flow_id)
        events = await history(client, flow_id)
    assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
    assert done["status"] == "COMPLETED"
    assert [(c["stepType"], c["output"]) for c in done["completions"]] == [
        ("FinishReportStop", "stopped")
    ]
    assert seen["flowStatus"] == "COMPLETED"
    assert (seen["reportStatus"], seen["report"]) == ("stopped", None)
    assert 1 <= len(written) < 20
    assert written == list(range(len(written), 0, -1))
    assert later == written
    # The Flow has closed and the report is stopped: a read-only answer, no commit.
    assert again.status_code == 200 and again.json() == {"stopped": False}
    rpc_event = next(e for e in events if e["eventType"] == "RPC_COMMITTED")
    assert len(rpc_event["details"]["canceledSteps"]) == 1
    assert rpc_event["details"]["nextSteps"] == ["FinishReportStop"]
    closed = [e["details"]["stepType"] for e in events if e["eventType"] == "STEP_CLOSED"]
    assert "GenerateReport" not in closed


async def test_stop_after_the_report_is_ready_answers_false_and_the_report_is_delivered(
    make_client: Any,
) -> None:
    flow_id = "report-ready"
    async with make_client() as client:
        await start(client, flow_id, sections=2, sectionSeconds=0, deliverySeconds=0.5)
        match = await client.post(
            f"/api/v1/flows/{flow_id}/attribute-matches",
            json={"name": "report-status", "operator": "EQ", "value": "ready", "waitSeconds": 10},
        )
        assert match.json() == {"matched": True, "value": "ready"}
        while_delivering = await stop(client, flow_id)
        seen = await status(client, flow_id)
        done = await result(client, flow_id)
        after_close = await stop(client, flow_id)
        events = await history(client, flow_id)
    assert while_delivering.status_code == 200 and while_delivering.json() == {"stopped": False}
    assert seen["flowStatus"] == "RUNNING"
    assert (seen["reportStatus"], seen["report"]) == ("ready", ["Section 1", "Section 2"])
    assert done["status"] == "COMPLETED"
    assert [(c["stepType"], c["output"]) for c in done["completions"]] == [
        ("DeliverReport", ["Section 1", "Section 2"])
    ]
    assert after_close.status_code == 200 and after_close.json() == {"stopped": False}
    # A Stop that finds nothing to stop commits nothing.
    assert not any(e["eventType"] == "RPC_COMMITTED" for e in events)


async def test_stop_and_status_of_a_missing_flow_are_404(make_client: Any) -> None:
    async with make_client() as client:
        stopped = await stop(client, "report-missing")
        seen = await client.get(f"{BASE}/status", params={"flowId": "report-missing"})
        await client.post("/primitives/stream/start", params={"flowId": "not-a-report"})
        other = await stop(client, "not-a-report")
        other_status = await client.get(f"{BASE}/status", params={"flowId": "not-a-report"})
    assert (stopped.status_code, stopped.json()["code"]) == (404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert (seen.status_code, seen.json()["code"]) == (404, "FLOW_NOT_FOUND")
    # A Flow ID held by another Flow type is not a report either.
    assert (other.status_code, other.json()["code"]) == (404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert (other_status.status_code, other_status.json()["code"]) == (404, "FLOW_NOT_FOUND")


@dataclasses.dataclass
class RaceGate:
    """Holds the Stop between its snapshot and its commit: a test makes its own and hands it
    to the GatedReportFlow it registers."""

    snapshot_taken: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class GatedReportFlow(Flow[ReportInput]):
    """The primitive's state, Steps and stop_report decision, but the RPC waits between its
    snapshot and its commit. (A subclass of ReportFlow cannot redeclare stop_report: the
    Registry rejects an RPC name declared twice along the class hierarchy.)"""

    report_status = ReportFlow.report_status
    report = ReportFlow.report
    report_progress = ReportFlow.report_progress

    def __init__(self, gate: RaceGate) -> None:
        self.gate = gate

    def get_steps(self) -> StepList[ReportInput]:
        return ReportFlow.get_steps(self)  # type: ignore[arg-type]

    @rpc(timeout=timedelta(seconds=30))
    async def stop_report(self, context: Context, input: None) -> RPCResult[bool]:
        decided: RPCResult[bool] = ReportFlow.stop_report(self, context, input)
        self.gate.snapshot_taken.set()
        await self.gate.release.wait()
        return decided


async def test_a_report_committed_between_the_stops_snapshot_and_commit_is_delivered(
    engine_config: EngineConfig,
) -> None:
    gate = RaceGate()
    async with running_engine([GatedReportFlow(gate)], engine_config) as eng:
        await eng.start_flow(
            GatedReportFlow,
            "race",
            ReportInput(sections=2, section_seconds=0.1, delivery_seconds=0.3),
            # As the start route does: the Stop's snapshot sees a report being generated.
            StartFlowOptions(initial_attributes={"report-status": "generating"}),
        )
        stopping = asyncio.create_task(eng.invoke_rpc("stop_report", "race"))
        await asyncio.wait_for(gate.snapshot_taken.wait(), 5)
        ready = await eng.wait_for_attribute_match(
            "race", "report-status", "EQ", REPORT_READY, wait_seconds=10
        )
        assert ready.matched
        gate.release.set()
        # Not rejected, though the Step it cancels has already finished.
        assert await stopping is True
        done = await eng.wait_for_flow("race", wait_seconds=10)
        values = (await eng.get_attributes("race", ["report-status", "report"])).values
        events = (await eng.get_flow_history("race")).events
    assert done.status == "COMPLETED"
    assert [(c.step_type, c.output) for c in done.completions] == [
        ("DeliverReport", ["Section 1", "Section 2"])
    ]
    assert values == {"report-status": "ready", "report": ["Section 1", "Section 2"]}
    rpc_event = next(e for e in events if e.event_type == "RPC_COMMITTED")
    assert rpc_event.details["canceledSteps"] == []
    decisions = {
        e.details["stepType"]: e.details["decision"]
        for e in events
        if e.event_type == "STEP_CLOSED"
    }
    assert decisions == {
        "GenerateReport": "GO_TO",
        "FinishReportStop": "DEAD_END",
        "DeliverReport": "GRACEFUL_COMPLETE",
    }
