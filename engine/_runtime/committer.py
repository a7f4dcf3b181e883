"""The one way the runtime commits: write a unit, then publish its result to the listeners.

Nothing wakes a waiter, schedules a Step or times a run out on its own after a write: every
follow-up is a listener of the Notifier, so a commit made in another process (delivered by
another Notifier) is followed up exactly like one made here.
"""

from __future__ import annotations

import time

from engine._runtime.activity import Activity
from engine._runtime.ports import Database, Notifier
from engine._storage.commits import Unit
from engine._storage.records import CommitResult
from engine.telemetry import Telemetry

COMMITS = "commits in flight"


class Committer:
    """Applies commit units and publishes what they changed."""

    def __init__(
        self,
        database: Database,
        notifier: Notifier,
        activity: Activity,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._telemetry = telemetry or Telemetry()
        self._database = database
        self._notifier = notifier
        self._activity = activity

    async def commit(self, unit: Unit) -> CommitResult:
        """Apply ``unit`` in one transaction, publish its result, and return it."""
        self._activity.enter(COMMITS)
        try:
            started = time.perf_counter()
            result = await self._database.write(self._notifier.within(unit))
            self._telemetry.commit(time.perf_counter() - started)
            self._notifier.publish(result)
            return result
        finally:
            self._activity.leave(COMMITS)
