"""listPendingSteps over HTTP: its wire form (RFC 3339 times, camelCase) and its errors."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine import Registry
from engine.testing import settle
from tests.conftest import manual_clock_config
from tests.engine.test_pending_steps import FLOWS, HOUR
from tests.support.problems import assert_problem


async def test_pending_steps_answer_phase_attempt_and_rfc3339_times(
    make_app: Any, settings: Any
) -> None:
    config, clock = manual_clock_config(settings)
    async with make_app(Registry(FLOWS), engine_config=config) as served:
        client = served.client
        started = await client.post("/api/v1/flows", json={"flowType": "NapFlow", "flowId": "n1"})
        await settle(served.engine)
        answer = await client.get("/api/v1/flows/n1/pending-steps")
        unknown = await client.get("/api/v1/flows/nobody/pending-steps")
        other_run = await client.get("/api/v1/flows/n1/pending-steps", params={"runId": "x"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    [step] = body.pop("steps")
    assert body == {"flowId": "n1", "runId": started.json()["runId"]}
    fires = datetime.fromtimestamp(clock.now() + HOUR.total_seconds()).astimezone()
    assert datetime.fromisoformat(step.pop("dueAt")) == fires
    assert [datetime.fromisoformat(t) for t in step.pop("timers")] == [fires]
    assert datetime.fromisoformat(step.pop("createdAt")) == fires - HOUR
    assert step == {
        "stepExecutionId": "Nap-1",
        "stepType": "Nap",
        "phase": "EXECUTE",
        "attempt": 1,
        "channels": [],
        "subFlows": [],
    }
    assert_problem(unknown, 404, "FLOW_NOT_FOUND")
    assert_problem(other_run, 404, "FLOW_NOT_FOUND")


async def test_a_waiting_step_over_http_lists_its_channels(make_app: Any, settings: Any) -> None:
    config, _clock = manual_clock_config(settings)
    async with make_app(Registry(FLOWS), engine_config=config) as served:
        await served.client.post("/api/v1/flows", json={"flowType": "ListenFlow", "flowId": "l1"})
        await settle(served.engine)
        [step] = (await served.client.get("/api/v1/flows/l1/pending-steps")).json()["steps"]
    assert (step["phase"], step["channels"], len(step["timers"])) == (
        "WAITING",
        ["orders", "per-region/eu"],
        1,
    )
    assert step["dueAt"] is None
    assert timedelta(0) < datetime.fromisoformat(step["timers"][0]) - datetime.fromisoformat(
        step["createdAt"]
    )
