"""A server killed with SIGKILL while Steps run resumes every Flow exactly where it stood."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.server import ServerProcess

FACTORY = "tests.support.pipeline_app:create"
FLOWS = 60


async def test_sigkill_mid_steps_then_restart_completes_every_flow_once(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, factory=FACTORY)
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            for n in range(FLOWS):
                started = await client.post(
                    "/api/v1/flows",
                    json={"flowType": "PipelineFlow", "flowId": f"p-{n}", "input": n},
                )
                assert started.status_code == 201
            await asyncio.sleep(0.4)  # some Flows done, some mid-way, some not begun
            running = await client.get(
                "/api/v1/flows",
                params={
                    "query": "FlowType = 'PipelineFlow' AND Status = 'RUNNING'",
                    "pageSize": 1000,
                },
            )
            server.kill()
    finally:
        server.kill()
    open_at_kill = len(running.json()["flows"])
    assert 0 < open_at_kill < FLOWS, "the kill should land while some Flows are mid-way"

    restarted = ServerProcess(tmp_path, factory=FACTORY)
    restarted.start()
    try:
        async with httpx.AsyncClient(base_url=restarted.url, timeout=30) as client:
            results = [
                (await client.get(f"/api/v1/flows/p-{n}/result", params={"waitSeconds": 20})).json()
                for n in range(FLOWS)
            ]
            trails = [
                (await client.get(f"/api/v1/flows/p-{n}/attributes", params={"name": "trail"}))
                .json()["values"]
                .get("trail")
                for n in range(FLOWS)
            ]
            histories = [
                (await client.get(f"/api/v1/flows/p-{n}/history")).json()["events"]
                for n in range(FLOWS)
            ]
    finally:
        restarted.stop()

    assert [r["status"] for r in results] == ["COMPLETED"] * FLOWS
    assert [[c["output"] for c in r["completions"]] for r in results] == [
        [n * 10] for n in range(FLOWS)
    ]
    # Each Step's decision committed exactly once, in order, whatever the kill interrupted.
    assert trails == [["First", "Second", "Third"]] * FLOWS
    for events in histories:
        closed = [e["details"]["stepType"] for e in events if e["eventType"] == "STEP_CLOSED"]
        assert closed == ["First", "Second", "Third"]
