"""The Timer primitive over HTTP: a Step waits on a durable Timer, then completes, and a
restart neither loses the Timer nor starts its wait over."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.settings import Settings
from engine.testing import settle
from patterns.primitives.timer.flow import fired_text
from tests.conftest import manual_clock_config

BASE = "/primitives/timer"


async def start(client: httpx.AsyncClient, flow_id: str, seconds: float) -> httpx.Response:
    response = await client.post(
        f"{BASE}/start", params={"flowId": flow_id}, json={"seconds": seconds}
    )
    assert response.status_code == 201, response.text
    return response


async def status(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"{BASE}/status", params={"flowId": flow_id})
    assert response.status_code == 200, response.text
    return response.json()


async def wait_until_waiting(client: httpx.AsyncClient, flow_id: str) -> None:
    """Return once the wait has begun, i.e. its due time is committed."""
    response = await client.post(
        f"/api/v1/flows/{flow_id}/attribute-matches",
        json={"name": "timer-status", "operator": "EQ", "value": "waiting", "waitSeconds": 5},
    )
    assert response.json() == {"matched": True, "value": "waiting"}, response.text


async def result(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10})
    assert response.status_code == 200, response.text
    return response.json()


def seconds_between(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


async def test_the_step_waits_for_the_timer_then_completes(
    make_app: Any, settings: Settings
) -> None:
    flow_id = "timer-basic"
    config, clock = manual_clock_config(settings)
    async with make_app(engine_config=config) as served:
        client = served.client
        started = await start(client, flow_id, 0.3)
        await wait_until_waiting(client, flow_id)
        began = clock.now()
        # Settled, the Step can only wait on its Timer: it fires when the clock gets there.
        await settle(served.engine)
        running = await status(client, flow_id)
        again = await client.post(f"{BASE}/start", params={"flowId": flow_id})
        fired_at = await clock.advance_when_idle()  # to the next deadline: the Timer's
        done = await result(client, flow_id)
        closed = await status(client, flow_id)
        attrs = await client.get(f"/api/v1/flows/{flow_id}/attributes")
    run_id = started.json()["runId"]
    assert fired_at - began == pytest.approx(0.3, abs=1e-6)  # the Timer was the deadline
    assert running["flowStatus"] == "RUNNING" and running["closedAt"] is None
    assert (running["flowId"], running["runId"]) == (flow_id, run_id)
    assert again.status_code == 200
    assert again.json() == {"flowId": flow_id, "runId": run_id, "started": False}
    assert done["status"] == "COMPLETED"
    assert [(c["stepType"], c["output"]) for c in done["completions"]] == [
        ("WaitForTimer", fired_text(0.3))
    ]
    assert closed["flowStatus"] == "COMPLETED"
    assert closed["startedAt"] == running["startedAt"]
    assert seconds_between(closed["startedAt"], closed["closedAt"]) >= 0.3
    assert attrs.json()["values"] == {"timer-status": "fired"}


async def test_a_timer_due_while_the_server_was_down_fires_at_once_after_restart(
    make_app: Any, settings: Settings
) -> None:
    flow_id = "timer-restart"
    config, clock = manual_clock_config(settings)
    async with make_app(engine_config=config) as served:
        started = await start(served.client, flow_id, 0.6)
        await wait_until_waiting(served.client, flow_id)
    # The server is down past the due time.
    clock.advance(0.7)
    reopened = datetime.fromtimestamp(clock.now(), UTC)
    async with make_app(engine_config=config) as served:
        # The clock stands still from here: only a Timer fired on recovery can close the run.
        await settle(served.engine)
        done = await result(served.client, flow_id)
        closed = await status(served.client, flow_id)
    assert done["status"] == "COMPLETED" and done["runId"] == started.json()["runId"]
    # Fired on recovery at its committed due time, not after a fresh 0.6 s wait.
    assert seconds_between(reopened.isoformat(), closed["closedAt"]) < 0.4


async def test_status_of_a_missing_flow_or_another_flow_type_is_404_and_bad_bodies_422(
    make_client: Any,
) -> None:
    async with make_client() as client:
        missing = await client.get(f"{BASE}/status", params={"flowId": "timer-missing"})
        await client.post("/primitives/rpc/start", params={"flowId": "not-a-timer"})
        other = await client.get(f"{BASE}/status", params={"flowId": "not-a-timer"})
        negative = await client.post(f"{BASE}/start", json={"seconds": -1})
        huge = await client.post(f"{BASE}/start", json={"seconds": 3601})
    for response in (missing, other):
        assert (response.status_code, response.json()["code"]) == (404, "FLOW_NOT_FOUND")
    for response in (negative, huge):
        assert (response.status_code, response.json()["code"]) == (422, "VALIDATION_ERROR")
