"""Stream messages as a store keeps them, and the interface of a Stream Store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(slots=True, eq=False)
class StoredMessage:
    """One retained message: its sequence in its Stream, Flow ID, JSON text, source, time
    (epoch seconds) and estimated size in bytes."""

    seq: int
    flow_id: str
    text: str
    source: str
    created_at: float
    size: int


def sequence_of(message: StoredMessage) -> int:
    """Return the message's sequence number (a sort key)."""
    return message.seq


class StreamStore(Protocol):
    """Where best-effort Stream messages live."""

    @property
    def epoch(self) -> str:
        """Identify this store's contents; tokens of another epoch name vanished messages."""

    def append(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> StoredMessage:
        """Append a message or raise ResourceExhaustedError (asking trimming for room)."""

    async def next_after(
        self, flow_type: str, name: str, flow_id: str, after: int, wait_seconds: float
    ) -> StoredMessage | None:
        """Return the first message after sequence ``after``, waiting up to ``wait_seconds``."""

    def page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[list[StoredMessage], bool]:
        """Return up to ``size`` messages before ``before``, newest first, and whether more."""

    def stats(self, flow_type: str, name: str) -> dict[str, Any]:
        """Return usage figures of one Stream."""

    def trims_running(self) -> int:
        """Return how many background trim jobs are under way (tests settle on them)."""

    def readers_waiting(self) -> int:
        """Return how many readStream calls wait for a message."""

    def close(self) -> None:
        """Wake waiting readers; later calls fail."""
