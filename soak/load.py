"""The soak test's load: the operations workers pick from and the ledger of their answers.

Every acknowledged write goes into the :class:`Ledger` (started Flow IDs, increments per
counter, published and moved messages), with every answer outside 2xx by status and code.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ALLOWED = {(409, "RPC_LOCK_CONFLICT"), (409, "FLOW_ALREADY_STARTED")}  # and every 429
API = "/api/v1"
#: Operation kinds and how often a worker picks each (relative weights).
MIX = {
    "increment": 30,
    "publish": 14,
    "search": 10,
    "start": 10,
    "stream-list": 8,
    "move": 7,
    "stream-read": 5,
    "stream-write": 5,
    "restart": 2,
    "hold": 1,
}
HOLD_SECONDS = 0.25
SEARCHES = [
    "FlowType = 'CounterFlow'",
    "FlowType = 'ChannelFlow' AND Status = 'RUNNING'",
    "FlowId STARTS_WITH 'soak-start-' ORDER BY FlowId ASC",
]


@dataclass
class Ledger:
    """What the server acknowledged, and how every request went."""

    started: list[str] = field(default_factory=list)
    increments: Counter[str] = field(default_factory=Counter)
    published: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    moved: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    sent: Counter[str] = field(default_factory=Counter)
    ok: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # the allowed 409s and 429s
    errors: Counter[tuple[int, str]] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def answer(self, kind: str, response: httpx.Response, seconds: float) -> bool:
        """Record an answer; return True when it is a 2xx."""
        self.sent[kind] += 1
        self.latencies[kind].append(seconds)
        if response.is_success:
            self.ok[kind] += 1
            return True
        code = _problem_code(response)
        self.errors[(response.status_code, code)] += 1
        if response.status_code == 429 or (response.status_code, code) in ALLOWED:
            self.refused[kind] += 1
        else:
            self.examples.setdefault(f"{response.status_code} {code}", f"{kind}: {response.text}")
        return False

    def transport_error(self, kind: str, exc: Exception) -> None:
        """Record a request that got no answer (an ambiguous write: always a failure)."""
        self.sent[kind] += 1
        name = type(exc).__name__
        self.errors[(0, name)] += 1
        self.examples.setdefault(f"0 {name}", f"{kind}: {exc!r}")


def _problem_code(response: httpx.Response) -> str:
    """Return the problem+json ``code`` of an error answer ("-" when there is none)."""
    try:
        body = response.json()
    except ValueError:
        return "-"
    return str(body.get("code", "-")) if isinstance(body, dict) else "-"


def allowed(status: int, code: str) -> bool:
    """Return True for the documented refusals the load provokes on purpose."""
    return status == 429 or (status, code) in ALLOWED


class Load:
    """The operations workers pick from, over one HTTP client and one ledger."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        ledger: Ledger,
        counters: list[str],
        channels: list[str],
        rng: random.Random,
        mix: dict[str, int] = MIX,
    ) -> None:
        """Share ``counters`` and ``channels`` (Flow IDs) among workers drawing from ``mix``."""
        self.mix = mix
        self.client = client
        self.ledger = ledger
        self.counters = counters
        self.channels = channels
        self.rng = rng
        self.pending: dict[str, list[str]] = {c: [] for c in channels}  # published, not moved
        self.serial = 0

    def next_serial(self) -> int:
        """Return a number no other operation of this run used."""
        self.serial += 1
        return self.serial

    async def call(self, kind: str, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        """Send one request and record it; None when it got no answer."""
        began = time.perf_counter()
        try:
            response = await self.client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.ledger.transport_error(kind, exc)
            return None
        self.ledger.answer(kind, response, time.perf_counter() - began)
        return response

    async def start(self) -> None:
        """Start a new CounterFlow (four in five) or ChannelFlow."""
        flow_type = "ChannelFlow" if self.rng.random() < 0.2 else "CounterFlow"
        flow_id = f"soak-start-{self.next_serial():08d}"
        body: dict[str, Any] = {"flowType": flow_type, "flowId": flow_id}
        if flow_type == "CounterFlow":
            body["options"] = {"initialAttributes": {"counter": 0}}
        response = await self.call("start", "POST", f"{API}/flows", json=body)
        if response is not None and response.status_code == 201:
            self.ledger.started.append(flow_id)

    async def restart(self) -> None:
        """Start a running Flow's ID again: 409 FLOW_ALREADY_STARTED is the right answer."""
        flow_id = self.rng.choice(self.counters)
        body = {"flowType": "CounterFlow", "flowId": flow_id}
        await self.call("restart", "POST", f"{API}/flows", json=body)

    async def increment(self) -> None:
        """Add 1 to a shared counter; a 409 lock conflict waits a little before the next."""
        flow_id = self.rng.choice(self.counters)
        url = f"{API}/flows/{flow_id}/rpcs/increment"
        response = await self.call("increment", "POST", url, json={"input": 1})
        if response is None:
            return
        if response.status_code == 200:
            self.ledger.increments[flow_id] += 1
        elif response.status_code == 409:
            await asyncio.sleep(self.rng.uniform(0.005, 0.03))

    async def hold(self) -> None:
        """Start a HoldCounterLock Step: increments of that counter conflict while it runs."""
        flow_id = self.rng.choice(self.counters)
        await self.call(
            "hold",
            "POST",
            "/primitives/rpc/hold",
            params={"flowId": flow_id},
            json={"seconds": HOLD_SECONDS},
        )

    async def search(self) -> None:
        """Search, and follow the next page when there is one."""
        params = {"query": self.rng.choice(SEARCHES), "pageSize": 20}
        response = await self.call("search", "GET", f"{API}/flows", params=params)
        if response is not None and response.is_success and response.json()["nextPageToken"]:
            params["pageToken"] = response.json()["nextPageToken"]
            await self.call("search", "GET", f"{API}/flows", params=params)

    def _stream_url(self, suffix: str) -> str:
        """Return a URL of the ``counter-lock`` Stream of a shared counter."""
        return f"{API}/streams/CounterFlow/{self.rng.choice(self.counters)}/counter-lock/{suffix}"

    async def stream_list(self) -> None:
        """List the newest Stream messages (the holds' and the clients' writes)."""
        await self.call("stream-list", "GET", self._stream_url("messages"), params={"pageSize": 20})

    async def stream_read(self) -> None:
        """Read the Stream's first retained message without waiting."""
        await self.call("stream-read", "GET", self._stream_url("next"), params={"waitSeconds": 0})

    async def stream_write(self) -> None:
        """Write to a Stream as a client (best effort: 429 when it is at capacity)."""
        body = {"source": "soak", "value": f"note {self.next_serial()}"}
        await self.call("stream-write", "POST", self._stream_url("messages"), json=body)

    async def publish(self) -> None:
        """Publish to a ChannelFlow's queued-messages, which nothing consumes until a move."""
        flow_id = self.rng.choice(self.channels)
        value = f"message-{self.next_serial():08d}"
        url = f"{API}/flows/{flow_id}/channels/queued-messages/messages"
        response = await self.call("publish", "POST", url, json={"value": value})
        if response is not None and response.status_code == 201:
            message_id = response.json()["messageId"]
            self.ledger.published[flow_id][message_id] = value
            self.pending[flow_id].append(message_id)

    async def move(self) -> None:
        """Move one pending message to prioritized-messages, whose Step consumes it."""
        flow_id = self.rng.choice(self.channels)
        pending = self.pending[flow_id]
        if not pending:
            await self.publish()
            return
        # Taken before the await: no other worker can move the same message.
        message_id = pending.pop(self.rng.randrange(len(pending)))
        response = await self.call(
            "move",
            "POST",
            "/primitives/channel/move",
            params={"flowId": flow_id},
            json={"messageId": message_id},
        )
        if response is not None and response.is_success:
            self.ledger.moved[flow_id][message_id] = self.ledger.published[flow_id][message_id]

    async def worker(self, until: float) -> None:
        """Run randomly chosen operations until the monotonic time ``until``."""
        kinds, weights = list(self.mix), list(self.mix.values())
        while time.monotonic() < until:
            kind = self.rng.choices(kinds, weights)[0]
            await getattr(self, kind.replace("-", "_"))()


# -- resident memory ----------------------------------------------------------------------------


def rss_mb(pid: int) -> float | None:
    """Return the resident memory of process ``pid`` in MB (None when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


async def sample_rss(pid: int, samples: list[float], every: float) -> None:
    """Append the server's RSS to ``samples`` every ``every`` seconds until cancelled."""
    while True:
        value = rss_mb(pid)
        if value is not None:
            samples.append(value)
        await asyncio.sleep(every)
