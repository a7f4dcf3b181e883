"""Stream messages as the store keeps them."""

from __future__ import annotations

from dataclasses import dataclass


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
