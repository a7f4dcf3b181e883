"""Schedules and SkipTimer over HTTP (DESIGN §14): bodies, answers and Problem codes."""

from __future__ import annotations

from typing import Any

from engine import Registry
from engine.testing import settle
from tests.conftest import manual_clock_config
from tests.engine.test_schedules import Job
from tests.engine.test_skip_timers import NapFlow
from tests.support.problems import assert_problem

REGISTRY = Registry([Job(), NapFlow()])
BODY = {"scheduleId": "job", "flowType": "Job", "input": "nightly", "everySeconds": 60}


async def test_create_describe_list_and_the_description_shape(make_app: Any, settings: Any) -> None:
    config, _clock = manual_clock_config(settings)
    async with make_app(REGISTRY, engine_config=config) as served:
        client = served.client
        created = await client.post("/api/v1/schedules", json=BODY)
        again = await client.post("/api/v1/schedules", json=BODY)
        described = await client.get("/api/v1/schedules/job")
        listed = await client.get("/api/v1/schedules", params={"pageSize": 1})
        missing = await client.get("/api/v1/schedules/nope")
    assert created.status_code == 201, created.text
    body = created.json()
    assert body == described.json()
    assert body["nextActionTimes"] == [
        "2027-01-15T08:01:00Z",
        "2027-01-15T08:02:00Z",
        "2027-01-15T08:03:00Z",
        "2027-01-15T08:04:00Z",
        "2027-01-15T08:05:00Z",
    ]
    for key in ("createdAt", "updatedAt", "nextActionTimes"):
        body.pop(key)
    assert body == {
        "scheduleId": "job",
        "flowType": "Job",
        "input": "nightly",
        "everySeconds": 60,
        "every": 60,
        "cron": None,
        "timezone": "UTC",
        "overlap": "SKIP",
        "catchupWindowSeconds": 60.0,
        "startOptions": {
            "initialAttributes": {},
            "idReusePolicy": "ALLOW_DUPLICATE",
            "timeoutSeconds": None,
            "startDelaySeconds": None,
        },
        "paused": False,
        "note": "",
        "recentActions": [],
        "running": [],
        "skipped": 0,
    }
    assert_problem(again, 409, "SCHEDULE_ALREADY_EXISTS")
    assert_problem(missing, 404, "SCHEDULE_NOT_FOUND")
    assert [s["scheduleId"] for s in listed.json()["schedules"]] == ["job"]
    assert listed.json()["nextPageToken"] == ""


async def test_a_bad_spec_is_400_naming_the_field(make_app: Any, settings: Any) -> None:
    cases = [
        ({**BODY, "flowType": "Nope"}, "flowType"),
        ({**BODY, "cron": "* * * * *"}, "everySeconds"),
        ({k: v for k, v in BODY.items() if k != "everySeconds"}, "everySeconds"),
        ({**BODY, "everySeconds": None, "cron": "61 * * * *"}, "cron"),
        ({**BODY, "everySeconds": None, "cron": "@daily", "timezone": "Mars/X"}, "timezone"),
        ({**BODY, "input": 7}, "input"),
        ({k: v for k, v in BODY.items() if k != "scheduleId"}, "scheduleId"),
    ]
    config, _clock = manual_clock_config(settings)
    async with make_app(REGISTRY, engine_config=config) as served:
        for body, field in cases:
            refused = await served.client.post("/api/v1/schedules", json=body)
            assert_problem(refused, 400, "INVALID_ARGUMENT", field=field)
        listed = await served.client.get("/api/v1/schedules")
    assert listed.json()["schedules"] == []


async def test_actions_pause_trigger_backfill_update_and_delete(
    make_app: Any, settings: Any
) -> None:
    config, clock = manual_clock_config(settings)
    async with make_app(REGISTRY, engine_config=config) as served:
        client = served.client
        await client.post("/api/v1/schedules", json={**BODY, "overlap": "ALLOW_ALL"})
        await clock.advance_when_idle(60)
        paused = await client.post("/api/v1/schedules/job/pause", json={"note": "deploy"})
        clock.advance(30)
        triggered = await client.post("/api/v1/schedules/job/trigger")
        backfill = await client.post(
            "/api/v1/schedules/job/backfill",
            json={"startAt": "2027-01-15T07:58:00Z", "endAt": "2027-01-15T08:00:00Z"},
        )
        unpaused = await client.post("/api/v1/schedules/job/unpause", json={"note": "done"})
        updated = await client.put(
            "/api/v1/schedules/job", json={**BODY, "everySeconds": 300, "note": "slower"}
        )
        found = await client.get(
            "/api/v1/flows", params={"query": "ScheduleId = 'job' ORDER BY FlowId ASC"}
        )
        deleted = await client.delete("/api/v1/schedules/job")
        gone = await client.delete("/api/v1/schedules/job")
    assert paused.json()["paused"] is True and paused.json()["note"] == "deploy"
    assert paused.json()["nextActionTimes"] == []
    assert triggered.status_code == 200 and triggered.json()["started"] is True
    assert triggered.json()["flowId"] == "job-20270115T080130Z"
    assert backfill.json() == {
        "started": ["job-20270115T075800Z", "job-20270115T075900Z"],
        "skipped": 0,
    }
    assert (unpaused.json()["paused"], unpaused.json()["note"]) == (False, "done")
    assert (updated.json()["everySeconds"], updated.json()["note"]) == (300, "slower")
    assert [f["flowId"] for f in found.json()["flows"]] == [
        "job-20270115T075800Z",
        "job-20270115T075900Z",
        "job-20270115T080100Z",
        "job-20270115T080130Z",
    ]
    assert deleted.status_code == 204
    assert_problem(gone, 404, "SCHEDULE_NOT_FOUND")


async def test_a_delayed_start_and_skipping_its_timer_over_http(
    make_app: Any, settings: Any
) -> None:
    config, clock = manual_clock_config(settings)
    async with make_app(REGISTRY, engine_config=config) as served:
        client = served.client
        started = await client.post(
            "/api/v1/flows",
            json={
                "flowType": "NapFlow",
                "flowId": "nap",
                "input": "timer",
                "options": {"startDelaySeconds": 3600},
            },
        )
        await settle(served.engine)
        [delayed] = (await client.get("/api/v1/flows/nap/pending-steps")).json()["steps"]
        early = await client.post(
            "/api/v1/flows/nap/timers/skip", json={"stepExecutionId": "Nap-1"}
        )
        await clock.advance_when_idle(3600)  # the delay ends: wait_for begins its Timer
        [waiting] = (await client.get("/api/v1/flows/nap/pending-steps")).json()["steps"]
        skipped = await client.post(
            "/api/v1/flows/nap/timers/skip", json={"stepExecutionId": "Nap-1"}
        )
        await settle(served.engine)
        result = (await client.get("/api/v1/flows/nap/result")).json()
        unknown = await client.post(
            "/api/v1/flows/nobody/timers/skip", json={"stepExecutionId": "Nap-1"}
        )
    assert started.status_code == 201
    assert (delayed["phase"], delayed["dueAt"]) == ("WAIT_FOR", "2027-01-15T09:00:00Z")
    # A start delay is not a Timer of the Step's wait: nothing to skip yet.
    assert_problem(early, 400, "INVALID_ARGUMENT", field="stepExecutionId")
    assert (waiting["phase"], waiting["timers"]) == ("EXECUTE", ["2027-01-15T10:00:00Z"])
    assert skipped.json() == {"fired": 1}
    assert result["status"] == "COMPLETED"
    assert_problem(unknown, 404, "FLOW_NOT_FOUND")
