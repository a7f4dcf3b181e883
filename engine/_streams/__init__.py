"""The Stream Store: best-effort messages of Streams, and the service the Engine calls.

Stores: ``memory`` (this process), ``postgres`` and ``redis`` (shared by every process that
reaches them); :func:`stream_store` builds the one a config names.
"""

from engine._streams.factory import stream_store
from engine._streams.memory_store import MemoryStreamStore
from engine._streams.service import StreamService

__all__ = ["MemoryStreamStore", "StreamService", "stream_store"]
