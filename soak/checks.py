"""The soak test's checks, once the load has stopped: every acknowledged write is there."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from soak.load import API, Ledger

HANDLED_KEPT = 100  # ChannelFlow keeps the last 100 handled values


async def _gather_limited(coroutines: list[Any], limit: int = 16) -> list[Any]:
    """Await ``coroutines`` with at most ``limit`` in flight; return their results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(coroutine: Any) -> Any:
        """Await one coroutine once the gate lets it in."""
        async with gate:
            return await coroutine

    return await asyncio.gather(*(one(c) for c in coroutines))


async def check_starts(client: httpx.AsyncClient, ledger: Ledger) -> dict[str, Any]:
    """Every acknowledged start is a Flow describeFlow finds."""

    async def found(flow_id: str) -> bool:
        """Return True when describeFlow answers 200."""
        return (await client.get(f"{API}/flows/{flow_id}")).status_code == 200

    present = await _gather_limited([found(f) for f in ledger.started])
    missing = [f for f, ok in zip(ledger.started, present, strict=True) if not ok]
    return {
        "acknowledged": len(ledger.started),
        "found": len(ledger.started) - len(missing),
        "missing": missing[:20],
        "ok": not missing,
    }


async def check_counters(
    client: httpx.AsyncClient, ledger: Ledger, counters: list[str]
) -> list[dict[str, Any]]:
    """Each counter equals its acknowledged increments (they serialize through the lock)."""
    results = []
    for flow_id in counters:
        response = await client.post(f"{API}/flows/{flow_id}/rpcs/read_counter", json={})
        value = response.json().get("output") if response.status_code == 200 else None
        acknowledged = ledger.increments[flow_id]
        results.append(
            {
                "flowId": flow_id,
                "acknowledged": acknowledged,
                "value": value,
                "ok": value == acknowledged,
            }
        )
    return results


async def _pending(client: httpx.AsyncClient, flow_id: str, channel: str) -> dict[str, str]:
    """Return every pending message of a Channel (all pages), by ID."""
    found: dict[str, str] = {}
    token = ""
    while True:
        params: dict[str, Any] = {"pageSize": 1000}
        if token:
            params["pageToken"] = token
        response = await client.get(
            f"{API}/flows/{flow_id}/channels/{channel}/messages", params=params
        )
        response.raise_for_status()
        body = response.json()
        found.update({m["messageId"]: m["value"] for m in body["messages"]})
        token = body.get("nextPageToken") or ""
        if not token:
            return found


async def _handled(client: httpx.AsyncClient, flow_id: str) -> list[str]:
    """Return the values ChannelFlow's Step recorded as handled (the last 100)."""
    response = await client.get(
        f"{API}/flows/{flow_id}/attributes", params={"name": "primitive-channel-handled"}
    )
    response.raise_for_status()
    values: list[str] = response.json()["values"].get("primitive-channel-handled") or []
    return values


async def check_channels(
    client: httpx.AsyncClient, ledger: Ledger, channels: list[str], settle_seconds: float = 30.0
) -> list[dict[str, Any]]:
    """Each Channel holds exactly the published messages not moved, and every moved message
    was consumed by the Flow's Step (its last 100 values are in the handled Attribute)."""
    results = []
    for flow_id in channels:
        published, moved = ledger.published[flow_id], ledger.moved[flow_id]
        expected = {i: v for i, v in published.items() if i not in moved}
        pending = await _pending(client, flow_id, "queued-messages")
        # The Step consumes moved messages one per execution and records each in a later
        # commit: wait until it has caught up (or the time is up).
        kept = min(HANDLED_KEPT, len(moved))
        deadline = time.monotonic() + settle_seconds
        while True:
            prioritized = await _pending(client, flow_id, "prioritized-messages")
            handled = await _handled(client, flow_id)
            if (not prioritized and len(handled) == kept) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        results.append(
            {
                "flowId": flow_id,
                "published": len(published),
                "moved": len(moved),
                "pending": len(pending),
                "expectedPending": len(expected),
                "unconsumed": len(prioritized),
                "handledKept": len(handled),
                "ok": pending == expected
                and not prioritized
                and len(handled) == kept
                and set(handled) <= set(moved.values()),
            }
        )
    return results
