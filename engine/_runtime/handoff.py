"""Early lock release: an RPC lets go of its locks once its commit unit is with the writer.

One Flow's RPCs serialize through their locks, so the time a lock is held decides how many
a Flow takes per second; waiting for the commit's fsync was most of it. On SQLite the single
writer applies units in the order they were handed to it, so an RPC whose effects are only
Attribute writes releases its locks as soon as its unit is queued (its caller is still
answered only once the unit committed). The next holder of those locks reads the Flow's
committed state with the writes of every unit still on its way laid over it (the handed-off
state), and its own unit, queued behind them, commits only if each of them did: a unit that
fails fails every unit that read what it wrote. GetAttributes and every other client read
see committed state only.

PostgreSQL commits units on several connections in parallel, in no fixed order, so there the
lock rows stay on the keys until the commit; one process's RPCs that follow each other on the
same keys pass them on in process while their commits go out in order, in batches
(``multiprocess/relay``), and an invocation that read such units waits for them to end before
its own unit commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from engine._storage.records import (
    Args,
    AttributeWrite,
    CommitResult,
    LoadPlan,
    RunInfo,
    Snapshot,
    StoredValue,
)
from engine._storage.units import Unit


def nothing() -> None:
    """Do nothing (the default of a callback no one asked for)."""


@dataclass(frozen=True)
class HandOff:
    """What a unit that may be handed off wrote, and the run its caller read (see
    ``handoff``): its writes are Attribute writes alone."""

    flow_id: str
    run_id: str
    writes: tuple[AttributeWrite, ...]
    run: RunInfo | None = None


@dataclass(frozen=True)
class LockedCommit:
    """A unit to commit under the Attribute locks its caller holds, as a LockTable's
    ``commit_releasing`` takes it."""

    unit: Unit
    #: Applies the unit in one transaction and publishes its result.
    commit: Callable[[Unit], Awaitable[CommitResult]]
    #: Queues the unit at once for a writer that commits in order, and returns its commit:
    #: the keys may then be released before it commits (early release). None when the unit
    #: must commit before its keys are free.
    queue: Callable[[Unit], Awaitable[CommitResult]] | None = None
    #: Told as soon as the keys are free (once, however the commit ends).
    on_released: Callable[[], None] = nothing
    #: The unit as one statement that also drops the RPC's lock rows, where the database
    #: runs it so (see ``rpc_writes``): given the owner and how many rows it took, it
    #: answers what happened and the unit's result.
    statement: Callable[[str, int], Awaitable[tuple[str, CommitResult]]] | None = None
    #: The unit as a commit that keeps the RPC's lock rows for the next RPC of this process
    #: (see ``multiprocess/relay``); None when it may not be handed off so.
    relay: RelayedUnit | None = None


class RelayedUnit(Protocol):
    """A unit whose locks pass on before it commits, on a database without one writer."""

    #: What readers lay over committed state until the unit ended.
    handed: HandedOff

    @property
    def result(self) -> CommitResult:
        """What the unit changes, once committed."""

    def not_open(self) -> BaseException:
        """The error of the unit's run no longer open."""

    def queued(self) -> None:
        """Note the unit as handed off: readers now see its writes."""

    def kept(self, owner: str, taken: int) -> tuple[str, Args]:
        """The unit as one statement that keeps ``owner``'s ``taken`` lock rows."""

    def committed(self) -> None:
        """The unit's statement committed: publish its result; the unit has ended."""

    def ended(self, error: BaseException | None) -> None:
        """The unit ended (committed elsewhere when ``error`` is None)."""


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

    def __call__(self, conn: Any) -> Any:
        for earlier in self.after:
            if earlier.error is not None:
                # What this unit read was never committed: it must not commit either.
                raise earlier.error
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
