"""One-statement commits that arrive together go to PostgreSQL together, as one transaction.

Each of the engine's one-statement commits (``rpc_writes``, ``step_moves``, ``step_ends``,
``first_starts``) is its own transaction, and on PostgreSQL a transaction costs far more than
the statement in it: measured here, about 90 microseconds of the server's CPU for a small
write and its commit, against about 10 for the same write run among sixteen in one
transaction (and one round trip and one WAL flush instead of sixteen). So commits of the same
statement that arrive while earlier ones of it are on their way go together, as
``statement_groups`` says: in one transaction, since a pipeline behind one Sync is one. A
locked RPC's lock take (``rpc_loads``), which answers several rows, goes so too, wrapped to
answer its member's tag first.

A group commits all or nothing, so a group that fails (a deadlock, a statement error) is run
again one commit at a time, each its own transaction as before: one commit's failure fails
no other. A group whose connection was lost is not run again (its COMMIT may have reached
the server): every commit in it answers the outage, as a lone one does. Each statement answers
one row, so the rows map back to the commits in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from engine._storage.postgres.statement_groups import StatementGroups, run_tagged
from engine._storage.postgres.statement_pool import StatementPool


class CommitGroups(StatementGroups[list[Any]]):
    """Commits one-statement transactions of a StatementPool in groups (see the module)."""

    def __init__(self, pool: StatementPool) -> None:
        super().__init__(pool)
        #: The statements that may answer any number of rows (see :meth:`commit`).
        self._tagged: set[str] = set()

    async def commit(
        self, sql: str, args: Sequence[Any], *, rows: bool = False, flow_id: str = ""
    ) -> list[Any]:
        """Apply ``sql`` (answering one row) with ``args``, with the commits of the same
        statement it meets; return its rows once committed, as ``StatementPool.commit``.
        ``flow_id``: the Flow whose rows it locks, its place in a group (see
        ``statement_groups``).
        ``rows``: ``sql`` is a plain SELECT (of a function, say) that may answer any number
        of rows; in a group it is wrapped to answer its member's tag first, and each commit
        gets its own rows (asyncpg Records, read by name: they also carry the tag)."""
        if rows:
            self._tagged.add(sql)
        return await self._run(sql, args, flow_id)

    async def _one(self, sql: str, args: Sequence[Any]) -> list[Any]:
        return await self._pool.commit(sql, args)

    async def _many(self, sql: str, batch: Sequence[Sequence[Any]]) -> list[list[Any]]:
        if sql in self._tagged:
            return await run_tagged(self._pool.commit_each, sql, batch)
        rows = await self._pool.commit_each(sql, batch)
        assert len(rows) == len(batch), "each grouped statement answers one row"
        return [[row] for row in rows]

    def _again_alone(self, error: Exception) -> bool:
        # Rolled back as a whole: each on its own, so that one's error is its own.
        return isinstance(error, asyncpg.PostgresError)
