"""The one way the runtime commits: write a unit, then publish its result to the listeners.

Nothing wakes a waiter, schedules a Step or times a run out on its own after a write: every
follow-up is a listener of the Notifier, so a commit made in another process (delivered by
another Notifier) is followed up exactly like one made here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol

from engine._runtime.activity import Activity
from engine._runtime.handoff import HandedOff, HandOff, Handoffs, LockedCommit, nothing
from engine._runtime.ports import Database, Notifier, OrderedWriter, StatementWriter
from engine._storage.postgres.first_starts import FirstStart
from engine._storage.postgres.rpc_writes import COMMITTED, NOT_OPEN, RPCWrites
from engine._storage.postgres.step_ends import StepEnd
from engine._storage.postgres.step_moves import StepMove
from engine._storage.records import Args, AttributeWrite, CommitResult, RunInfo
from engine._storage.units import StaleAttemptError, Unit
from engine.telemetry import Telemetry

COMMITS = "commits in flight"


class OneStatement(Protocol):
    """A commit written as one statement, its own transaction (``step_moves``,
    ``step_ends``, ``first_starts``): it answers whether it wrote."""

    @property
    def result(self) -> CommitResult:
        """What the commit changed, when it wrote."""

    def statement(self, claimant: str) -> tuple[str, Args]:
        """The statement and its arguments, queuing Steps for ``claimant``."""

    def wrote(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Read the statement's rows: False when it wrote nothing."""


class Committer:
    """Applies commit units and publishes what they changed."""

    def __init__(
        self,
        database: Database,
        notifier: Notifier,
        activity: Activity,
        telemetry: Telemetry | None = None,
        *,
        writer: OrderedWriter | None = None,
        statements: StatementWriter | None = None,
        early_release: bool = True,
    ) -> None:
        self._telemetry = telemetry or Telemetry()
        #: Whether locked units may release their locks as they are queued (see ``locked``).
        self._early_release = early_release
        self._database = database
        #: The database's one writer, when it has one (SQLite): units handed to it commit in
        #: the order they were handed over.
        self._writer = writer
        #: The database, when it applies a single statement as its own transaction (see
        #: ``rpc_writes``).
        self._statements = statements
        self._notifier = notifier
        self._activity = activity
        #: The units handed off per Flow ID, not yet ended (see ``handoff``).
        self.handoffs = Handoffs()

    def locked(
        self,
        unit: Unit,
        *,
        after: tuple[HandedOff, ...] = (),
        hand_off: HandOff | None = None,
        on_released: Callable[[], None] = nothing,
        one_statement: RPCWrites | None = None,
        relay: bool = False,
    ) -> LockedCommit:
        """Return ``unit`` as a LockedCommit: committed after ``after`` (see :meth:`commit`),
        queued for early release when the database has one writer and ``hand_off``
        describes the unit's writes, and runnable as ``one_statement`` where the database
        applies single statements (PostgreSQL), there handed off to the next holder of the
        keys through a relay when ``relay`` says one may follow (see ``multiprocess/relay``)."""

        def commit(locked: Unit) -> Awaitable[CommitResult]:
            return self.commit(locked, after)

        def queue(locked: Unit) -> Awaitable[CommitResult]:
            assert hand_off is not None
            return self.hand_off(
                locked,
                flow_id=hand_off.flow_id,
                run_id=hand_off.run_id,
                writes=hand_off.writes,
                after=after,
                run=hand_off.run,
            )[1]

        early = hand_off is not None and self._writer is not None and self._early_release
        statement = relayed = None
        if one_statement is not None and self._statements is not None:
            statement = partial(self._commit_statement, self._statements, one_statement)
            if relay and hand_off is not None and self._writer is None and self._early_release:
                handed = HandedOff(unit, after, hand_off.run_id, hand_off.writes, hand_off.run)
                relayed = _Relayed(self, hand_off.flow_id, handed, one_statement)
        return LockedCommit(unit, commit, queue if early else None, on_released, statement, relayed)

    async def _commit_one(self, statements: StatementWriter, one: OneStatement) -> bool:
        """Apply ``one`` as its own transaction; publish its result when it wrote (True)."""
        sql, args = one.statement(statements.claimant)
        self._activity.enter(COMMITS)
        try:
            started = time.perf_counter()
            written = await statements.write_statement(
                sql, args, grouped=True, flow_id=_flow_of(one.result)
            )
            if not one.wrote(written):
                return False
            self._telemetry.commit(time.perf_counter() - started)
            self._notifier.publish(one.result)
            return True
        finally:
            self._activity.leave(COMMITS)

    async def start(self, unit: Unit, first: FirstStart | None) -> CommitResult:
        """Apply a start: as ``first``, one statement, where the database runs it so and the
        Flow ID is new; as ``unit`` otherwise (see ``first_starts``)."""
        statements = self._statements
        if first is not None and statements and await self._commit_one(statements, first):
            return first.result
        return await self.commit(unit)

    async def _commit_statement(
        self, statements: StatementWriter, writes: RPCWrites, owner: str, taken: int
    ) -> tuple[str, CommitResult]:
        """Apply ``writes`` as one statement dropping ``owner``'s ``taken`` lock rows; publish
        its result when it committed. Answer what happened (see ``rpc_writes``)."""
        sql, args = writes.statement(owner, taken)
        self._activity.enter(COMMITS)
        try:
            started = time.perf_counter()
            outcome = writes.outcome(
                await statements.write_statement(
                    sql, args, grouped=True, flow_id=_flow_of(writes.result)
                ),
                taken,
            )
            if outcome == COMMITTED:
                self._telemetry.commit(time.perf_counter() - started)
                self._notifier.publish(writes.result)
            elif outcome == NOT_OPEN:
                raise writes.not_open()
            return outcome, writes.result
        finally:
            self._activity.leave(COMMITS)

    async def commit(
        self,
        unit: Unit,
        after: tuple[HandedOff, ...] = (),
        *,
        slow: bool = False,
        move: StepMove | StepEnd | None = None,
    ) -> CommitResult:
        """Apply ``unit`` in one transaction, publish its result, and return it.

        ``after`` are the handed-off units whose writes the caller read: if one of them does
        not commit, neither does this unit (it fails with that unit's error). ``slow``: the
        unit may work through many rows (see ``Database.write``). ``move``: the same Step
        decision as one statement, applied instead where the database runs it so (see
        ``step_moves``, ``step_ends``); like the unit, it raises StaleAttemptError when it
        may not commit.
        """
        if move is not None and self._statements is not None and not after:
            if not await self._commit_one(self._statements, move):
                raise StaleAttemptError(move.decision.step_id)
            return move.result
        if after:
            if self._writer is None:
                # No writer orders the commits: wait until the units read have ended.
                for earlier in after:
                    if earlier.ended is not None:
                        await asyncio.shield(earlier.ended)
            unit = HandedOff(unit, after)
        return await self._finish(self._database.write(unit, slow=slow))

    def hand_off(
        self,
        unit: Unit,
        *,
        flow_id: str,
        run_id: str,
        writes: tuple[AttributeWrite, ...],
        after: tuple[HandedOff, ...],
        run: RunInfo | None = None,
    ) -> tuple[HandedOff, Awaitable[CommitResult]]:
        """Queue ``unit`` now and return it with the awaitable of its commit, so that the
        caller may release its locks before awaiting (only on a database with one writer).

        Until the unit ends, :attr:`handoffs` lists it under ``flow_id`` with ``writes`` and
        ``run``, the run as the caller's snapshot had it.
        """
        handed = HandedOff(unit, after, run_id, writes, run)
        assert self._writer is not None, "units are handed off to a database's one writer"
        queued: asyncio.Future[CommitResult] = self._writer.submit(handed)
        self._activity.enter(COMMITS)  # now: the caller releases its locks before awaiting
        # Readers lay its writes over what they read until it ended, even if its caller is
        # canceled meanwhile: only the writer's answer ends it.
        self.handoffs.add(flow_id, handed)
        queued.add_done_callback(lambda _: self.handoffs.remove(flow_id, handed))
        return handed, self._finish(queued, entered=True)

    async def _finish(
        self, written: Awaitable[CommitResult], entered: bool = False
    ) -> CommitResult:
        if not entered:
            self._activity.enter(COMMITS)
        try:
            started = time.perf_counter()
            result = await written
            self._telemetry.commit(time.perf_counter() - started)
            self._notifier.publish(result)
            return result
        finally:
            self._activity.leave(COMMITS)


class _Relayed:
    """A locked RPC's writes-only unit as a relay commits it (see ``handoff.RelayedUnit``)."""

    __slots__ = ("_committer", "_flow_id", "_writes", "handed")

    def __init__(
        self, committer: Committer, flow_id: str, handed: HandedOff, writes: RPCWrites
    ) -> None:
        self._committer = committer
        self._flow_id = flow_id
        self._writes = writes
        self.handed = handed

    def queued(self) -> None:
        """Note the unit as handed off (see ``handoff.RelayedUnit``)."""
        self.handed.ended = asyncio.get_running_loop().create_future()
        self._committer.handoffs.add(self._flow_id, self.handed)
        self._committer._activity.enter(COMMITS)

    @property
    def result(self) -> CommitResult:
        """What the unit changes (see ``handoff.RelayedUnit``)."""
        return self._writes.result

    def not_open(self) -> BaseException:
        """The error of a run no longer open, as the plain commit raises it."""
        return self._writes.not_open()

    def kept(self, owner: str, taken: int) -> tuple[str, Args]:
        """The unit keeping ``owner``'s lock rows (``rpc_writes.KEEP_SQL``)."""
        return self._writes.kept(owner, taken)

    def committed(self) -> None:
        """Publish the unit's result; it has ended."""
        self._committer._notifier.publish(self._writes.result)
        self.ended(None)

    def ended(self, error: BaseException | None) -> None:
        """Forget the unit; its readers learn how it ended."""
        if error is not None:
            self.handed.mark_failed(error)
        self._committer.handoffs.remove(self._flow_id, self.handed)
        self._committer._activity.leave(COMMITS)
        if self.handed.ended is not None and not self.handed.ended.done():
            self.handed.ended.set_result(None)


def _flow_of(result: CommitResult) -> str:
    """The Flow a one-statement commit locks rows of (each changes one run)."""
    return result.changes[0].flow_id if result.changes else ""
