"""The server's garbage collector settings (``DEXLITE_GC_THRESHOLDS``).

A request allocates thousands of container objects (the HTTP layer, validation, decoded
Attribute values), so at Python's thresholds (700, 10, 10) the collector ran a young
collection every few requests and a full one, which walks every object the process holds,
every few hundred: on a register of the chunked example that was a third of its time.
Everything loaded at startup (modules, schemas, the engine's statements) lives as long as the
process, so it is frozen out of collections, and the thresholds are raised so that collections
come less often. Cyclic garbage is still collected, later.
"""

from __future__ import annotations

import gc
from collections.abc import Callable


def tune_gc(thresholds: tuple[int, int, int] | None) -> Callable[[], None]:
    """Freeze what is alive now and set the collector's ``thresholds``; return what undoes
    both (for an app that shuts down in a process that goes on, such as a test run).

    ``None`` leaves the collector alone.
    """
    if thresholds is None:
        return lambda: None
    before = gc.get_threshold()
    gc.collect()  # what startup left as garbage is freed now rather than frozen forever
    gc.freeze()
    gc.set_threshold(*thresholds)

    def restore() -> None:
        gc.set_threshold(*before)
        gc.unfreeze()

    return restore
