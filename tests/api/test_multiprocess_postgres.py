"""Two `dexlite serve` processes on one PostgreSQL database behave as one engine.

Each test runs two real server processes over the same database (and blob directory); the
servers use short leases (tests/server.py), so a killed one's work moves on within seconds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.server import ServerProcess
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

pytestmark = postgres_only("several processes serve one PostgreSQL database")

CHUNKED = "/patterns/sequentially-chunked-attribute-map"
SHARED = "tests.support.shared_app:create"


def _pair(tmp_path: Path, factory: str = "app.main:create_app") -> list[ServerProcess]:
    servers = [ServerProcess(tmp_path, factory=factory) for _ in range(2)]
    for server in servers:
        server.start()
    return servers


async def test_registrations_round_robin_across_two_processes_get_every_sequence_once(
    tmp_path: Path,
) -> None:
    a, b = _pair(tmp_path)
    try:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=60) as ca,
            httpx.AsyncClient(base_url=b.url, timeout=60) as cb,
        ):
            assert (await ca.post(f"{CHUNKED}/start")).status_code == 201
            clients = [ca, cb]
            limit = asyncio.Semaphore(16)

            async def register(i: int) -> httpx.Response:
                async with limit:
                    return await clients[i % 2].post(
                        f"{CHUNKED}/register", json={"email": f"u{i}@example.com", "name": "n"}
                    )

            responses = await asyncio.gather(*(register(i) for i in range(400)))
            records: list[dict[str, Any]] = []
            token = "current"
            while True:  # read back through the other process
                page = (await cb.get(f"{CHUNKED}/subscribers", params={"pageToken": token})).json()
                records.extend(page["subscribers"])
                token = page["nextPageToken"]
                if not token:
                    break
    finally:
        a.stop()
        b.stop()
    assert [r.status_code for r in responses] == [201] * 400
    assert sorted(r.json()["sequence"] for r in responses) == list(range(1, 401))
    assert sorted(r["sequence"] for r in records) == list(range(1, 401))
    assert {r["email"] for r in records} == {f"u{i}@example.com" for i in range(400)}


async def _started(client: httpx.AsyncClient, flow_type: str, flow_id: str, **body: Any) -> None:
    response = await client.post(
        "/api/v1/flows", json={"flowType": flow_type, "flowId": flow_id, **body}
    )
    assert response.status_code == 201, response.text


async def _history(client: httpx.AsyncClient, flow_id: str) -> list[str]:
    response = await client.get(f"/api/v1/flows/{flow_id}/history", params={"pageSize": 1000})
    return [e["eventType"] for e in response.json()["events"]]


async def _closed_hold(client: httpx.AsyncClient, flow_id: str) -> bool:
    """Return True once the Flow's Hold Step has closed (its decision committed)."""
    return "STEP_CLOSED" in await _history(client, flow_id)


async def _bump(client: httpx.AsyncClient, flow_id: str) -> httpx.Response:
    return await client.post(f"/api/v1/flows/{flow_id}/rpcs/bump", json={"input": 10})


async def test_a_step_holding_a_lock_in_one_process_makes_an_rpc_in_the_other_conflict(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    a, b = _pair(tmp_path, SHARED)
    try:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30) as ca,
            httpx.AsyncClient(base_url=b.url, timeout=30) as cb,
        ):
            await _started(ca, "HoldFlow", "held", input=str(gate))

            early: list[int] = []

            async def step_running() -> bool:  # the lock is the Step's once it runs
                response = await _bump(cb, "held")
                if response.status_code == 200:
                    early.append(response.json()["output"])  # before the Step took it
                return response.status_code == 409

            await eventually(step_running, what="the Step in A to hold the lock")
            conflict = await _bump(cb, "held")
            gate.touch()
            await eventually(lambda: _closed_hold(cb, "held"), what="the Step's decision")
            after = await _bump(cb, "held")
    finally:
        a.stop()
        b.stop()
    assert conflict.status_code == 409
    assert conflict.json()["code"] == "RPC_LOCK_CONFLICT"
    assert "locked by a Step" in conflict.json()["detail"]
    # The Step's decision added 1, and each RPC that got the lock 10.
    assert after.status_code == 200 and after.json()["output"] == 1 + 10 * (len(early) + 1)


async def test_sigkill_of_one_process_the_other_finishes_its_steps_and_frees_its_locks(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    a, b = _pair(tmp_path, SHARED)
    flows = [f"hold-{i}" for i in range(6)]
    try:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30) as ca,
            httpx.AsyncClient(base_url=b.url, timeout=30) as cb,
        ):
            for flow_id in flows:  # started through A: A's commits claim their Steps
                await _started(ca, "HoldFlow", flow_id, input=str(gate))

            async def all_held() -> bool:
                codes = [(await _bump(cb, f)).status_code for f in flows]
                return codes == [409] * len(flows)

            await eventually(all_held, what="every Step to run in A, holding its lock")
            a.kill()  # mid-Step, locks held, no graceful shutdown
            gate.touch()
            for flow_id in flows:  # B takes the Steps over once A's lease expires
                await eventually(
                    lambda f=flow_id: _closed_hold(cb, f), within=30, what=f"{flow_id}'s Hold"
                )
            bumps = [await _bump(cb, f) for f in flows]
            histories = [await _history(cb, f) for f in flows]
    finally:
        a.kill()
        b.stop()
    # Each decision committed once (counter 1), then the RPC's 10: the locks were freed.
    assert [(r.status_code, r.json()) for r in bumps] == [(200, {"output": 11})] * len(flows)
    assert [h.count("STEP_CLOSED") for h in histories] == [1] * len(flows)


async def test_a_channel_message_published_through_one_process_wakes_a_step_in_the_other(
    tmp_path: Path,
) -> None:
    a, b = _pair(tmp_path, SHARED)
    try:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30) as ca,
            httpx.AsyncClient(base_url=b.url, timeout=30) as cb,
        ):
            await _started(cb, "OrderDeskFlow", "desk")  # B claims and runs its Step

            async def waiting() -> bool:
                return "STEP_WAITING" in await _history(ca, "desk")

            await eventually(waiting, what="the Step in B to begin its wait")
            posted = await ca.post(
                "/api/v1/flows/desk/channels/orders/messages", json={"value": "espresso"}
            )
            result = (await ca.get("/api/v1/flows/desk/result", params={"waitSeconds": 20})).json()
    finally:
        a.stop()
        b.stop()
    assert posted.status_code == 201
    assert result["status"] == "COMPLETED"
    assert result["completions"][0]["output"] == ["espresso"]


async def test_a_subflow_started_in_one_process_finishes_in_the_other_after_a_clean_stop(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    a, b = _pair(tmp_path, SHARED)
    try:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30) as ca,
            httpx.AsyncClient(base_url=b.url, timeout=30) as cb,
        ):
            await _started(ca, "SpawnFlow", "parent", input=str(gate))

            async def child_started() -> list[str]:
                response = await cb.get(
                    "/api/v1/flows", params={"query": "ParentFlowId = 'parent'"}
                )
                return [f["flowId"] for f in response.json()["flows"]]

            children = await eventually(child_started, what="the SubFlow to start in A")
            a.stop()  # a clean stop: A's lease ends at once, B takes over what A ran and watched
            gate.touch()
            result = (
                await cb.get("/api/v1/flows/parent/result", params={"waitSeconds": 30})
            ).json()
            child = (
                await cb.get(f"/api/v1/flows/{children[0]}/result", params={"waitSeconds": 5})
            ).json()
    finally:
        a.stop()
        b.stop()
    assert len(children) == 1
    assert child["status"] == "COMPLETED"
    assert result["status"] == "COMPLETED"
    assert result["completions"][0]["output"] == ["COMPLETED", [f"done after {gate}"]]


async def test_the_timeout_of_a_run_started_in_a_killed_process_fires_in_the_other(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "never"
    a, b = _pair(tmp_path, SHARED)
    try:
        async with httpx.AsyncClient(base_url=b.url, timeout=30) as cb:
            async with httpx.AsyncClient(base_url=a.url, timeout=30) as ca:
                await _started(
                    ca, "HoldFlow", "late", input=str(gate), options={"timeoutSeconds": 2}
                )
            a.kill()  # A armed the timeout; B finds it overdue
            result = (await cb.get("/api/v1/flows/late/result", params={"waitSeconds": 30})).json()
            history = await _history(cb, "late")
    finally:
        a.kill()
        b.stop()
    assert result["status"] == "TIMED_OUT"
    assert history == ["FLOW_STARTED", "FLOW_CLOSED"]  # closed once, by B
