"""The Stream primitive over HTTP: a Step's progress messages, listed newest first."""

from __future__ import annotations

from typing import Any

import httpx

BASE = "/primitives/stream"
FLOW_ID = "primitive-stream"


async def start(client: httpx.AsyncClient, flow_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"{BASE}/start", params={"flowId": flow_id}, json=body)


async def result(client: httpx.AsyncClient, flow_id: str) -> Any:
    response = await client.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10})
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_step_writes_one_message_per_section_listed_newest_first_then_completes(
    make_client: Any,
) -> None:
    async with make_client() as client:
        started = await start(client, "progress-1", sections=3, delaySeconds=0.01)
        done = await result(client, "progress-1")
        listed = await client.get(f"{BASE}/messages", params={"flowId": "progress-1"})
        # The engine API reads the same Stream.
        raw = await client.get("/api/v1/streams/ProgressFlow/progress-1/progress/messages")
    assert started.status_code == 201
    assert started.json() == {
        "flowId": "progress-1",
        "runId": done["runId"],
        "started": True,
    }
    assert done["status"] == "COMPLETED"
    [completion] = done["completions"]
    assert (completion["stepType"], completion["output"]) == ("WriteProgress", "3 sections done")
    assert listed.status_code == 200
    body = listed.json()
    assert [m["value"] for m in body["messages"]] == [
        "section 3 of 3 done",
        "section 2 of 3 done",
        "section 1 of 3 done",
    ]
    assert {m["source"] for m in body["messages"]} == {f"#{completion['stepExecutionId']}"}
    created = [m["createdAt"] for m in body["messages"]]
    assert created == sorted(created, reverse=True)
    assert body["nextPageToken"] == ""
    assert raw.json() == body


async def test_the_default_flow_id_and_section_count_write_five_sections(
    make_client: Any,
) -> None:
    async with make_client() as client:
        # The defaults, five sections of half a second: the second start below comes while it
        # runs, with room for a loaded machine (at 0.1 s a section, a suite on four workers once
        # let the run end before the second start came, which then started a run of its own).
        started = await client.post(f"{BASE}/start", json={})
        # While it runs, a second start finds the same run.
        again = await client.post(f"{BASE}/start")
        done = await result(client, FLOW_ID)
        listed = (await client.get(f"{BASE}/messages")).json()
    assert started.status_code == 201 and started.json()["flowId"] == FLOW_ID
    assert again.status_code == 200
    assert again.json() == {**started.json(), "started": False}
    assert done["status"] == "COMPLETED"
    assert [m["value"] for m in listed["messages"]] == [
        f"section {n} of 5 done" for n in range(5, 0, -1)
    ]


async def test_pages_pass_page_size_and_before_page_token_through(make_client: Any) -> None:
    async with make_client() as client:
        await start(client, "progress-pages", sections=5, delaySeconds=0)
        await result(client, "progress-pages")
        first = await client.get(
            f"{BASE}/messages", params={"flowId": "progress-pages", "pageSize": 2}
        )
        token = first.json()["nextPageToken"]
        second = await client.get(
            f"{BASE}/messages",
            params={"flowId": "progress-pages", "pageSize": 2, "beforePageToken": token},
        )
        last = await client.get(
            f"{BASE}/messages",
            params={
                "flowId": "progress-pages",
                "pageSize": 2,
                "beforePageToken": second.json()["nextPageToken"],
            },
        )
    values = [[m["value"][:9] for m in r.json()["messages"]] for r in (first, second, last)]
    assert values == [["section 5", "section 4"], ["section 3", "section 2"], ["section 1"]]
    assert token != "" and last.json()["nextPageToken"] == ""


async def test_a_closed_flow_id_starts_a_new_run_whose_messages_follow_the_first_runs(
    make_client: Any,
) -> None:
    async with make_client() as client:
        first = (await start(client, "progress-again", sections=1, delaySeconds=0)).json()
        first_done = await result(client, "progress-again")
        second = await start(client, "progress-again", sections=2, delaySeconds=0)
        second_done = await result(client, "progress-again")
        listed = (await client.get(f"{BASE}/messages", params={"flowId": "progress-again"})).json()
    assert second.status_code == 201 and second.json()["runId"] != first["runId"]
    first_source = f"#{first_done['completions'][0]['stepExecutionId']}"
    second_source = f"#{second_done['completions'][0]['stepExecutionId']}"
    assert [(m["value"], m["source"]) for m in listed["messages"]] == [
        ("section 2 of 2 done", second_source),
        ("section 1 of 2 done", second_source),
        ("section 1 of 1 done", first_source),
    ]


async def test_a_flow_id_never_started_has_an_empty_stream(make_client: Any) -> None:
    async with make_client() as client:
        listed = await client.get(f"{BASE}/messages", params={"flowId": "progress-never"})
    assert listed.status_code == 200
    assert listed.json() == {"messages": [], "nextPageToken": ""}


async def test_bad_inputs_are_rejected_with_their_codes(make_client: Any) -> None:
    async with make_client() as client:
        too_few = await start(client, "progress-bad", sections=0)
        unknown = await start(client, "progress-bad", section=3)
        page_size = await client.get(f"{BASE}/messages", params={"pageSize": 0})
        token = await client.get(f"{BASE}/messages", params={"beforePageToken": "nonsense"})
        described = await client.get("/api/v1/flows/progress-bad")
    assert (too_few.status_code, too_few.json()["code"]) == (422, "VALIDATION_ERROR")
    assert (unknown.status_code, unknown.json()["code"]) == (422, "VALIDATION_ERROR")
    assert (page_size.status_code, page_size.json()["code"]) == (400, "INVALID_ARGUMENT")
    assert (token.status_code, token.json()["code"]) == (400, "INVALID_PAGE_TOKEN")
    assert described.status_code == 404  # nothing was started
