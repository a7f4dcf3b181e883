"""A server killed with SIGKILL under load loses no acknowledged registration.

With 32 callers on one Flow the registrations release their locks as their units reach the
writer (lock handoffs), so the kill lands with several handed-off units in a batch: every
acknowledged one must be there after the restart, and no sequence may be missing or repeated.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.server import ServerProcess

BASE = "/patterns/sequentially-chunked-attribute-map"


ENOUGH = 400  # acknowledged registrations before the kill (many units in flight per batch)


async def _load(
    url: str, acked: list[dict[str, Any]], enough: asyncio.Event, stop: asyncio.Event
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        n = 0
        while not stop.is_set():
            n += 1
            email = f"w{id(asyncio.current_task())}-{n}@example.com"
            try:
                response = await client.post(
                    f"{BASE}/register", json={"email": email, "name": "load"}
                )
            except httpx.HTTPError:
                return  # the server died mid-request: this one was never acknowledged
            if response.status_code == 201:
                acked.append(response.json())
                if len(acked) >= ENOUGH:
                    enough.set()


async def _pages(url: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        token = "current"
        while True:
            body = (await client.get(f"{BASE}/subscribers", params={"pageToken": token})).json()
            records.extend(body["subscribers"])
            token = body["nextPageToken"]
            if not token:
                return records


async def test_sigkill_under_load_then_restart_keeps_every_acknowledged_registration(
    tmp_path: Path,
) -> None:
    server = ServerProcess(tmp_path)
    server.start()
    enough, stop = asyncio.Event(), asyncio.Event()
    try:
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert (await client.post(f"{BASE}/start")).status_code == 201
        acked: list[dict[str, Any]] = []
        workers = [asyncio.create_task(_load(server.url, acked, enough, stop)) for _ in range(32)]
        # Until ENOUGH registrations are acknowledged (or the load ends early, failing below).
        reached = asyncio.create_task(enough.wait())
        await asyncio.wait([reached, *workers], timeout=60, return_when=asyncio.FIRST_COMPLETED)
        reached.cancel()
        assert enough.is_set(), f"only {len(acked)} registrations were acknowledged"
        await asyncio.to_thread(server.kill)  # mid-load, no graceful shutdown
        stop.set()
        await asyncio.gather(*workers)
    finally:
        stop.set()
        server.kill()

    restarted = ServerProcess(tmp_path)
    restarted.start()
    try:
        records = await _pages(restarted.url)
        async with httpx.AsyncClient(base_url=restarted.url) as client:
            # The log keeps working after the restart.
            after = await client.post(
                f"{BASE}/register", json={"email": "after@example.com", "name": "after"}
            )
    finally:
        restarted.stop()

    stored = {r["email"]: r["sequence"] for r in records}
    assert len(stored) == len(records), "a registration is stored twice"
    sequences = sorted(stored.values())
    assert sequences == list(range(1, len(sequences) + 1)), "sequences have gaps or repeats"
    missing = [r for r in acked if stored.get(r["email"]) != r["sequence"]]
    assert missing == [], f"{len(missing)} acknowledged registrations were lost"
    assert len(acked) >= ENOUGH
    assert after.status_code == 201 and after.json()["sequence"] == len(sequences) + 1
