"""SIGTERM under load: ``dexlite serve`` finishes what it acknowledged, hands running Steps
back, exits 0, and the next start completes every Flow with each Step committed once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.server import ServerProcess
from tests.support.pipeline_app import HOLD_ENV, held_in
from tests.support.waiting import eventually

REGISTRY = "tests.support.pipeline_app:registry"
HELD_FLOWS = 24
STOP_SECONDS = 5


async def test_sigterm_under_load_loses_no_acknowledged_start_and_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    env = {
        "DEXLITE_REGISTRY": REGISTRY,
        HOLD_ENV: "1",
        "DEXLITE_SHUTDOWN_TIMEOUT_SECONDS": str(STOP_SECONDS),
    }
    server = ServerProcess(tmp_path, env=env, serve=True, log_level="info")
    server.start()
    acknowledged: list[int] = []
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for n in range(HELD_FLOWS):
                started = await client.post(
                    "/api/v1/flows",
                    json={"flowType": "PipelineFlow", "flowId": f"g-{n}", "input": n},
                )
                assert started.status_code == 201
                acknowledged.append(n)

            async def all_held_or_done() -> bool:
                page = await client.get(
                    "/api/v1/flows",
                    params={"query": "FlowType = 'PipelineFlow' AND Status = 'COMPLETED'"},
                )
                done = {f["flowId"] for f in page.json()["flows"]}
                return done == {f"g-{n}" for n in range(HELD_FLOWS) if held_in(n) is None}

            # Every Flow that does not complete now sits inside First, Second or Third.
            await eventually(all_held_or_done, within=30, what="the held Flows in place")

            async def keep_starting(first: int) -> None:
                """Start Flows one after another until the server stops answering."""
                n = first
                while True:
                    try:
                        started = await client.post(
                            "/api/v1/flows",
                            json={"flowType": "PipelineFlow", "flowId": f"g-{n}", "input": n},
                        )
                    except httpx.TransportError:
                        return
                    if started.status_code != 201:
                        return
                    acknowledged.append(n)
                    n += 1

            load = [asyncio.create_task(keep_starting(1000 * k)) for k in range(1, 5)]
            await eventually(lambda: len(acknowledged) >= HELD_FLOWS + 20, what="load")
            status = await asyncio.to_thread(server.terminate, STOP_SECONDS + 20)
            await asyncio.gather(*load)
    finally:
        server.kill()
    assert status == 0, server.log_text()
    assert "Shutting down" in server.log_text()

    restarted = ServerProcess(tmp_path, env={"DEXLITE_REGISTRY": REGISTRY}, serve=True)
    restarted.start()
    try:
        async with httpx.AsyncClient(base_url=restarted.url, timeout=30) as client:
            for n in acknowledged:
                result = await client.get(f"/api/v1/flows/g-{n}/result", params={"waitSeconds": 30})
                assert result.status_code == 200, (n, result.text)
                body = result.json()
                assert body["status"] == "COMPLETED", (n, body)
                assert [c["output"] for c in body["completions"]] == [n * 10]
                trail = await client.get(
                    f"/api/v1/flows/g-{n}/attributes", params={"name": "trail"}
                )
                # Each Step's decision committed exactly once, whatever the stop interrupted.
                assert trail.json()["values"]["trail"] == ["First", "Second", "Third"], n
    finally:
        restarted.stop()
