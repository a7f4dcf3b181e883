"""The Sequentially Chunked AttributeMap pattern over HTTP (DESIGN.md §7, seed 000)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.support.backends import backend_independent
from tests.support.problems import assert_problem

#: Request validation answers before the database is read: the same on every backend.
REFUSED_EARLY = backend_independent("the request is refused before the database is read")

BASE = "/patterns/sequentially-chunked-attribute-map"
FLOW_ID = "sequentially-chunked-attribute-map"


async def register(client: httpx.AsyncClient, n: int, flow_id: str | None = None) -> Any:
    params = {"flowId": flow_id} if flow_id else None
    response = await client.post(
        f"{BASE}/register",
        params=params,
        json={"email": f"user{n}@example.com", "name": f"User {n}"},
    )
    assert response.status_code == 201, response.text
    return response.json()


async def page(client: httpx.AsyncClient, token: str | None = None, **params: str) -> Any:
    query = dict(params)
    if token is not None:
        query["pageToken"] = token
    return await client.get(f"{BASE}/subscribers", params=query)


async def all_pages(client: httpx.AsyncClient, **params: str) -> list[list[dict[str, Any]]]:
    pages, token = [], "current"
    while True:
        response = await page(client, token, **params)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body["subscribers"])
        token = body["nextPageToken"]
        if not token:
            return pages


async def test_start_is_201_then_200_with_started_false(make_client: Any) -> None:
    async with make_client() as client:
        first = await client.post(f"{BASE}/start")
        again = await client.post(f"{BASE}/start")
    assert first.status_code == 201
    assert first.json()["started"] is True and first.json()["flowId"] == FLOW_ID
    assert again.status_code == 200
    assert again.json() == {**first.json(), "started": False}


async def test_before_start_register_and_pages_are_flow_not_active(make_client: Any) -> None:
    async with make_client() as client:
        registered = await client.post(
            f"{BASE}/register", json={"email": "a@example.com", "name": "A"}
        )
        listed = await page(client)
    assert_problem(registered, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert listed.status_code == 404


async def test_start_commits_the_initial_layout_and_an_empty_current_is_an_empty_page(
    make_client: Any,
) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        response = await page(client)
        values = (
            await client.get(
                f"/api/v1/flows/{FLOW_ID}/attributes",
                params=[("name", "SubscriberArchiveState"), ("name", "SubscriberChunks/current")],
            )
        ).json()["values"]
    assert response.status_code == 200
    assert response.json() == {"subscribers": [], "nextPageToken": ""}
    assert values == {
        "SubscriberArchiveState": {"nextSequence": 1, "newestArchivedToken": ""},
        "SubscriberChunks/current": [],
    }


async def test_register_validates_its_body(make_client: Any) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        bad = await client.post(f"{BASE}/register", json={"email": "not-an-email", "name": ""})
    assert bad.status_code == 422
    errors = {e["location"]: e["message"] for e in bad.json()["errors"]}
    assert errors.keys() == {"body.email", "body.name"}
    # The rule in words, not the regular expression that checks it.
    assert errors["body.email"] == (
        "must be an email address: text, one @, more text, and no space anywhere"
    )


async def test_250_sequential_registrations_page_back_exactly_newest_first(
    make_client: Any,
) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        acked = [await register(client, n) for n in range(1, 251)]
        current = (await page(client)).json()
        pages = await all_pages(client)
    assert [r["sequence"] for r in acked] == list(range(1, 251))
    assert acked[0]["email"] == "user1@example.com" and acked[0]["name"] == "User 1"
    assert current["nextPageToken"] == "00000000000000000101"
    assert [len(p) for p in pages] == [50, 100, 100]
    flat = [r for p in pages for r in p]
    assert [r["sequence"] for r in flat] == list(range(250, 0, -1))
    assert flat == list(reversed(acked))


async def test_tokens_chain_from_current_through_each_archive_to_empty(
    make_client: Any,
) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        for n in range(1, 251):
            await register(client, n)
        second = (await page(client, "00000000000000000101")).json()
        first = (await page(client, "00000000000000000001")).json()
    assert second["nextPageToken"] == "00000000000000000001"
    assert [r["sequence"] for r in second["subscribers"]] == list(range(200, 100, -1))
    assert first["nextPageToken"] == ""
    assert [r["sequence"] for r in first["subscribers"]] == list(range(100, 0, -1))


async def test_the_101st_registration_archives_current_in_the_same_commit(
    make_client: Any,
) -> None:
    names = [
        ("name", "SubscriberArchiveState"),
        ("name", "SubscriberChunks/current"),
        ("name", "SubscriberChunks/00000000000000000001"),
    ]
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        for n in range(1, 101):
            await register(client, n)
        before = (await client.get(f"/api/v1/flows/{FLOW_ID}/attributes", params=names)).json()
        await register(client, 101)
        after = (await client.get(f"/api/v1/flows/{FLOW_ID}/attributes", params=names)).json()
    assert before["values"]["SubscriberChunks/current"][0]["registeredAt"].endswith("Z")
    assert before["values"]["SubscriberArchiveState"] == {
        "nextSequence": 101,
        "newestArchivedToken": "",
    }
    assert len(before["values"]["SubscriberChunks/current"]) == 100
    assert "SubscriberChunks/00000000000000000001" not in before["values"]
    archived = after["values"]["SubscriberChunks/00000000000000000001"]
    assert [r["sequence"] for r in archived] == list(range(1, 101))
    assert [r["sequence"] for r in after["values"]["SubscriberChunks/current"]] == [101]
    assert after["values"]["SubscriberArchiveState"] == {
        "nextSequence": 102,
        "newestArchivedToken": "00000000000000000001",
    }


@REFUSED_EARLY
@pytest.mark.parametrize(
    "token",
    [
        "",
        "abc",
        "1",
        "Current",
        " current",
        "0000000000000000001",
        "000000000000000000001",
        "00000000000000000002",
        "00000000000000000100",
        "00000000000000000000",
        "-0000000000000000001",
        "0000000000000000001a",
        "０００００００００００００００００００１",
        "00000000000000000001 ",
        "1e+00000000000000001",
    ],
)
async def test_malformed_tokens_are_400_invalid_page_token(make_client: Any, token: str) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        response = await page(client, token)
    assert_problem(response, 400, "INVALID_PAGE_TOKEN")
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    "token", ["00000000000000000001", "00000000000000000201", "99999999999999999901"]
)
async def test_a_well_formed_token_without_a_stored_chunk_is_404_page_not_found(
    make_client: Any, token: str
) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        for n in range(1, 4):
            await register(client, n)
        response = await page(client, token)
    assert_problem(response, 404, "PAGE_NOT_FOUND")


async def test_flow_id_parameter_keeps_separate_logs(make_client: Any) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start", params={"flowId": "log-a"})
        await client.post(f"{BASE}/start", params={"flowId": "log-b"})
        await register(client, 1, "log-a")
        await register(client, 2, "log-a")
        only = await register(client, 3, "log-b")
        a = (await page(client, flowId="log-a")).json()
        b = (await page(client, flowId="log-b")).json()
    assert [r["sequence"] for r in a["subscribers"]] == [2, 1]
    assert only["sequence"] == 1
    assert [r["email"] for r in b["subscribers"]] == ["user3@example.com"]


async def test_300_registrations_from_16_parallel_clients_get_exactly_1_to_300(
    make_client: Any,
) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        numbers = iter(range(1, 301))

        async def worker() -> list[dict[str, Any]]:
            done = []
            for n in numbers:
                done.append(await register(client, n))
            return done

        results = [
            r for batch in await asyncio.gather(*(worker() for _ in range(16))) for r in batch
        ]
        pages = await all_pages(client)
    assert sorted(r["sequence"] for r in results) == list(range(1, 301))
    listed = [r for p in pages for r in p]
    assert [r["sequence"] for r in listed] == list(range(300, 0, -1))
    by_email = {r["email"]: r["sequence"] for r in listed}
    assert len(by_email) == 300
    assert all(by_email[r["email"]] == r["sequence"] for r in results)
