"""The RPC primitive over HTTP: a locked read-modify-write counter, the lock conflict a held
lock causes, Steps queueing for the lock, and a read-only RPC on a closed Flow."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpx

from engine.testing import settle
from patterns.primitives.rpc.flow import RELEASING_TEXT, holding_text

BASE = "/primitives/rpc"


async def start(client: httpx.AsyncClient, flow_id: str) -> httpx.Response:
    response = await client.post(f"{BASE}/start", params={"flowId": flow_id})
    assert response.status_code == 201, response.text
    return response


async def increment(client: httpx.AsyncClient, flow_id: str, by: int = 1) -> httpx.Response:
    return await client.post(f"{BASE}/increment", params={"flowId": flow_id}, json={"by": by})


async def hold(client: httpx.AsyncClient, flow_id: str, seconds: float) -> httpx.Response:
    return await client.post(f"{BASE}/hold", params={"flowId": flow_id}, json={"seconds": seconds})


async def counter(client: httpx.AsyncClient, flow_id: str) -> httpx.Response:
    return await client.get(f"{BASE}/counter", params={"flowId": flow_id})


async def next_lock_event(client: httpx.AsyncClient, flow_id: str, after: str = "") -> Any:
    """Return the next message of the counter-lock Stream after ``after``, waiting for it."""
    response = await client.get(
        f"/api/v1/streams/CounterFlow/{flow_id}/counter-lock/next",
        params={"resumeToken": after, "waitSeconds": 5},
    )
    assert response.status_code == 200, response.text
    message = response.json()["message"]
    assert message is not None
    return message


async def test_start_sets_the_counter_to_zero_and_increments_add_up(make_client: Any) -> None:
    flow_id = "counter-basic"
    async with make_client() as client:
        started = await start(client, flow_id)
        again = await client.post(f"{BASE}/start", params={"flowId": flow_id})
        initial = await counter(client, flow_id)
        first = await increment(client, flow_id, 2)
        default = await client.post(f"{BASE}/increment", params={"flowId": flow_id})
        after = await counter(client, flow_id)
        attrs = await client.get(f"/api/v1/flows/{flow_id}/attributes")
    assert again.status_code == 200
    assert again.json() == {**started.json(), "started": False}
    assert initial.json() == {"counter": 0}
    assert first.status_code == 200 and first.json() == {"counter": 2}
    assert default.status_code == 200 and default.json() == {"counter": 3}
    assert after.json() == {"counter": 3}
    assert attrs.json()["values"] == {"counter": 3}


async def test_an_increment_while_a_step_holds_the_lock_is_409_with_retry_after(
    make_app: Any,
) -> None:
    flow_id = "counter-held"
    async with make_app() as served:
        client = served.client
        await start(client, flow_id)
        held = await hold(client, flow_id, 0.5)
        # The Step writes this once it holds the lock, so the increment below must collide.
        holding = await next_lock_event(client, flow_id)
        conflict = await increment(client, flow_id)
        read_meanwhile = await counter(client, flow_id)
        releasing = await next_lock_event(client, flow_id, holding["resumeToken"])
        # The lock goes when the Step's decision commits, just after its last message: once
        # the engine has settled, that commit is done.
        await settle(served.engine)
        retried = await increment(client, flow_id)
        final = await counter(client, flow_id)
        still = await client.get(f"/api/v1/flows/{flow_id}")
    assert held.status_code == 200 and held.json() == {"seconds": 0.5}
    assert holding["value"] == holding_text(0.5)
    assert conflict.status_code == 409
    assert conflict.headers["content-type"].startswith("application/problem+json")
    assert conflict.headers["retry-after"] == "1"
    problem = conflict.json()
    assert problem["code"] == "RPC_LOCK_CONFLICT"
    assert problem["detail"] == "RPC lock conflict: attribute key counter is locked by a Step"
    assert problem["lockKey"] == "counter"
    # A read-only RPC takes no lock, so the hold does not stop it.
    assert read_meanwhile.status_code == 200 and read_meanwhile.json() == {"counter": 0}
    assert releasing["value"] == RELEASING_TEXT
    # The failed increment committed nothing; the retry counted once.
    assert retried.status_code == 200 and retried.json() == {"counter": 1}
    assert final.json() == {"counter": 1}
    # The hold ended its branch without a completion: the RPC-only Flow keeps running.
    assert still.json()["status"] == "RUNNING"


async def test_concurrent_increments_retried_after_conflicts_lose_no_update(
    make_client: Any,
) -> None:
    flow_id = "counter-race"
    conflicts: list[httpx.Response] = []

    async def increment_until_counted(client: httpx.AsyncClient, n: int) -> int:
        for attempt in range(500):
            response = await increment(client, flow_id)
            if response.status_code != 409:
                assert response.status_code == 200, response.text
                value: int = response.json()["counter"]
                return value
            conflicts.append(response)
            # The seed's advice: retry specifically after the conflict, with backoff.
            await asyncio.sleep(random.uniform(0, 0.002 * min(attempt + 1, 10)))
        raise AssertionError(f"increment {n} never got the lock")

    async with make_client() as client:
        await start(client, flow_id)
        won = await asyncio.gather(*(increment_until_counted(client, n) for n in range(20)))
        final = await counter(client, flow_id)
    # Successful calls serialize through the lock: each saw the one before it.
    assert sorted(won) == list(range(1, 21))
    assert final.json() == {"counter": 20}
    assert conflicts, "20 simultaneous increments should have collided at least once"
    for lost in conflicts:
        assert lost.json()["code"] == "RPC_LOCK_CONFLICT"
        assert lost.headers["retry-after"] == "1"


async def test_finish_queues_behind_the_hold_and_the_read_only_rpc_answers_once_closed(
    make_client: Any,
) -> None:
    flow_id = "counter-finish"
    async with make_client() as client:
        started = await start(client, flow_id)
        await increment(client, flow_id, 5)
        await hold(client, flow_id, 0.3)
        await next_lock_event(client, flow_id)
        finished = await client.post(f"{BASE}/finish", params={"flowId": flow_id})
        # FinishCounting waits for the lock: Steps queue where RPCs get a conflict.
        waiting = await client.get(f"/api/v1/flows/{flow_id}/result")
        done = await client.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10})
        read_closed = await counter(client, flow_id)
        late_increment = await increment(client, flow_id)
        late_hold = await hold(client, flow_id, 1)
        late_finish = await client.post(f"{BASE}/finish", params={"flowId": flow_id})
        events = (await client.get(f"/api/v1/flows/{flow_id}/history")).json()["events"]
    run_id = started.json()["runId"]
    assert finished.status_code == 200
    assert finished.json() == {"flowId": flow_id, "runId": run_id}
    assert waiting.json()["status"] == "RUNNING"
    assert done.json()["status"] == "COMPLETED"
    assert [(c["stepType"], c["output"]) for c in done.json()["completions"]] == [
        ("FinishCounting", 5)
    ]
    closed = [
        (e["details"]["stepType"], e["details"]["decision"])
        for e in events
        if e["eventType"] == "STEP_CLOSED"
    ]
    assert closed == [("HoldCounterLock", "DEAD_END"), ("FinishCounting", "FORCE_COMPLETE")]
    # No lock, no effects: the read reaches the retained closed run.
    assert read_closed.status_code == 200 and read_closed.json() == {"counter": 5}
    for late in (late_increment, late_hold, late_finish):
        assert (late.status_code, late.json()["code"]) == (404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


async def test_a_missing_flow_another_flow_type_and_bad_bodies_answer_with_their_codes(
    make_client: Any,
) -> None:
    async with make_client() as client:
        missing = [
            await increment(client, "counter-missing"),
            await counter(client, "counter-missing"),
            await hold(client, "counter-missing", 1),
        ]
        await client.post("/primitives/client-apis/start", params={"flowId": "not-a-counter"})
        other = await counter(client, "not-a-counter")
        zero = await increment(client, "counter-missing", 0)
        too_long = await hold(client, "counter-missing", 61)
    for response in [*missing, other]:
        assert (response.status_code, response.json()["code"]) == (
            404,
            "FLOW_NOT_ACTIVE_OR_NOT_FOUND",
        )
    for response in (zero, too_long):
        assert (response.status_code, response.json()["code"]) == (422, "VALIDATION_ERROR")
