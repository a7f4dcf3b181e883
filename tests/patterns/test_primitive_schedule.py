"""The Schedule primitive over HTTP: a Schedule starts a DigestFlow every few seconds; the
example creates it, reads it, triggers it and deletes it (on a ManualClock)."""

from __future__ import annotations

from typing import Any

from app.settings import Settings
from tests.conftest import manual_clock_config
from tests.support.problems import assert_problem

BASE = "/primitives/schedule"


async def test_the_schedule_starts_a_digest_every_period_and_can_be_triggered(
    make_app: Any, settings: Settings
) -> None:
    config, clock = manual_clock_config(settings)
    async with make_app(engine_config=config) as served:
        client = served.client
        missing = await client.get(f"{BASE}/status")
        created = await client.post(f"{BASE}/start", json={"everySeconds": 30, "topic": "ops"})
        again = await client.post(f"{BASE}/start")
        await clock.advance_when_idle(30)
        fired = (await client.get(f"{BASE}/status")).json()
        clock.advance(1)
        triggered = (await client.post(f"{BASE}/trigger")).json()
        result = (
            await client.get(
                f"/api/v1/flows/{triggered['flowId']}/result", params={"waitSeconds": 5}
            )
        ).json()
        stopped = await client.post(f"{BASE}/stop")
        gone = await client.get(f"{BASE}/status")
    assert_problem(missing, 404, "SCHEDULE_NOT_FOUND")
    assert created.status_code == 201 and again.status_code == 200
    body = created.json()
    assert (body["scheduleId"], body["everySeconds"], body["overlap"]) == (
        "primitive-schedule",
        30,
        "SKIP",
    )
    assert body["nextActionTimes"][0] == "2027-01-15T08:00:30Z"
    [action] = fired["recentActions"]
    assert (action["flowId"], action["scheduledAt"], action["status"]) == (
        "primitive-schedule-20270115T080030Z",
        "2027-01-15T08:00:30Z",
        "COMPLETED",
    )
    assert triggered["started"] is True
    assert triggered["flowId"] == "primitive-schedule-20270115T080031Z"
    assert result["status"] == "COMPLETED"
    assert result["completions"][0]["output"] == "digest of ops sent"
    assert stopped.status_code == 204
    assert_problem(gone, 404, "SCHEDULE_NOT_FOUND")
