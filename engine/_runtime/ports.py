"""The coordination interfaces of the runtime.

Each piece of coordination the engine needs is a small Protocol here (the Stream Store's lives
with the Stream records it returns, in ``engine._streams.store_interface``). The in-process
implementations (one SQLite file, one process) are what ``composition.compose`` builds today;
a backend that runs several processes over one database provides a second implementation of
each, and nothing that uses them changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from engine._storage.postgres.rpc_loads import Loaded
from engine._storage.prepared import Prepared
from engine._storage.records import CommitResult, LoadPlan, QueuedStep
from engine._streams.store_interface import StreamStore

__all__ = [
    "BlobStore",
    "CommitListener",
    "Database",
    "LockTable",
    "Notifier",
    "StepQueue",
    "StreamStore",
    "TimerHandle",
    "TimerQueue",
]

T = TypeVar("T")


class Database(Protocol):
    """Durable state: one-statement reads, commit units, and the engine for search reads."""

    async def open(self) -> None:
        """Create or upgrade the schema and start serving."""

    async def close(self) -> None:
        """Apply what is queued, then release every connection."""

    async def read(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a short read (a run, a snapshot), against the last committed
        state and return its result."""

    async def scan(self, query: Callable[[Connection], T]) -> T:
        """Run ``query(conn)``, a read that may walk many rows (a page, recovery), against the
        last committed state and return its result."""

    async def rows(
        self, statement: Prepared, params: Mapping[str, Any], *, grouped: bool = False
    ) -> list[Any]:
        """Run ``statement``, a short read of one statement, against the last committed state
        and return its rows (tuples that also name their columns). ``grouped``: the order of
        its rows does not matter, and it may be sent with others (PostgreSQL's read groups)."""

    async def write(self, unit: Callable[[Connection], T], *, slow: bool = False) -> T:
        """Apply ``unit(conn)`` in one transaction and return its result once committed;
        ``slow`` when it may work through many rows."""

    async def ping(self) -> None:
        """Raise UnavailableError unless the database answers now."""

    def reader(self) -> AsyncEngine:
        """Return the async engine that search pages read through."""


class BlobStore(Protocol):
    """Object storage for hard-delete values: one value per (Flow ID, Attribute key)."""

    def put(self, flow_id: str, key: str, data: str) -> None:
        """Store ``data`` durably, replacing what was there."""

    def get(self, flow_id: str, key: str) -> str | None:
        """Return the stored value, or None."""

    def delete(self, flow_id: str, key: str) -> bool:
        """Delete the value for good; return True when one existed."""

    def delete_flow(self, flow_id: str) -> None:
        """Delete every value of a Flow that was purged."""

    def exists(self, flow_id: str, key: str) -> bool:
        """Return True when a value is stored."""


class TimerHandle(Protocol):
    """A scheduled callback."""

    def cancel(self) -> None:
        """Stop the callback from running."""


class TimerQueue(Protocol):
    """Callbacks at times of the engine's clock."""

    def start(self) -> None:
        """Start firing callbacks."""

    async def stop(self) -> None:
        """Stop; callbacks not yet due never run."""

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once the clock reaches ``when`` (epoch seconds)."""

    def has_due(self) -> bool:
        """Return True when a callback is due now and has not run yet."""


class LockTable(Protocol):
    """Attribute locks: one Step execution or RPC invocation holds a key at a time.

    RPCs never queue; Steps queue first come, first served behind earlier Steps.
    """

    async def acquire_for_rpc(
        self,
        flow_id: str,
        keys: Iterable[str],
        owner: str,
        load: tuple[str | None, LoadPlan] | None = None,
    ) -> Loaded | None:
        """Take every key at once or raise RPCLockConflictError naming a held key.

        ``load`` (the run, None for the Flow's latest, and what to read of it): the snapshot
        the RPC reads once it holds the keys, which a table may read with the take and return
        (as committed once the keys were taken); None when the caller must read it."""

    def acquire_for_step(
        self, flow_id: str, keys: Iterable[str], owner: str, phase: str = ""
    ) -> Awaitable[None]:
        """Return an awaitable that completes once the Step holds every key (for ``phase``)."""

    def hold_for_step(self, flow_id: str, keys: Iterable[str], owner: str) -> None:
        """Record that a queued retry keeps ``keys`` (recovery, before anything else runs)."""

    def release(self, flow_id: str, owner: str) -> None:
        """Release every key ``owner`` holds or waits for."""

    def hold_past_end(self, flow_id: str, owner: str) -> None:
        """Keep ``owner``'s keys after its execution ended, until ``release``."""

    async def release_now(self, flow_id: str, owner: str) -> None:
        """Release an RPC invocation's keys, done before the RPC answers its caller."""


class StepQueue(Protocol):
    """Pending Step executions waiting for an attempt, handed out once due."""

    def submit(self, step: QueuedStep) -> None:
        """Offer a pending execution; it is claimable from its due time on."""

    async def claim(self) -> QueuedStep:
        """Wait for the next due execution and hand it to this process."""

    def renew(self, step_id: str) -> None:
        """Keep this process's claim on a running attempt alive."""

    def release(self, step_id: str) -> None:
        """Drop an execution: it ended, or its attempt is done with it."""

    def ready(self) -> int:
        """Return how many due executions wait to be claimed."""

    def close(self) -> None:
        """Stop handing out executions."""


CommitListener = Callable[[CommitResult], None]


class Notifier(Protocol):
    """Delivers every commit to the listeners that follow up on it."""

    def publish(self, result: CommitResult) -> None:
        """Deliver ``result``, a commit that has ended, to every listener (and announce it to
        the other processes on the database, where there are any)."""

    def subscribe(self, listener: CommitListener) -> None:
        """Call ``listener`` with every commit from now on."""
