"""Statements of one kind that arrive together go to PostgreSQL together, in one round trip.

On PostgreSQL a round trip costs far more than a short statement: the client's ``send`` runs
the kernel's TCP path and wakes the server, and the server parses the message, opens and
ends a transaction and answers. So statements of the same text that arrive while earlier ones
of it are on their way wait for them and then go together, each run once with its own
arguments, pipelined behind one Sync (asyncpg's ``fetchmany``), ordered by a key, the Flow
each locks rows of (see ``_send``), and in arrival order among equals.

A statement that arrives when no group of its text is on its way does not go at once: it
goes when the event loop has run the callbacks ready at its arrival, with every statement of
its text that arrived meanwhile. Callers are woken together (by one group's answers, by one
read of several requests), and each reaches its statement in turn within that pass; the first
of them going alone made every other wait a whole round trip and then go as a second group,
so half the groups were of one (measured on locked RPCs and 3-Step Flows). An idle engine's
statement waits for nothing but the rest of the pass.

This module holds what both kinds share, the queueing; ``commit_groups`` commits one-statement
transactions this way and ``read_groups`` runs short reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

from engine._storage.postgres.statement_pool import StatementPool

#: Groups of one statement on their way at once; statements past them wait to go together.
#: One, as the SQLite writer has one batch: measured on 3-Step Flows and locked RPCs, two
#: made smaller groups and cost both sides more CPU per operation (PostgreSQL's per locked
#: RPC 375-445 us against 278-300, in alternating runs).
IN_FLIGHT = 1
#: The most statements in one group.
MAX_GROUP = 64

#: The name of the column a tagged statement answers first; nothing the engine reads is so
#: called.
TAG = "dexlite_group_member"

R = TypeVar("R")
#: A statement waiting for its group: its arguments, its caller's future, its order key.
_Waiting = tuple[Sequence[Any], "asyncio.Future[Any]", str]


@dataclass
class _Statement:
    """One statement's runs: the groups on their way and the runs waiting."""

    in_flight: int = 0
    waiting: list[_Waiting] = field(default_factory=list)


class StatementGroups(Generic[R]):
    """Runs statements of a StatementPool in groups; subclasses say how one runs alone
    (:meth:`_one`), how a group runs (:meth:`_many`) and which errors of a group are worth
    running its members again alone (:meth:`_again_alone`)."""

    def __init__(self, pool: StatementPool) -> None:
        self._pool = pool
        self._statements: dict[str, _Statement] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def _run(self, sql: str, args: Sequence[Any], key: str = "") -> R:
        """Run ``sql`` with ``args``, with the runs of the same statement it meets; ``key``
        places it in its group (see ``_send``)."""
        statement = self._statements.get(sql)
        if statement is None:
            statement = self._statements[sql] = _Statement()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        statement.waiting.append((args, future, key))
        if statement.in_flight < IN_FLIGHT:
            # Nothing of ``sql`` is on its way (or waiting: a group that ends sends those).
            statement.in_flight += 1
            self._go(sql, statement)
        return await future

    async def _one(self, sql: str, args: Sequence[Any]) -> R:
        """Run one statement alone."""
        raise NotImplementedError

    async def _many(self, sql: str, batch: Sequence[Sequence[Any]]) -> list[R]:
        """Run a group (two or more) in one round trip; one result per member, in order."""
        raise NotImplementedError

    def _again_alone(self, error: Exception) -> bool:
        """True when a group that failed with ``error`` is run again one member at a time."""
        raise NotImplementedError

    #: Whether the members of a failed group run again all at once (each on a connection of
    #: its own) rather than one after the other, in order: for statements whose order does
    #: not matter, so that a group that failed slowly (a statement timeout, a pool that had no
    #: connection free) does not take as long again for each member.
    _alone_at_once = False

    def _went(self, sql: str, statement: _Statement) -> None:
        """A group of ``sql`` ended: send the runs that waited for it, as one group."""
        if not statement.waiting:
            statement.in_flight -= 1
            if not statement.in_flight:
                del self._statements[sql]
            return
        self._go(sql, statement)

    def _go(self, sql: str, statement: _Statement) -> None:
        """Send the runs of ``sql`` waiting, as one group, once the event loop has run the
        callbacks ready now (their callers may add runs to it meanwhile)."""
        task = asyncio.get_running_loop().create_task(self._send(sql, statement))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, sql: str, statement: _Statement) -> None:
        group = statement.waiting[:MAX_GROUP]
        del statement.waiting[:MAX_GROUP]
        try:
            if len(group) == 1:
                await self._settle(group[0][1], sql, group[0][0])
                return
            # In the order of their keys, arrival order among equals. Every commit grouped
            # locks rows of its own Flow alone and is keyed by its Flow ID, so groups of any
            # statements that lock the same Flows take their locks in one order, and cannot
            # wait for each other (a Step move's group and an RPC commit's, say).
            group.sort(key=_key)
            try:
                results = await self._many(sql, [args for args, _, _ in group])
            except Exception as exc:
                if self._again_alone(exc):
                    if self._alone_at_once:
                        await asyncio.gather(
                            *(self._settle(future, sql, args) for args, future, _ in group)
                        )
                        return
                    for args, future, _ in group:
                        await self._settle(future, sql, args)
                    return
                for _, future, _ in group:
                    if not future.done():
                        future.set_exception(exc)
                return
            except BaseException as exc:
                for _, future, _ in group:
                    if not future.done():
                        future.set_exception(exc)
                raise
            for result, (_, future, _) in zip(results, group, strict=True):
                if not future.done():
                    future.set_result(result)
        finally:
            self._went(sql, statement)

    async def _settle(self, future: asyncio.Future[R], sql: str, args: Sequence[Any]) -> None:
        try:
            result = await self._one(sql, args)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)

    async def close(self) -> None:
        """Wait for the groups on their way."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


@lru_cache(maxsize=256)
def tagged(sql: str, parameters: int) -> str:
    """``sql``, a plain SELECT of ``parameters`` parameters, answering its member's place in a
    group (one more parameter) before its own columns, so that the rows of a group, which
    ``fetchmany`` answers as one list, split back by member."""
    return f"SELECT ${parameters + 1}::int4 AS {TAG}, r.* FROM ({sql}) AS r"


def _key(waiting: _Waiting) -> str:
    return waiting[2]


async def run_tagged(
    run_each: Callable[[str, Sequence[Sequence[Any]]], Awaitable[list[Any]]],
    sql: str,
    batch: Sequence[Sequence[Any]],
) -> list[list[Any]]:
    """Run ``sql`` once per member of ``batch`` with ``run_each`` (a StatementPool's
    ``commit_each`` or ``fetch_each``), :func:`tagged`; return each member's rows (asyncpg
    Records that answer the tag first), in ``batch``'s order."""
    records = await run_each(
        tagged(sql, len(batch[0])), [(*args, member) for member, args in enumerate(batch)]
    )
    out: list[list[Any]] = [[] for _ in batch]
    for record in records:
        out[record[0]].append(record)
    return out
