"""A server killed with SIGKILL while Steps run resumes every Flow exactly where it stood."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.server import ServerProcess
from tests.support.pipeline_app import HOLD_ENV, held_in
from tests.support.waiting import eventually

FACTORY = "tests.support.pipeline_app:create"
FLOWS = 60


async def _flow_ids(client: httpx.AsyncClient, where: str) -> list[str]:
    """Return the sorted Flow IDs of the PipelineFlow runs matching ``where``."""
    page = await client.get(
        "/api/v1/flows",
        params={"query": f"FlowType = 'PipelineFlow' AND ({where})", "pageSize": 1000},
    )
    assert page.status_code == 200, page.text
    return sorted(f["flowId"] for f in page.json()["flows"])


def _expected(held: str | None) -> list[str]:
    return sorted(f"p-{n}" for n in range(FLOWS) if held_in(n) == held)


async def test_sigkill_mid_steps_then_restart_completes_every_flow_once(tmp_path: Path) -> None:
    # The first server completes a quarter of the Flows and holds the others inside First,
    # Second or Third: the kill lands with each of them mid-Step, at a known point.
    server = ServerProcess(tmp_path, factory=FACTORY, env={HOLD_ENV: "1"})
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            for n in range(FLOWS):
                started = await client.post(
                    "/api/v1/flows",
                    json={"flowType": "PipelineFlow", "flowId": f"p-{n}", "input": n},
                )
                assert started.status_code == 201

            async def standing() -> dict[str, list[str]]:
                return {
                    "completed": await _flow_ids(client, "Status = 'COMPLETED'"),
                    "in First": await _flow_ids(client, "Status = 'RUNNING' AND keyword1 IS NULL"),
                    "in Second": await _flow_ids(
                        client, "Status = 'RUNNING' AND keyword1 = 'First'"
                    ),
                    "in Third": await _flow_ids(
                        client, "Status = 'RUNNING' AND keyword1 = 'Second'"
                    ),
                }

            expected = {
                "completed": _expected(None),
                "in First": _expected("First"),
                "in Second": _expected("Second"),
                "in Third": _expected("Third"),
            }

            async def in_place() -> bool:
                return await standing() == expected

            # Some Flows are done, the others wait mid-way with every decision before committed.
            await eventually(in_place, within=30, interval=0.05, what="every Flow in its place")
            running = await _flow_ids(client, "Status = 'RUNNING'")
            server.kill()
    finally:
        server.kill()
    assert 0 < len(running) < FLOWS, "the kill should land while some Flows are mid-way"
    assert running == sorted(f"p-{n}" for n in range(FLOWS) if held_in(n) is not None)

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
