"""The Attribute primitive over HTTP: indexed Attributes and AttributeMaps, the seed's locked
update_status RPC, and a hard-delete key that AttributeStep erases for good."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from app.settings import Settings
from tests.conftest import manual_clock_config
from tests.support.problems import assert_problem
from tests.support.waiting import once_step_locks_released, until_step_waiting

BASE = "/primitives/attribute"
STATUS = "primitive-attribute-status"
PAYMENT = "primitive-attribute-progress/payment"
KEY = "primitive-attribute-model-api-key"


async def start(client: httpx.AsyncClient, flow_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"{BASE}/start", params={"flowId": flow_id}, json=body)


async def read(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"{BASE}/attributes", params={"flowId": flow_id})
    assert response.status_code == 200, response.text
    return response.json()


async def update(client: httpx.AsyncClient, flow_id: str, status: str) -> httpx.Response:
    return await client.post(
        f"{BASE}/update-status", params={"flowId": flow_id}, json={"status": status}
    )


async def found(client: httpx.AsyncClient, query: str) -> set[str]:
    response = await client.get("/api/v1/flows", params={"query": query})
    assert response.status_code == 200, response.text
    return {f["flowId"] for f in response.json()["flows"]}


async def result(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10})
    assert response.status_code == 200, response.text
    return response.json()


def files_holding(root: Path, secret: str) -> list[str]:
    """Return the files under ``root`` (database, WAL, blobs) whose bytes contain ``secret``."""
    needle = secret.encode()
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and needle in path.read_bytes()
    )


async def test_start_commits_status_and_key_and_update_status_writes_both_indexes(
    make_client: Any, tmp_path: Path
) -> None:
    flow_id, secret = "attr-waiting", "sk-test-waiting-0001"
    async with make_client() as client:
        started = await start(client, flow_id, waitSeconds=30, modelApiKey=secret)
        await until_step_waiting(client, flow_id)
        first = await read(client, flow_id)
        pending = await found(client, "FlowType = 'AttributeFlow' AND keyword1 = 'pending'")
        updated = await once_step_locks_released(lambda: update(client, flow_id, "authorized"))
        second = await read(client, flow_id)
        by_status = await found(client, "FlowType = 'AttributeFlow' AND keyword1 = 'authorized'")
        by_payment = await found(client, "FlowType = 'AttributeFlow' AND keyword2 = 'authorized'")
        described = (await client.get(f"/api/v1/flows/{flow_id}")).json()
        holders = files_holding(tmp_path, secret)
    assert started.status_code == 201
    run_id = started.json()["runId"]
    assert started.json() == {"flowId": flow_id, "runId": run_id, "started": True}
    assert first == {
        "flowId": flow_id,
        "runId": run_id,
        "status": "pending",
        "payment": None,
        "modelApiKey": secret,
    }
    assert pending == {flow_id}
    assert updated.status_code == 200 and updated.json() == {"status": "authorized"}
    assert second == {**first, "status": "authorized", "payment": "authorized"}
    assert by_status == {flow_id} and by_payment == {flow_id}
    assert described["status"] == "RUNNING"
    # The key is not indexed: only the status and the payment progress are searchable.
    assert described["indexedAttributes"] == {"keyword1": "authorized", "keyword2": "authorized"}
    # A hard-delete value lives only in the blob store, never in the database or its WAL
    # (the server's: in process, the test's own blobs/; behind a front end, its server's).
    assert len(holders) == 1 and "blobs" in Path(holders[0]).parts, holders


async def test_the_step_completes_the_status_and_permanently_deletes_the_key(
    make_app: Any, settings: Settings, tmp_path: Path
) -> None:
    flow_id, secret = "attr-done", "sk-test-done-0002"
    config, clock = manual_clock_config(settings)
    async with make_app(engine_config=config) as served:
        client = served.client
        started = await start(client, flow_id, note="shipped", waitSeconds=0.5, modelApiKey=secret)
        await until_step_waiting(client, flow_id)
        updated = await once_step_locks_released(lambda: update(client, flow_id, "authorized"))
        await clock.advance_when_idle()  # to the Timer's deadline
        done = await result(client, flow_id)
        seen = await read(client, flow_id)
        raw = await client.get(
            f"/api/v1/flows/{flow_id}/attributes", params={"name": [STATUS, PAYMENT, KEY]}
        )
        completed = await found(client, "FlowType = 'AttributeFlow' AND keyword1 = 'completed'")
        authorized = await found(client, "FlowType = 'AttributeFlow' AND keyword1 = 'authorized'")
        payment = await found(client, "FlowType = 'AttributeFlow' AND keyword2 = 'authorized'")
        late = await update(client, flow_id, "refunded")
        history = await client.get(f"/api/v1/flows/{flow_id}/history")
    assert started.status_code == 201 and updated.status_code == 200
    assert done["status"] == "COMPLETED"
    assert [(c["stepType"], c["output"]) for c in done["completions"]] == [
        ("AttributeStep", "shipped")
    ]
    assert seen == {
        "flowId": flow_id,
        "runId": started.json()["runId"],
        "status": "completed",
        "payment": "authorized",
        "modelApiKey": None,
    }
    # GetAttributes leaves the deleted key out: a deleted hard-delete value reads as unset.
    assert raw.status_code == 200
    assert raw.json()["values"] == {STATUS: "completed", PAYMENT: "authorized"}
    assert completed == {flow_id} and authorized == set()
    # The Step wrote no other map instance, so keyword2 keeps the payment's value.
    assert payment == {flow_id}
    # update_status takes locks, so it needs an active run; a closed one answers 404.
    assert_problem(late, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert history.status_code == 200 and secret not in history.text
    assert files_holding(tmp_path, secret) == []


async def test_a_start_of_the_running_flow_overwrites_its_key_and_a_null_key_erases_it(
    make_client: Any, tmp_path: Path
) -> None:
    flow_id = "attr-restart"
    async with make_client() as client:
        first = await start(client, flow_id, waitSeconds=30, modelApiKey="sk-test-first-0003")
        again = await start(client, flow_id, waitSeconds=30, modelApiKey="sk-test-second-0004")
        replaced = await read(client, flow_id)
        erased_start = await start(client, flow_id, waitSeconds=30, modelApiKey=None)
        erased = await read(client, flow_id)
        match = await client.post(
            f"/api/v1/flows/{flow_id}/attribute-matches",
            json={"name": KEY, "operator": "EQ", "value": "x", "waitSeconds": 0},
        )
    run_id = first.json()["runId"]
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == {"flowId": flow_id, "runId": run_id, "started": False}
    # As the seed says: a start that fails because the Flow is running still overwrites the
    # running Flow's hard-delete value, and a null initial value deletes it.
    assert replaced["modelApiKey"] == "sk-test-second-0004"
    assert replaced["status"] == "pending"
    assert erased_start.status_code == 200 and erased_start.json()["started"] is False
    assert erased["modelApiKey"] is None
    assert files_holding(tmp_path, "sk-test-first-0003") == []
    assert files_holding(tmp_path, "sk-test-second-0004") == []
    # WaitForAttributeMatch rejects a hard-delete Attribute.
    assert (match.status_code, match.json()["code"]) == (400, "INVALID_ARGUMENT")


async def test_routes_of_a_missing_flow_and_bad_bodies_answer_with_their_codes(
    make_client: Any,
) -> None:
    async with make_client() as client:
        missing_read = await client.get(f"{BASE}/attributes", params={"flowId": "attr-missing"})
        missing_update = await update(client, "attr-missing", "authorized")
        blank = await update(client, "attr-missing", "")
        negative = await start(client, "attr-bad", waitSeconds=-1)
        unknown = await start(client, "attr-bad", colour="blue")
        never = await client.get(f"{BASE}/attributes", params={"flowId": "attr-bad"})
    assert (missing_read.status_code, missing_read.json()["code"]) == (404, "FLOW_NOT_FOUND")
    assert (missing_update.status_code, missing_update.json()["code"]) == (
        404,
        "FLOW_NOT_ACTIVE_OR_NOT_FOUND",
    )
    for response in (blank, negative, unknown):
        assert (response.status_code, response.json()["code"]) == (422, "VALIDATION_ERROR")
    assert never.status_code == 404
