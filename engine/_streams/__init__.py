"""The Stream Store: best-effort messages of Streams, and the service the Engine calls."""

from engine._streams.memory import MemoryStreamStore
from engine._streams.service import StreamService

__all__ = ["MemoryStreamStore", "StreamService"]
