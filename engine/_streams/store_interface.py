"""Stream messages as a store keeps them, and the interface of a Stream Store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(slots=True, eq=False)
class StoredStreamMessage:
    """One retained message: its sequence in its Stream, Flow ID, JSON text, source, time
    (epoch seconds) and estimated size in bytes."""

    seq: int
    flow_id: str
    text: str
    source: str
    created_at: float
    size: int


def sequence_of(message: StoredStreamMessage) -> int:
    """Return the message's sequence number (a sort key)."""
    return message.seq


class StreamStore(Protocol):
    """Where best-effort Stream messages live: this process's memory, or a PostgreSQL or Redis
    database every process reaches.

    Calls that may cross a network are coroutines; ``epoch``, ``trims_running`` and
    ``readers_waiting`` answer from this process's view at once.
    """

    @property
    def epoch(self) -> str:
        """Identify the store's contents; tokens of another epoch name vanished messages.

        Every process on one backing store sees the same epoch; it changes when the contents
        are lost (a restart of the memory store, a flushed Redis, a truncated table).
        """

    async def open(self) -> None:
        """Reach the backing store (create its tables, learn its epoch); called once first."""

    async def append(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> StoredStreamMessage:
        """Append a message or raise ResourceExhaustedError (asking trimming for room)."""

    async def next_after(
        self, flow_type: str, name: str, flow_id: str, after: int, wait_seconds: float
    ) -> StoredStreamMessage | None:
        """Return the first message after sequence ``after``, waiting up to ``wait_seconds``."""

    async def page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[list[StoredStreamMessage], bool]:
        """Return up to ``size`` messages before ``before``, newest first, and whether more."""

    async def stats(self, flow_type: str, name: str) -> dict[str, Any]:
        """Return usage figures of one Stream."""

    def trims_running(self) -> int:
        """Return how many background trim jobs are under way (tests settle on them)."""

    async def total_bytes(self) -> int:
        """Return how many bytes (messages and their overhead) the store holds."""

    def readers_waiting(self) -> int:
        """Return how many readStream calls wait for a message."""

    async def close(self) -> None:
        """Wake waiting readers at once, stop trimming, release connections; later calls fail."""
