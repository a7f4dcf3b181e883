"""The commit listener: every follow-up of a commit, in one place.

For each run a commit changed: WaitForAttributeMatch waiters see its writes, ended Step
executions stop and release their locks, queued ones are handed to the StepQueue, durable waits
that began are watched and those on queues it published to are tried, a started run's timeout
is armed, and a closed run's watchers wake, its timeout is disarmed, the parent waiting on it
(a SubFlow) is tried and a Schedule holding a time back for it (BUFFER_ONE) hears of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine._runtime.flows import RunWatchers
from engine._runtime.matches import AttributeMatches
from engine._runtime.scheduler import Scheduler
from engine._runtime.schedules import Schedules
from engine._runtime.timeouts import Timeouts
from engine._runtime.waits import ChannelWaits
from engine._storage.records import CommitResult

if TYPE_CHECKING:
    from engine._runtime.postgres.notify import RemoteChange


class CommitFollowers:
    """Acts on each commit the Notifier delivers."""

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        matches: AttributeMatches,
        watchers: RunWatchers,
        timeouts: Timeouts,
        waits: ChannelWaits,
        schedules: Schedules,
    ) -> None:
        self._schedules = schedules
        self._scheduler = scheduler
        self._matches = matches
        self._watchers = watchers
        self._timeouts = timeouts
        self._waits = waits

    def on_commit(self, result: CommitResult) -> None:
        """Follow up on every run ``result`` changed."""
        for change in result.changes:
            closed = change.closed_status is not None
            self._matches.notify(change.run_id, change.writes, closed=closed)
            if change.ended_step_ids:
                self._scheduler.end(change.flow_id, change.ended_step_ids)
                for step_id in change.ended_step_ids:
                    self._waits.forget(step_id)
            for step in change.queued_steps:
                self._waits.forget(step.id)
                self._scheduler.requeue(step)
            for waiting in change.waiting:
                self._scheduler.park(waiting.step)
                self._waits.watch(waiting)
            if change.published:
                self._waits.published(change.run_id, change.published)
            if change.started and change.timeout_at is not None:
                self._timeouts.schedule(
                    change.run_id, change.flow_id, change.flow_type, change.timeout_at
                )
            if closed:
                self._timeouts.cancel(change.run_id)
                self._watchers.closed(change.flow_id)
                self._waits.closed(change.run_id)
                self._schedules.closed(change.flow_id)

    def on_remote(self, change: RemoteChange) -> None:
        """Follow up on a run another process's commit changed: only what is this process's
        own (its waiters, its attempts); the committing process queued and armed the rest."""
        self._matches.remote(change.flow_id, change.run_id, change.written, change.closed)
        if change.ended_step_ids:
            self._scheduler.end(change.flow_id, change.ended_step_ids)
            for step_id in change.ended_step_ids:
                self._waits.forget(step_id)
        if isinstance(change.published, str):
            self._waits.published_any(change.run_id)
        elif change.published:
            self._waits.published(change.run_id, change.published)
        if change.closed:
            self._timeouts.cancel(change.run_id)
            self._watchers.closed(change.flow_id)
            self._waits.closed(change.run_id)
            self._schedules.closed(change.flow_id)
