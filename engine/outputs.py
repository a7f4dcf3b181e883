"""What a running Step sends besides its decision: Stream writes and heartbeats.

Sync generator Steps yield these; ``async def`` Steps just make them (they are sent at once).
"""

from __future__ import annotations

from typing import Any


class StepOutput:
    """Something a Step invocation sends while it runs: a Stream write or a heartbeat.

    Delivering the same output twice sends it once.
    """

    __slots__ = ("_delivered",)

    def __init__(self) -> None:
        self._delivered = False

    def mark_delivered(self) -> bool:
        """Mark the output sent; return False when it already was."""
        if self._delivered:
            return False
        self._delivered = True
        return True


class StreamWrite(StepOutput):
    """One message a Step wrote to the Stream ``stream_name`` (already encoded as JSON text)."""

    __slots__ = ("stream_name", "text")

    def __init__(self, stream_name: str, text: str) -> None:
        super().__init__()
        self.stream_name = stream_name
        self.text = text

    def __repr__(self) -> str:
        return f"StreamWrite({self.stream_name!r}, {self.text[:40]!r})"


class Heartbeat(StepOutput):
    """An explicit heartbeat carrying ``details``; every Stream write is an implicit one that
    keeps the last explicit ``details``."""

    __slots__ = ("details",)

    def __init__(self, details: Any = None) -> None:
        super().__init__()
        self.details = details

    def __repr__(self) -> str:
        return f"Heartbeat({self.details!r})"
