"""One-statement commits that arrive together go to PostgreSQL together, as one transaction.

Each of the engine's one-statement commits (``rpc_writes``, ``step_moves``, ``step_ends``,
``first_starts``) is its own transaction, and on PostgreSQL a transaction costs far more than
the statement in it: measured here, about 90 microseconds of the server's CPU for a small
write and its commit, against about 10 for the same write run among sixteen in one
transaction (and one round trip and one WAL flush instead of sixteen). So commits of the same
statement that arrive while earlier ones of it are on their way wait for them and then go
together: the statement run once per commit, in arrival order, in one transaction and one
round trip (asyncpg's ``fetchmany``). A commit that arrives when fewer than ``IN_FLIGHT``
groups of its statement are on their way goes at once, alone, so an idle engine waits for
nothing.

A group commits all or nothing, so a group that fails (a deadlock, a statement error) is run
again one commit at a time, each its own transaction as before: one commit's failure fails
no other. A group whose connection was lost is not run again (its COMMIT may have reached
the server): every commit in it answers the outage, as a lone one does. Each statement answers
one row, so the rows map back to the commits in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from engine._storage.statement_pool import StatementPool

#: Groups of one statement on their way at once; commits past them wait to go together.
IN_FLIGHT = 2
#: The most commits in one group.
MAX_GROUP = 64

_Waiting = tuple[Sequence[Any], "asyncio.Future[list[Any]]"]


@dataclass
class _Statement:
    """One statement's commits: the groups on their way and the commits waiting."""

    in_flight: int = 0
    waiting: list[_Waiting] = field(default_factory=list)


class CommitGroups:
    """Commits one-statement transactions of a StatementPool in groups (see the module)."""

    def __init__(self, pool: StatementPool) -> None:
        self._pool = pool
        self._statements: dict[str, _Statement] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def commit(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """Apply ``sql`` (answering one row) with ``args``, with the commits of the same
        statement it meets; return its rows once committed, as ``StatementPool.commit``."""
        statement = self._statements.get(sql)
        if statement is None:
            statement = self._statements[sql] = _Statement()
        if statement.in_flight < IN_FLIGHT and not statement.waiting:
            statement.in_flight += 1
            try:
                return await self._pool.commit(sql, args)
            finally:
                self._went(sql, statement)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        statement.waiting.append((args, future))
        return await future

    def _went(self, sql: str, statement: _Statement) -> None:
        """A group of ``sql`` ended: send the commits that waited for it, as one group."""
        if not statement.waiting:
            statement.in_flight -= 1
            if not statement.in_flight:
                del self._statements[sql]
            return
        group = statement.waiting[:MAX_GROUP]
        del statement.waiting[:MAX_GROUP]
        task = asyncio.get_running_loop().create_task(self._send(sql, statement, group))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, sql: str, statement: _Statement, group: list[_Waiting]) -> None:
        try:
            if len(group) == 1:
                await _settle(group[0][1], self._pool.commit(sql, group[0][0]))
                return
            try:
                rows = await self._pool.commit_each(sql, [args for args, _ in group])
            except asyncpg.PostgresError:
                # Rolled back as a whole: each on its own, so that one's error is its own.
                for args, future in group:
                    await _settle(future, self._pool.commit(sql, args))
                return
            except BaseException as exc:
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                return
            assert len(rows) == len(group), "each grouped statement answers one row"
            for row, (_, future) in zip(rows, group, strict=True):
                if not future.done():
                    future.set_result([row])
        finally:
            self._went(sql, statement)

    async def close(self) -> None:
        """Wait for the groups on their way."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def _settle(future: asyncio.Future[list[Any]], commit: Any) -> None:
    try:
        rows = await commit
    except Exception as exc:
        if not future.done():
            future.set_exception(exc)
        return
    if not future.done():
        future.set_result(rows)
