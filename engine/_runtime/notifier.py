"""The in-process Notifier: every commit reaches the listeners of this process at once."""

from __future__ import annotations

import logging

from engine._runtime.ports import CommitListener
from engine._storage.records import CommitResult

log = logging.getLogger("dexlite.commits")


class LocalNotifier:
    """Calls each listener with every commit, in commit order, on the event loop."""

    def __init__(self) -> None:
        self._listeners: list[CommitListener] = []

    def subscribe(self, listener: CommitListener) -> None:
        """Call ``listener`` with every commit from now on."""
        self._listeners.append(listener)

    def publish(self, result: CommitResult) -> None:
        """Deliver ``result`` to every listener; one listener's failure does not stop the rest."""
        if not result.changes:
            return
        for listener in self._listeners:
            try:
                listener(result)
            except Exception:  # the commit stands; a follow-up that failed is logged
                log.exception("a commit listener failed")
