"""Schedules across real server processes, on the wall clock: two processes on one PostgreSQL
fire each time once between them, and a server killed (SIGKILL) between two times fires what
it missed on restart, within the catch-up window, and skips what is older."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.server import ServerProcess
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

#: CounterFlow (a bundled example) has no start Step: each action's run stays open.
TICK = {"scheduleId": "tick", "flowType": "CounterFlow", "everySeconds": 1}


async def _actions(client: httpx.AsyncClient) -> dict[str, int]:
    """Return how many runs each Flow ID of the Schedule has."""
    query = {"query": "ScheduleId = 'tick'", "pageSize": 1000}
    flows = (await client.get("/api/v1/flows", params=query)).json()["flows"]
    runs: dict[str, int] = {}
    for info in flows:
        runs[info["flowId"]] = runs.get(info["flowId"], 0) + 1
    return runs


def _seconds(flow_ids: Any) -> list[int]:
    """Return the scheduled times (epoch seconds) the Flow IDs name, in order."""
    stamps = [flow_id.removeprefix("tick-") for flow_id in flow_ids]
    return sorted(int(datetime.strptime(s, "%Y%m%dT%H%M%S%z").timestamp()) for s in stamps)


@postgres_only("several processes serve one PostgreSQL database")
async def test_two_processes_fire_each_time_of_a_schedule_once_between_them(
    tmp_path: Path,
) -> None:
    servers = [ServerProcess(tmp_path) for _ in range(2)]
    for server in servers:
        server.start()
    try:
        async with (
            httpx.AsyncClient(base_url=servers[0].url, timeout=30) as a,
            httpx.AsyncClient(base_url=servers[1].url, timeout=30) as b,
        ):
            created = await a.post("/api/v1/schedules", json={**TICK, "overlap": "ALLOW_ALL"})
            assert created.status_code == 201, created.text

            async def eight_times() -> dict[str, int]:
                found = await _actions(b)
                assert len(found) >= 8
                return found

            await eventually(eight_times, within=60, what="eight scheduled times")
            assert (await b.delete("/api/v1/schedules/tick")).status_code == 204
            runs = await _actions(a)
    finally:
        for server in servers:
            server.stop()
    assert set(runs.values()) == {1}, runs  # no time started twice
    times = _seconds(runs)
    assert times == list(range(times[0], times[0] + len(times))), times  # none missed


async def _wait_for_times(client: httpx.AsyncClient, count: int) -> dict[str, int]:
    async def enough() -> dict[str, int]:
        found = await _actions(client)
        assert len(found) >= count
        return found

    return await eventually(enough, within=60, what=f"{count} scheduled times")


async def _kill_and_restart(
    tmp_path: Path, schedule: dict[str, Any], down_seconds: float
) -> tuple[list[int], dict[str, Any]]:
    server = ServerProcess(tmp_path).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            created = await client.post("/api/v1/schedules", json=schedule)
            assert created.status_code == 201, created.text
            await _wait_for_times(client, 2)
        server.kill()
        killed_at = datetime.now().timestamp()
        # The scenario is an outage of this length: nothing to synchronise on while it lasts.
        await asyncio.sleep(down_seconds)
        server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:

            async def caught_up() -> list[int]:
                times = _seconds(await _actions(client))
                assert times[-1] > killed_at + down_seconds
                return times

            times = await eventually(caught_up, within=60, what="times after the restart")
            described = (await client.get("/api/v1/schedules/tick")).json()
            await client.delete("/api/v1/schedules/tick")
    finally:
        server.stop()
    return times, described


async def test_times_missed_while_killed_fire_on_restart_within_the_catchup_window(
    tmp_path: Path,
) -> None:
    schedule = {**TICK, "overlap": "ALLOW_ALL", "catchupWindowSeconds": 60}
    times, described = await _kill_and_restart(tmp_path, schedule, down_seconds=4)
    assert times == list(range(times[0], times[0] + len(times))), times  # none missed
    assert described["skipped"] == 0


async def test_times_missed_beyond_the_catchup_window_are_skipped_and_counted(
    tmp_path: Path,
) -> None:
    schedule = {**TICK, "overlap": "ALLOW_ALL", "catchupWindowSeconds": 1}
    times, described = await _kill_and_restart(tmp_path, schedule, down_seconds=4)
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    # The outage's times (about four) were skipped, not started late.
    assert max(gaps) >= 3, times
    assert described["skipped"] >= 2
