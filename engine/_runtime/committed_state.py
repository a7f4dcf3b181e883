"""The committed state of running Flows, kept in memory so that most snapshots need no read.

On SQLite this process is the database's only writer: every commit passes through its writer,
which tells :class:`CommittedState` each committed unit's result, in commit order, before any
caller hears of it (``SQLiteWriter``'s ``on_committed``). So a copy of a run's Attribute rows
built from a read and kept up to date with the writes of every later commit is exactly what a
read would return now, and a snapshot whose keys the copy knows is served from it: an RPC on a
Flow it has seen reads nothing. On PostgreSQL other processes commit too, and nothing is kept.

What is kept, per Flow ID, is the Flow's latest run while it is running: its run row, the
Attribute rows of the keys reads have asked for (a key with no row is remembered as absent),
and whether every singleton row is known. Commits change Attribute rows only by writes, which
their results list, so those are applied; anything else about the run (it closed, a new run
started) drops the Flow's copy. Closed runs are never kept, so a purge of closed runs, or the
erase of hard-delete values after a close, cannot leave a copy stale. Snapshots that read
whole AttributeMaps or Channels always read. Hard-delete values themselves live in the blob
store and are read from there as usual; only their rows are kept here.

A read's result is kept only when no commit was applied while it was in flight (the reads
this module learns from run on the event loop, in one step, so that is the usual case).
Memory is bounded by the number of Flows and the bytes of values kept, least recently used
first out.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from engine._storage.records import CommitResult, LoadPlan, RunInfo, Snapshot, StoredValue

Key = tuple[str, str]
log = logging.getLogger("dexlite.state")

#: Flows kept at most (their copies are dropped least recently used first).
MAX_FLOWS = 10_000


@dataclass(eq=False)
class _Copy:
    """One running run's known Attribute rows."""

    run: RunInfo
    values: dict[Key, StoredValue] = field(default_factory=dict)
    absent: set[Key] = field(default_factory=set)
    all_singletons: bool = False
    size: int = 0


def cacheable(plan: LoadPlan) -> bool:
    """Return True when a snapshot of ``plan`` can be served from a copy (no whole maps, no
    Channel state)."""
    return not (plan.whole_maps or plan.channel_sizes or plan.channels or plan.channel_instances)


class CommittedState:
    """Copies of running Flows' committed Attribute rows, kept current by the writer."""

    def __init__(self, max_bytes: int, max_flows: int = MAX_FLOWS) -> None:
        self._max_bytes = max_bytes
        self._max_flows = max_flows
        self._copies: OrderedDict[str, _Copy] = OrderedDict()
        self._bytes = 0
        #: Commits applied so far: a read that saw it change may be older than the copy.
        self.commits = 0
        #: The Flows of the batch whose COMMIT is on its way (None: any Flow). A read of the
        #: database may already see that batch, so their copies may be older than a read.
        self._committing: set[str] | None = set()

    def snapshot(
        self, flow_id: str, run_id: str | None, plan: LoadPlan, *, overlaid: bool = False
    ) -> Snapshot | None:
        """Return what reading ``plan`` for the Flow's latest run (or ``run_id``) returns, or
        None when the copy does not know every key the plan reads.

        While a batch with a commit of the Flow is on its way, a read of the database may
        already see it: a caller whose reads must never go back in time (GetAttributes after
        a waitForFlow saw the run close) is not served. An ``overlaid`` caller (an RPC or a
        Step) is: it lays the handed-off units on its snapshot, and the locks it holds are
        released only after that batch is answered, so a copy as of just before the batch is
        a snapshot it could have read a moment earlier.
        """
        copy = self._copies.get(flow_id)
        if copy is None or not cacheable(plan):
            return None
        committing = self._committing
        if not overlaid and (committing is None or flow_id in committing):
            return None
        if run_id is not None and run_id != copy.run.run_id:
            return None
        values: dict[Key, StoredValue] = {}
        if plan.names is None:
            if not copy.all_singletons:
                return None
            values = {k: v for k, v in copy.values.items() if k[1] == ""}
        elif not _collect(copy, ((name, "") for name in plan.names), values):
            return None
        if plan.instances and not _collect(copy, plan.instances, values):
            return None
        self._copies.move_to_end(flow_id)
        return Snapshot(copy.run, values)

    def remember(
        self, run_id: str | None, plan: LoadPlan, snapshot: Snapshot | None, commits: int
    ) -> None:
        """Keep what a read of ``plan`` returned, if it is a running run's state and no commit
        was applied since the read began (``commits`` is :attr:`commits` then)."""
        if (
            snapshot is None
            or commits != self.commits
            or not snapshot.run.is_running
            or not cacheable(plan)
            or self._max_bytes <= 0
        ):
            return
        flow_id = snapshot.run.flow_id
        copy = self._copies.get(flow_id)
        if copy is None or copy.run.run_id != snapshot.run.run_id:
            if run_id is not None:
                return  # a read of a given run: it is the latest one only if a copy says so
            if copy is not None:
                self._drop(flow_id)
            copy = self._copies[flow_id] = _Copy(snapshot.run)
        self._copies.move_to_end(flow_id)
        read: set[Key] = set(plan.instances)
        if plan.names is None:
            read.update(k for k in snapshot.values if k[1] == "")
            read.update(k for k in copy.values if k[1] == "")  # singletons not there any more
            copy.all_singletons = True
        else:
            read.update((name, "") for name in plan.names)
        for key in read:
            self._set(copy, key, snapshot.values.get(key))
        self._trim()

    def committing(self, results: list[Any] | None) -> None:
        """Note the batch whose COMMIT begins: the results of its units, None if unknown."""
        if results is None:
            self._committing = None
            return
        self._committing = {
            change.flow_id
            for result in results
            if isinstance(result, CommitResult)
            for change in result.changes
        }

    def settled(self) -> None:
        """The batch ended: every result it committed was applied (``committed``)."""
        self._committing = set()

    def committed(self, result: Any) -> None:
        """Apply a committed unit's result (in commit order; results of other units are
        ignored). Should applying it fail, every copy is dropped: none may be stale."""
        self.commits += 1
        if not isinstance(result, CommitResult):
            return
        try:
            self._apply(result)
        except Exception:
            log.exception("applying a commit to the copies of committed state failed")
            self._copies.clear()
            self._bytes = 0

    def _apply(self, result: CommitResult) -> None:
        for change in result.changes:
            copy = self._copies.get(change.flow_id)
            if copy is None:
                continue
            if (
                change.run_id != copy.run.run_id
                or change.started
                or change.closed_status is not None
                or change.timeout_at is not None
            ):
                self._drop(change.flow_id)
                continue
            for write in change.writes:
                stored = (
                    None
                    if write.value is None and not write.blob
                    else StoredValue(write.value, write.blob)
                )
                self._set(copy, (write.name, write.instance), stored)
        self._trim()

    def __len__(self) -> int:
        """Return how many Flows have a copy."""
        return len(self._copies)

    def _set(self, copy: _Copy, key: Key, stored: StoredValue | None) -> None:
        old = copy.values.get(key)
        if old is not None:
            copy.size -= _size(old)
            self._bytes -= _size(old)
        if stored is None:
            copy.values.pop(key, None)
            copy.absent.add(key)
        else:
            copy.values[key] = stored
            copy.absent.discard(key)
            copy.size += _size(stored)
            self._bytes += _size(stored)

    def _drop(self, flow_id: str) -> None:
        copy = self._copies.pop(flow_id)
        self._bytes -= copy.size

    def _trim(self) -> None:
        while self._copies and (
            self._bytes > self._max_bytes or len(self._copies) > self._max_flows
        ):
            self._drop(next(iter(self._copies)))


def _collect(copy: _Copy, keys: Any, into: dict[Key, StoredValue]) -> bool:
    """Add the known rows of ``keys`` to ``into``; False when a key is not known."""
    for key in keys:
        stored = copy.values.get(key)
        if stored is not None:
            into[key] = stored
        elif key not in copy.absent:
            return False
    return True


def _size(stored: StoredValue) -> int:
    # Keys and bookkeeping cost about as much again for small values: count a floor.
    return 64 + (len(stored.value) if stored.value is not None else 0)
