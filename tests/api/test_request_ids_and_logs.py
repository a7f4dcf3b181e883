"""X-Request-ID on every answer, and JSON logs that name the request and the Flow but never a
secret (the API token, a hard-delete value)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.server import ServerProcess
from tests.support.waiting import wait_until

SECRET_TOKEN = "tok-7d41c0ffee-never-logged"
HARD_DELETE_VALUE = "sk-test-9f3e-never-logged"


async def test_every_answer_carries_a_request_id(make_client: Any) -> None:
    async with make_client() as client:
        fresh = await client.get("/healthz")
        generated = fresh.headers["x-request-id"]
        assert len(generated) == 32 and int(generated, 16) >= 0
        again = await client.get("/healthz")
        assert again.headers["x-request-id"] != generated
        kept = await client.get("/api/v1/flows/none-such", headers={"X-Request-ID": "req-42.a"})
        assert kept.status_code == 404
        assert kept.headers["x-request-id"] == "req-42.a"
        for unusable in ("has spaces", "x" * 129, "tab\there"):
            replaced = await client.get("/healthz", headers={"X-Request-ID": unusable})
            assert replaced.headers["x-request-id"] != unusable
            assert len(replaced.headers["x-request-id"]) == 32


def test_json_logs_name_the_request_and_the_flow_and_no_secret(tmp_path: Path) -> None:
    env = {
        "DEXLITE_LOG_FORMAT": "json",
        "DEXLITE_API_TOKEN": SECRET_TOKEN,
        "DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL",
    }
    auth = {"Authorization": f"Bearer {SECRET_TOKEN}"}
    with ServerProcess(tmp_path, env=env, log_level="info") as server:
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:
            started = client.post(
                "/primitives/attribute/start",
                params={"flowId": "logged-flow"},
                # A long wait: the Step deletes the key once its wait ends, and the read below
                # must find it.
                json={"modelApiKey": HARD_DELETE_VALUE, "waitSeconds": 600},
                headers={"X-Request-ID": "start-1"},
            )
            assert started.status_code == 201, started.text
            read = client.get(
                "/api/v1/flows/logged-flow/attributes",
                params={"name": "primitive-attribute-model-api-key"},
                headers={"X-Request-ID": "read-1"},
            )
            values = read.json()["values"]
            assert values["primitive-attribute-model-api-key"] == HARD_DELETE_VALUE
            denied = client.get("/api/v1/flows/logged-flow", headers={"Authorization": "Bearer no"})
            assert denied.status_code == 401

        def access_lines() -> list[dict[str, Any]]:
            lines = [json.loads(line) for line in server.log_text().splitlines() if line.strip()]
            return [line for line in lines if line.get("logger") == "dexlite.access"]

        def all_three_written() -> list[dict[str, Any]] | None:
            # A request's access line is written once its answer is sent: wait for the three.
            lines = access_lines()
            ids = {line["requestId"] for line in lines}
            denied = any(line["status"] == 401 for line in lines)
            return lines if {"start-1", "read-1"} <= ids and denied else None

        lines = wait_until(all_three_written, what="the three access lines")
        text = server.log_text()
    # Every line the server wrote is one JSON object.
    assert all(json.loads(line) for line in text.splitlines() if line.strip())
    by_id = {line["requestId"]: line for line in lines}
    assert by_id["start-1"]["flowId"] == "logged-flow"
    assert by_id["start-1"]["status"] == 201
    assert by_id["read-1"]["flowId"] == "logged-flow"
    assert by_id["read-1"]["path"] == "/api/v1/flows/logged-flow/attributes"
    assert any(line["status"] == 401 for line in lines)
    assert SECRET_TOKEN not in text
    assert HARD_DELETE_VALUE not in text
