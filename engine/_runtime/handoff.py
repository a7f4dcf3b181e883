"""Handoffs: an RPC hands its keys on before its commit has ended.

One Flow's RPCs serialize through their locks, so the time a lock is held decides how many a
Flow takes per second, and waiting for the commit's fsync was most of it. Where commits of one
Flow's keys can be put in order before they end, an RPC whose effects are Attribute writes
alone hands its keys on as soon as its unit is in that order (its caller is still answered
only once the unit committed): on SQLite, queued for the one writer (``sqlite/commits.py``);
on PostgreSQL, queued in its process's relay on the keys (``postgres/relay.py``). The next
holder reads the committed state with the writes of every unit still on its way laid over it
(the handed-off state, :func:`overlay`), and its own unit commits only after each of them and
only if each of them did: a unit that fails fails every unit that read what it wrote.
GetAttributes and every other client read see committed state only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from typing import Any

from engine._storage.records import (
    AttributeWrite,
    LoadPlan,
    RunInfo,
    Snapshot,
    StoredValue,
)


def nothing() -> None:
    """Do nothing (the default of a callback no one asked for)."""


class HandedOff:
    """A commit unit queued for the writer, and the earlier handed-off units it read."""

    __slots__ = ("after", "ended", "error", "run", "run_id", "unit", "writes")

    def __init__(
        self,
        unit: Callable[[Any], Any],
        after: tuple[HandedOff, ...],
        run_id: str = "",
        writes: tuple[AttributeWrite, ...] = (),
        run: RunInfo | None = None,
    ) -> None:
        self.unit = unit
        self.after = after
        self.run_id = run_id
        self.writes = writes
        #: The run as the invocation that made the unit read it (its snapshot's run).
        self.run = run
        #: Why the unit did not commit, once known (set in the writer's thread, in order).
        self.error: BaseException | None = None
        #: Done once the unit ended, where no single writer orders the commits (a relay's).
        self.ended: asyncio.Future[None] | None = None

    @staticmethod
    def check(after: Iterable[HandedOff]) -> None:
        """Raise the error of the first of ``after`` that did not commit: what a unit that
        read them read was never committed, so it must not commit either."""
        for earlier in after:
            if earlier.error is not None:
                raise earlier.error

    def __call__(self, conn: Any) -> Any:
        self.check(self.after)
        try:
            return self.unit(conn)
        except BaseException as exc:
            self.error = exc
            raise

    def mark_failed(self, error: BaseException) -> None:
        """The writer's word that the unit's transaction did not commit."""
        if self.error is None:
            self.error = error


class Handoffs:
    """Per Flow ID, the handed-off units whose locks are released and that have not ended."""

    def __init__(self) -> None:
        self._pending: dict[str, list[HandedOff]] = {}

    def pending(self, flow_id: str) -> tuple[HandedOff, ...]:
        """Return the Flow's units on their way to the database, oldest first."""
        return tuple(self._pending.get(flow_id, ()))

    def add(self, flow_id: str, unit: HandedOff) -> None:
        """Note a unit whose locks are about to be released before it commits."""
        self._pending.setdefault(flow_id, []).append(unit)

    def remove(self, flow_id: str, unit: HandedOff) -> None:
        """Forget a unit once it committed or failed (its effects are, or never will be, in
        the database)."""
        units = self._pending.get(flow_id)
        if units is None:
            return
        units.remove(unit)
        if not units:
            del self._pending[flow_id]


def overlay(
    snapshot: Snapshot | None, pending: Iterable[HandedOff], plan: LoadPlan
) -> Snapshot | None:
    """Return ``snapshot`` with the Attribute writes of ``pending`` (of its run) laid over it,
    for the keys ``plan`` loads."""
    if snapshot is None:
        return None
    values: dict[tuple[str, str], StoredValue] | None = None
    for unit in pending:
        if unit.run_id != snapshot.run.run_id:
            continue
        for write in unit.writes:
            if not _loads(plan, write.name, write.instance):
                continue
            if values is None:
                values = dict(snapshot.values)
            _lay(values, write)
    return snapshot if values is None else replace(snapshot, values=values)


def handed_off_snapshot(
    pending: tuple[HandedOff, ...],
    plan: LoadPlan,
    run_id: str | None,
    singletons: Collection[str],
) -> Snapshot | None:
    """Return the snapshot an invocation loading ``plan`` would read, built from the handed-off
    units alone when they wrote every key it loads; None when it must read the database.

    This is what a read followed by :func:`overlay` returns then, without the read: each key's
    value is its latest handed-off write, whatever is committed under it. The run is the one
    the newest unit's invocation read; had that run closed since, the newest unit cannot
    commit (an RPC's unit needs its run open), and neither can the invocation's own unit,
    which is queued behind it and fails with its error, as it would after a read. A plan that
    reads Channels or whole maps needs the read. ``singletons`` are the Flow's declared singleton
    Attributes, which a plan with ``names`` None loads.
    """
    if not pending or plan.whole_maps:
        return None
    if plan.channel_sizes or plan.channels or plan.channel_instances:
        return None
    run = pending[-1].run
    if run is None or (run_id is not None and run_id != run.run_id):
        return None
    names = singletons if plan.names is None else plan.names
    wanted = {(name, "") for name in names} | set(plan.instances)
    values: dict[tuple[str, str], StoredValue] = {}
    found: set[tuple[str, str]] = set()
    # Newest first: a key's newest write is its value, and the newest units usually wrote
    # every key (a Flow's RPCs keep rewriting the same state), so the walk stops early.
    for unit in reversed(pending):
        if unit.run_id != run.run_id:
            continue
        for write in reversed(unit.writes):
            key = (write.name, write.instance)
            if key not in wanted or key in found:
                continue
            found.add(key)
            if write.value is not None or write.blob:
                values[key] = StoredValue(write.value, write.blob, write.decoded)
        if len(found) == len(wanted):
            return Snapshot(run, values)
    return None


def _lay(values: dict[tuple[str, str], StoredValue], write: AttributeWrite) -> None:
    """Lay one handed-off write over ``values``: a delete (no value, not hard-delete) removes
    the key."""
    key = (write.name, write.instance)
    if write.value is None and not write.blob:
        values.pop(key, None)
    else:
        values[key] = StoredValue(write.value, write.blob, write.decoded)


def _loads(plan: LoadPlan, name: str, instance: str) -> bool:
    if instance == "":
        return plan.names is None or name in plan.names
    return plan.loads_instance(name, instance)
