"""Time travel across processes: a travel through one process of a Flow whose Step runs in
another (PostgreSQL), and a server killed with SIGKILL in the middle of a travel by query
(each Flow traveled once or not at all)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx

from tests.server import ServerProcess
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

SHARED = "tests.support.shared_app:create"
TRAVEL = "tests.support.travel_app:create"


async def _json(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def _history(client: httpx.AsyncClient, flow_id: str, run_id: str) -> list[dict[str, Any]]:
    params = {"pageSize": 1000, "runId": run_id}
    return (await _json(await client.get(f"/api/v1/flows/{flow_id}/history", params=params)))[
        "events"
    ]


@postgres_only("several processes serve one PostgreSQL database")
async def test_a_travel_through_one_process_stops_the_step_running_in_the_other(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    a = ServerProcess(tmp_path, factory=SHARED).start()
    b = ServerProcess(tmp_path, factory=SHARED).start()
    try:
        async with (
            httpx.AsyncClient(base_url=a.url, timeout=30) as ca,
            httpx.AsyncClient(base_url=b.url, timeout=30) as cb,
        ):
            # Started through B, whose commit claims the Step: Hold-1 runs in B, holding the
            # counter lock until the gate file exists.
            body = {"flowType": "HoldFlow", "flowId": "held", "input": str(gate)}
            old = (await _json(await cb.post("/api/v1/flows", json=body), 201))["runId"]

            async def holding() -> bool:
                bump = await ca.post("/api/v1/flows/held/rpcs/bump", json={"input": 10})
                assert bump.status_code == 409, bump.text  # no RPC may take it first
                return True

            await eventually(holding, what="Hold-1 running in B")
            travel = {"runId": old, "to": {"kind": "BEGINNING"}, "reason": "from A"}
            new = await _json(await ca.post("/api/v1/flows/held/time-travel", json=travel), 201)
            assert new["previousRunId"] == old
            gate.touch()

            async def decided() -> bool:
                events = await _history(ca, "held", new["runId"])
                return "STEP_CLOSED" in [e["eventType"] for e in events]

            await eventually(decided, within=30, what="the new run's Hold-1 decision")
            old_events = await _history(cb, "held", old)
            values = await _json(await cb.get("/api/v1/flows/held/attributes"))
            old_values = await _json(
                await cb.get("/api/v1/flows/held/attributes", params={"runId": old})
            )
            described = await _json(await ca.get("/api/v1/flows/held", params={"runId": old}))
    finally:
        a.stop()
        b.stop()
    # B's attempt was canceled and nothing it returned committed: the old run ends with the
    # travel's close, its counter was never written; the new run's decision counted once.
    assert described["status"] == "TERMINATED"
    assert [e["eventType"] for e in old_events] == ["FLOW_STARTED", "FLOW_CLOSED"]
    assert old_events[-1]["details"]["reason"] == "time travel"
    assert old_values["values"] == {}
    assert (values["runId"], values["values"]) == (new["runId"], {"counter": 1})


async def _failed_orders(client: httpx.AsyncClient, count: int) -> None:
    """Start ``count`` orders whose Charge declines (their declineCharges is true); each gets
    its payment once Charge-1 waits for it (after the commit that queued Charge-1)."""
    for n in range(count):
        body = {
            "flowType": "OrderFlow",
            "flowId": f"order-{n}",
            "input": f"o-{n}",
            "options": {"initialAttributes": {"declineCharges": True}},
        }
        await _json(await client.post("/api/v1/flows", json=body), 201)
    for n in range(count):

        async def waiting(flow_id: str = f"order-{n}") -> bool:
            params = {"pageSize": 1000}
            page = await client.get(f"/api/v1/flows/{flow_id}/history", params=params)
            return "STEP_WAITING" in [e["eventType"] for e in (await _json(page))["events"]]

        await eventually(waiting, what=f"order-{n}'s Charge-1 to wait")
        await _json(
            await client.post(
                f"/api/v1/flows/order-{n}/channels/payments/messages", json={"value": f"p-{n}"}
            ),
            201,
        )
    for n in range(count):
        result = await client.get(f"/api/v1/flows/order-{n}/result", params={"waitSeconds": 30})
        assert (await _json(result))["status"] == "FAILED"


async def _runs(client: httpx.AsyncClient, flow_id: str) -> list[dict[str, Any]]:
    query = f"FlowId = '{flow_id}' ORDER BY StartTime ASC"
    params = {"query": query, "pageSize": 10}
    return (await _json(await client.get("/api/v1/flows", params=params)))["flows"]


async def test_a_server_killed_during_a_travel_by_query_traveled_each_flow_once_or_not_at_all(
    tmp_path: Path,
) -> None:
    count = 150
    server = ServerProcess(tmp_path, factory=TRAVEL).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            await _failed_orders(client, count)
            bulk = {
                "query": "FlowType = 'OrderFlow' AND Status = 'FAILED'",
                "to": {"kind": "STEP_TYPE", "stepType": "Charge"},
                "reason": "kill me",
                "skipWritesReapply": True,
                "limit": 1000,
            }
            call = asyncio.create_task(client.post("/api/v1/time-travel", json=bulk))

            async def some_traveled() -> bool:
                # The newest runs match first (SearchFlows' default order).
                runs = await _runs(client, f"order-{count - 1}")
                return len(runs) == 2

            await eventually(some_traveled, what="the first travel of the bulk call")
            server.kill()
            with contextlib.suppress(httpx.TransportError):
                await call  # the answer never came: the process died
        server.start()  # the same database, recovered
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            traveled = 0
            for n in range(count):
                runs = await _runs(client, f"order-{n}")
                assert [r["status"] for r in runs[:1]] == ["FAILED"], runs
                assert len(runs) in (1, 2), runs
                if len(runs) == 2:
                    traveled += 1
                    events = await _history(client, f"order-{n}", runs[1]["runId"])
                    kinds = [e["eventType"] for e in events]
                    assert kinds.count("TIME_TRAVELED") == 1
                    assert kinds[:3] == ["FLOW_STARTED", "STEP_CLOSED", "TIME_TRAVELED"]
                    assert events[2]["details"]["previousRunId"] == runs[0]["runId"]
            # Killed in the middle: some traveled, not all.
            assert 0 < traveled < count
            # The same call again travels exactly the rest (a traveled Flow's latest run is
            # no longer the FAILED one, which stays in the search as an older run).
            dry = {**bulk, "dryRun": True}
            rest = await _json(await client.post("/api/v1/time-travel", json=dry))
            assert len(rest["matched"]) == count - traveled
    finally:
        server.stop()
