"""One process's RPCs pass their lock rows on to each other while their commits go out in order.

On a PostgreSQL database an RPC holds its keys as rows until its commit, so RPCs that follow each
other on the same keys (a Flow's registrations) each paid a round trip to take the rows and
read, and a commit with its WAL flush, one after the other. Here, when an RPC whose effects are
Attribute writes alone commits, its rows stay on the keys: its unit is queued in the Flow's
relay and its keys are free in this process at once, as the SQLite writer's handoffs does
(``handoff``). The next RPC of this process asking for some of those keys holds them without a
round trip and reads the handed-off state; the relay commits the queued units in order, those
that queued together in one transaction (one round trip, one WAL flush), each checking that the
rows are still there (the fence) with the run open (``rpc_writes.KEEP_SQL``). When no RPC holds
the keys any more, the last commit drops the rows, or a release does.

To every other process and every Step the keys stay held by an RPC for the relay's life, which
is bounded (``MAX_PASSES``, ``MAX_AGE_SECONDS``) so that Steps waiting elsewhere get their turn;
a Step of this process waiting on the Flow stops the passing at once. A unit that fails fails
every unit queued after it (they read what it wrote) and ends the relay.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine._runtime.handoff import HandedOff
from engine._runtime.locks import RPC
from engine._storage.postgres.rpc_writes import KEEP_SQL, KEPT_LOCKS_LOST, KEPT_RUN_NOT_OPEN
from engine._storage.records import Args, CommitResult
from engine.errors import RPCLockConflictError

log = logging.getLogger("dexlite.locks")

#: How many RPCs one relay passes the keys to, and for how long, before it lets them go.
MAX_PASSES = 256
MAX_AGE_SECONDS = 0.1
#: Turns of the event loop a relay waits before deciding whether someone holds the keys: the
#: caller woken by the last holder's release asks for them within one.
YIELDS = 3


class RelayItem(Protocol):
    """One RPC's commit as a relay takes it (the PostgreSQL Committer makes them)."""

    #: What readers lay over committed state until the unit ended.
    handed: HandedOff
    #: Whether the unit may be queued in the relay (its writes go as one call).
    relayable: bool

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

    def released(self) -> None:
        """The invocation's keys are free."""

    def commit_dropping(
        self, row_owner: str, keys: tuple[str, ...], *, tell: bool = True
    ) -> Awaitable[CommitResult]:
        """Commit the unit on its own, dropping ``row_owner``'s rows on ``keys`` in its
        transaction; ``tell``: tell the invocation its keys are free then."""


#: A queued item, and its caller's future.
_Queued = tuple[RelayItem, asyncio.Future[CommitResult]]


@dataclass(eq=False)
class _Relay:
    flow_id: str
    #: The RPC whose rows are on the keys.
    row_owner: str
    keys: frozenset[str]
    started: float
    #: The RPC of this process holding the keys now, if any.
    holder: str | None = None
    pending: list[_Queued] = field(default_factory=list)
    passes: int = 0
    #: Every unit queued in the relay, in order (ended or not).
    queued: list[RelayItem] = field(default_factory=list)
    #: No more passes: the rows go once the queued units and the holder are done.
    closing: bool = False
    #: The holder commits as a plain unit that drops the rows itself.
    handed_back: bool = False
    #: Why a queued unit failed: every later one fails with it.
    error: BaseException | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Relays:
    """The relays of one process's PostgreSQL lock table, one per Flow ID at most."""

    def __init__(
        self,
        *,
        write_batch: Callable[[str, Sequence[Sequence[object]]], Awaitable[None]],
        release_rows: Callable[[str, str], Awaitable[None]],
        raise_lost: Callable[[str, tuple[str, ...]], Awaitable[None]],
        spawn: Callable[[Awaitable[None]], None],
    ) -> None:
        self._write_batch = write_batch
        self._release_rows = release_rows
        self._raise_lost = raise_lost
        self._spawn = spawn
        self._relays: dict[str, _Relay] = {}

    def holds(self, flow_id: str, owner: str) -> bool:
        """Whether ``owner`` holds keys passed on by the Flow's relay."""
        relay = self._relays.get(flow_id)
        return relay is not None and relay.holder == owner

    async def pass_on(
        self, flow_id: str, wanted: Sequence[str], owner: str, steps_wait: bool
    ) -> bool:
        """Give ``owner`` the keys ``wanted`` from the Flow's relay: True when it holds them
        now; False when the caller must take them from the database (waiting first for a
        relay on some of them to end). Raises RPCLockConflictError when an RPC of this process
        holds one of them."""
        relay = self._relays.get(flow_id)
        if relay is None or relay.keys.isdisjoint(wanted):
            return False
        if relay.holder is not None:
            key = next(k for k in wanted if k in relay.keys)
            raise RPCLockConflictError(key, RPC, flow_id=flow_id, operation="invokeRpc")
        loop = asyncio.get_running_loop()
        if relay.passes >= MAX_PASSES or loop.time() - relay.started > MAX_AGE_SECONDS:
            relay.closing = True
        if steps_wait:
            relay.closing = True
        if relay.closing or relay.error is not None or not relay.keys.issuperset(wanted):
            relay.closing = True
            relay.wake.set()
            await relay.done.wait()
            return False
        relay.holder = owner
        relay.passes += 1
        return True

    def start(self, flow_id: str, owner: str, taken: tuple[str, ...]) -> bool:
        """Begin a relay on ``owner``'s rows if the Flow has none; False when it has one."""
        if flow_id in self._relays:
            return False
        loop = asyncio.get_running_loop()
        relay = _Relay(flow_id, owner, frozenset(taken), loop.time(), holder=owner)
        self._relays[flow_id] = relay
        self._spawn(self._run(relay))
        return True

    async def commit(
        self, flow_id: str, owner: str, item: RelayItem, steps_wait: bool
    ) -> CommitResult:
        """Commit the holder ``owner``'s ``item``: queued, its keys passed on at once, when it
        is relayable; otherwise on its own after the queued ones, dropping the rows."""
        relay = self._relays[flow_id]
        if not item.relayable or steps_wait or relay.error is not None:
            if relay.error is not None:
                item.released()
                relay.holder = None
                relay.wake.set()
                raise relay.error
            # The unit commits after the queued units it read, dropping the relay's rows.
            relay.closing = True
            try:
                await self._queued_ended(relay)
            except BaseException:
                item.released()  # as a failed commit does; the relay drops the rows
                relay.holder = None
                relay.wake.set()
                raise
            relay.handed_back = True
            try:
                return await item.commit_dropping(relay.row_owner, tuple(sorted(relay.keys)))
            finally:
                relay.holder = None
                relay.wake.set()
        future: asyncio.Future[CommitResult] = asyncio.get_running_loop().create_future()
        item.queued()
        relay.queued.append(item)
        relay.pending.append((item, future))
        relay.holder = None
        relay.wake.set()
        item.released()
        # Queued, it commits even if its caller is canceled meanwhile (its readers wait on it).
        return await asyncio.shield(future)

    @staticmethod
    async def _queued_ended(relay: _Relay) -> None:
        """Wait until every unit queued in ``relay`` has ended; raise the error of the first
        that failed (the waiting holder read what it wrote)."""
        for unit in relay.queued:
            if unit.handed.ended is not None:
                await asyncio.shield(unit.handed.ended)
            if unit.handed.error is not None:
                raise unit.handed.error

    def let_go(self, flow_id: str, owner: str) -> None:
        """The holder ``owner`` ends without committing: its keys are free again."""
        relay = self._relays[flow_id]
        relay.holder = None
        relay.wake.set()

    async def _run(self, relay: _Relay) -> None:
        """Commit the relay's queued units in batches until no RPC holds its keys; then
        drop the rows (unless the last holder's own commit did)."""
        try:
            while True:
                await _turns(relay)
                if not relay.pending and relay.holder is not None:
                    await relay.wake.wait()
                    continue
                batch, relay.pending = relay.pending, []
                final = relay.holder is None
                if final:
                    relay.closing = True  # a take waits for the end, then asks the database
                if relay.error is not None:
                    _fail(batch, relay.error)
                elif final and len(batch) == 1:
                    await self._last(relay, batch[0])
                    return
                elif batch:
                    await self._apply(relay, batch)
                if final:
                    if not relay.handed_back:
                        await self._release_rows(relay.flow_id, relay.row_owner)
                    return
        except Exception:  # the units were failed; the poll drops rows left behind
            log.exception("a relay on Flow %s failed", relay.flow_id)
        finally:
            if self._relays.get(relay.flow_id) is relay:
                del self._relays[relay.flow_id]
            relay.done.set()

    async def _last(self, relay: _Relay, queued: _Queued) -> None:
        """Commit the one queued unit dropping the rows, as a commit without a relay does."""
        item, future = queued
        try:
            result = await item.commit_dropping(
                relay.row_owner, tuple(sorted(relay.keys)), tell=False
            )
        except BaseException as exc:
            item.ended(exc)
            _settle(future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        item.ended(None)
        if not future.done():
            future.set_result(result)

    async def _apply(self, relay: _Relay, batch: list[_Queued]) -> None:
        """Commit ``batch`` keeping the rows, all at once; after an error, one at a time up
        to the unit that fails, which fails the rest."""
        taken = len(relay.keys)
        try:
            await self._write_batch(
                KEEP_SQL, [item.kept(relay.row_owner, taken)[1] for item, _ in batch]
            )
        except Exception as exc:
            if len(batch) == 1 or not _refused(exc):
                relay.error = await self._error(relay, exc, batch[0][0])
                _fail(batch, relay.error)
                return
            for i, one in enumerate(batch):
                try:
                    await self._write_batch(KEEP_SQL, [one[0].kept(relay.row_owner, taken)[1]])
                except Exception as exc:
                    relay.error = await self._error(relay, exc, one[0])
                    _fail(batch[i:], relay.error)
                    return
                _committed(one)
            return
        for one in batch:
            _committed(one)

    async def _error(self, relay: _Relay, exc: Exception, item: RelayItem) -> BaseException:
        """The error a unit refused by ``KEEP_SQL`` fails with, as the plain commit's."""
        state = getattr(exc, "sqlstate", None)
        if state == KEPT_LOCKS_LOST:
            try:
                await self._raise_lost(relay.flow_id, tuple(sorted(relay.keys)))
            except Exception as lost:
                return lost
        if state == KEPT_RUN_NOT_OPEN:
            return item.not_open()
        return exc


async def _turns(relay: _Relay) -> None:
    """Let the RPC woken by the last holder's release ask for the keys first: a few turns of
    the event loop after the last change of the relay (a unit queued, the keys let go)."""
    while True:
        relay.wake.clear()
        for _ in range(YIELDS):
            await asyncio.sleep(0)
        if not relay.wake.is_set() or relay.holder is not None or relay.closing:
            return


def _refused(exc: BaseException) -> bool:
    """Whether ``KEEP_SQL`` raised ``exc`` on purpose (one unit refused, the others may not be)."""
    return getattr(exc, "sqlstate", None) in (KEPT_LOCKS_LOST, KEPT_RUN_NOT_OPEN)


def _committed(queued: _Queued) -> None:
    item, future = queued
    item.committed()
    if not future.done():
        future.set_result(item.result)


def _fail(
    batch: Sequence[_Queued],
    error: BaseException,
) -> None:
    for item, future in batch:
        item.ended(error)
        _settle(future, error)


def _settle(future: asyncio.Future[CommitResult], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
        future.exception()  # its caller may have gone: not an unretrieved exception
