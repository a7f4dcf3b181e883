"""The PostgreSQL Committer: the commits that qualify go as one statement, the rest as units.

Every commit means the same as its plain unit (``engine/_storage/units.py``); what changes is
how many round trips it costs. Units commit on several connections in parallel, in no fixed
order, so an RPC's keys stay on as lock rows until its commit, which drops them in its own
transaction (the fence: it commits nothing unless it dropped a row for every key it took).

- A start of a new Flow ID, a Step decision that only moves on or only ends, and a locked
  RPC's writes alone are one statement or function call each (``engine/_storage/postgres``:
  ``first_starts``, ``step_moves``, ``step_ends``, ``rpc_writes``); when one writes nothing
  (the Flow ID was used, the attempt is stale, a Step waits on the Flow) the unit decides.
- One process's RPCs that follow each other on the same keys pass them on in process while
  their commits go out in order, in batches: a relay (``relay``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from sqlalchemy import Connection

from engine._runtime.committer import Committer, RPCCommit
from engine._runtime.handoff import HandedOff, nothing
from engine._runtime.ports import Notifier
from engine._runtime.postgres.lock_rows import drop_rpc_locks, lost, release_all
from engine._runtime.postgres.lock_table import PostgresLockTable
from engine._runtime.workload import Workload
from engine._storage.postgres.database import PostgresDatabase
from engine._storage.postgres.deferred_flush import deferred_flush_of
from engine._storage.postgres.first_starts import first_start
from engine._storage.postgres.rpc_writes import COMMITTED, LOST, NOT_OPEN, WAITERS, RPCWrites
from engine._storage.postgres.rpc_writes import rpc_writes as writes_statement
from engine._storage.postgres.step_ends import one_statement
from engine._storage.records import Args, CommitResult, QueuedStep, StagedEffects, StartRequest
from engine._storage.units import StaleAttemptError, Unit
from engine.telemetry import Telemetry


class OneStatement(Protocol):
    """A commit written as one statement, its own transaction: it answers whether it wrote."""

    @property
    def result(self) -> CommitResult:
        """What the commit changed, when it wrote."""

    def statement(self, claimant: str) -> tuple[str, Args]:
        """The statement and its arguments, queuing Steps for ``claimant``."""

    def wrote(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Read the statement's rows: False when it wrote nothing."""


class PostgresCommitter(Committer):
    """Commits on PostgreSQL: one statement where a commit qualifies, relays for RPCs."""

    def __init__(
        self,
        database: PostgresDatabase,
        notifier: Notifier,
        workload: Workload,
        locks: PostgresLockTable,
        telemetry: Telemetry | None = None,
        *,
        relays: bool = True,
    ) -> None:
        super().__init__(database, notifier, workload, locks, telemetry)
        self._statements = database
        self._rows = locks
        #: Whether one process's RPCs on the same keys may pass them on (see ``relay``).
        self._relaying = relays

    async def start(self, request: StartRequest, now: int) -> CommitResult:
        """Commit a start as one statement when its Flow ID is new, else as its unit."""
        first = first_start(request, now)
        if first is not None and await self._one(first):
            return first.result
        return await super().start(request, now)

    async def step(
        self,
        step: QueuedStep,
        effects: StagedEffects,
        now: int,
        after: tuple[HandedOff, ...] = (),
    ) -> CommitResult:
        """Commit a decision that only moves on or only ends as one statement, any other
        attempt result (or one made after reading handed-off units) as its unit."""
        move = None if after else one_statement(step, effects, now)
        if move is None:
            return await super().step(step, effects, now, after)
        if not await self._one(move):
            raise StaleAttemptError(move.decision.step_id)
        return move.result

    async def _one(self, one: OneStatement) -> bool:
        """Apply ``one`` as its own transaction; publish its result when it wrote (True)."""
        sql, args = one.statement(self._statements.claimant)
        self.entered()
        try:
            started = time.perf_counter()
            rows = await self._statements.write_statement(
                sql, args, grouped=True, flow_id=_flow_of(one.result)
            )
            if not one.wrote(rows):
                return False
            # Read after ``wrote``: a Step's end learns there whether it closed the run.
            self.committed(one.result, time.perf_counter() - started)
            return True
        finally:
            self.left()

    async def rpc(self, rpc: RPCCommit) -> CommitResult:
        """Commit an RPC's effects dropping the lock rows it took in the same transaction,
        or in its Flow's relay when it holds keys passed on in process (see ``relay``)."""
        flow_id, owner = rpc.flow_id, rpc.owner
        relays = self._rows.relays
        steps_wait = self._rows.waits_on(flow_id)
        statement = (
            writes_statement(
                flow_id=flow_id,
                flow_type=rpc.flow_type,
                run_id=rpc.run.run_id,
                rpc_name=rpc.rpc_name,
                effects=rpc.effects,
                now=rpc.now,
            )
            if rpc.locked
            else None
        )
        # Its writes may go in a relay when another invocation is in line for the keys.
        relayable = statement is not None and rpc.followed and self._relaying
        if relays.holds(flow_id, owner):
            relayed = self._relayed(rpc, statement, relayable)
            return await relays.commit(flow_id, owner, relayed, steps_wait)
        taken = self._rows.taken(owner)
        if not taken:  # it holds nothing: a plain commit
            try:
                return await self.commit(rpc.unit(), after=rpc.after)
            finally:
                rpc.on_released()
        if relayable and not steps_wait and relays.start(flow_id, owner, taken):
            relayed = self._relayed(rpc, statement, relayable)
            return await relays.commit(flow_id, owner, relayed, steps_wait)
        return await self.commit_dropping(
            flow_id, owner, taken, rpc.unit(), rpc.after, statement, rpc.on_released
        )

    def _relayed(self, rpc: RPCCommit, statement: RPCWrites | None, relayable: bool) -> Relayed:
        handed = HandedOff(rpc.unit(), rpc.after, rpc.run.run_id, rpc.effects.writes, rpc.run)
        return Relayed(self, rpc, handed, statement, relayable)

    async def locked(self, flow_id: str, owner: str, unit: Unit) -> CommitResult:
        """Commit a client's unit dropping the lock rows ``owner`` took in its transaction."""
        taken = self._rows.taken(owner)
        if not taken:
            return await self.commit(unit)
        return await self.commit_dropping(flow_id, owner, taken, unit, (), None, nothing)

    async def commit_dropping(
        self,
        flow_id: str,
        owner: str,
        taken: tuple[str, ...],
        unit: Unit,
        after: tuple[HandedOff, ...],
        statement: RPCWrites | None,
        released: Callable[[], None],
    ) -> CommitResult:
        """Commit ``unit`` (or ``statement``, the same as one call) dropping ``owner``'s
        ``taken`` rows in its transaction, so that the keys are free exactly when its writes
        are visible; should it fail, the rows are dropped on their own. ``released`` is told
        once the keys are free, however the commit ends."""
        locks = self._rows
        steps_wait = locks.waits_on(flow_id)
        if statement is not None and not steps_wait:
            # The commit and the release as one call; when a Step waits on the Flow it does
            # nothing, and the unit below grants the Step what this RPC held.
            try:
                if after:  # the units it read commit first, or it does not
                    await self._wait_for(after)
                    HandedOff.check(after)
                outcome, result = await self._commit_statement(statement, owner, len(taken))
            except BaseException:
                with contextlib.suppress(Exception):  # as below
                    await locks.release_now(flow_id, owner)
                released()
                raise
            if outcome != WAITERS:
                released()
                if outcome == LOST:
                    await locks.raise_lost(flow_id, taken)
                return result
        granted: list[str] = []
        me = locks.process_id

        def fence(conn: Connection, dropped: int) -> None:
            nonlocal granted
            if dropped < 0:  # a Step waits on the Flow: grant it what this RPC held
                dropped, granted = release_all(conn, flow_id, owner, me, steps_wait)
            if dropped != len(taken):
                lost(conn, flow_id, taken)

        def releasing(conn: Connection) -> CommitResult:
            result = unit(conn)
            # One statement drops the rows when nobody is to be granted anything, sent with
            # the unit's deferred writes when it has them.
            deferred = deferred_flush_of(conn)
            if steps_wait:
                fence(conn, -1)
            elif deferred is not None:
                deferred.drop_rpc_locks(flow_id, owner, fence)
            else:
                fence(conn, drop_rpc_locks(conn, flow_id, owner))
            return result

        try:
            result = await self.commit(releasing, after=after)
        except BaseException:
            # The commit's own error is the caller's; a release that fails too is retried by
            # the poll (see PostgresLockTable.release_now).
            with contextlib.suppress(Exception):
                await locks.release_now(flow_id, owner)
            released()
            raise
        locks.granted(flow_id, granted)
        released()
        return result

    async def _commit_statement(
        self, writes: RPCWrites, owner: str, taken: int
    ) -> tuple[str, CommitResult]:
        """Apply ``writes`` as one call dropping ``owner``'s ``taken`` lock rows; publish its
        result when it committed. Answer what happened (see ``rpc_writes``)."""
        sql, args = writes.statement(owner, taken)
        self.entered()
        try:
            started = time.perf_counter()
            rows = await self._statements.write_statement(
                sql, args, grouped=True, flow_id=_flow_of(writes.result)
            )
            outcome = writes.outcome(rows, taken)
            if outcome == COMMITTED:
                self.committed(writes.result, time.perf_counter() - started)
            elif outcome == NOT_OPEN:
                raise writes.not_open()
            return outcome, writes.result
        finally:
            self.left()

    def relayed_ended(self, flow_id: str, handed: HandedOff) -> None:
        """A relayed unit ended: forget it (see :class:`Relayed`)."""
        self.handoffs.remove(flow_id, handed)
        self.left()


class Relayed:
    """A locked RPC's commit as its Flow's relay takes it (see ``relay.RelayItem``)."""

    __slots__ = ("_committer", "_rpc", "_statement", "handed", "relayable")

    def __init__(
        self,
        committer: PostgresCommitter,
        rpc: RPCCommit,
        handed: HandedOff,
        statement: RPCWrites | None,
        relayable: bool,
    ) -> None:
        self._committer = committer
        self._rpc = rpc
        #: The RPC's writes alone as one call, when they qualify.
        self._statement = statement
        self.handed = handed
        #: Whether the unit may be queued in the relay (writes alone, and someone follows).
        self.relayable = relayable

    @property
    def result(self) -> CommitResult:
        """What the unit changes, once committed."""
        assert self._statement is not None
        return self._statement.result

    def not_open(self) -> BaseException:
        """The error of a run no longer open, as the plain commit raises it."""
        assert self._statement is not None
        return self._statement.not_open()

    def queued(self) -> None:
        """Note the unit as handed off: readers lay its writes over what they read."""
        self.handed.ended = asyncio.get_running_loop().create_future()
        self._committer.handoffs.add(self._rpc.flow_id, self.handed)
        self._committer.entered()

    def kept(self, owner: str, taken: int) -> tuple[str, Args]:
        """The unit as one call keeping ``owner``'s ``taken`` lock rows."""
        assert self._statement is not None
        return self._statement.kept(owner, taken)

    def committed(self) -> None:
        """The relay committed the unit: publish its result; it has ended."""
        self._committer.publish(self.result)
        self.ended(None)

    def ended(self, error: BaseException | None) -> None:
        """Forget the unit; its readers learn how it ended."""
        if error is not None:
            self.handed.mark_failed(error)
        self._committer.relayed_ended(self._rpc.flow_id, self.handed)
        if self.handed.ended is not None and not self.handed.ended.done():
            self.handed.ended.set_result(None)

    def released(self) -> None:
        """The invocation's keys are free (passed on, or the rows dropped)."""
        self._rpc.on_released()

    def commit_dropping(
        self, row_owner: str, keys: tuple[str, ...], *, tell: bool = True
    ) -> Awaitable[CommitResult]:
        """Commit the unit as a plain commit dropping ``row_owner``'s rows on ``keys``;
        ``tell``: tell the invocation its keys are free (not yet told)."""
        rpc = self._rpc
        return self._committer.commit_dropping(
            rpc.flow_id,
            row_owner,
            keys,
            rpc.unit(),
            rpc.after,
            self._statement,
            rpc.on_released if tell else nothing,
        )


def _flow_of(result: CommitResult) -> str:
    """The Flow a one-statement commit locks rows of (each changes one run)."""
    return result.changes[0].flow_id if result.changes else ""
