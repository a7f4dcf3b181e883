"""Short reads that arrive together go to PostgreSQL together, in one round trip.

A Step's snapshot, read when each of many Steps in flight starts, is a short statement whose
round trip costs both sides more than its work: the client's ``send`` alone took 60-90
microseconds of CPU on this machine's loopback, the statement a few tens of the server's. So
reads of one statement that arrive while earlier ones are on their way go together, as
``statement_groups`` says. Each still reads the last committed state as of its own start
(READ COMMITTED takes a snapshot per statement, in a pipeline too), at or after the moment it
was asked for, so nothing a read returns is older than it would have been alone.

``fetchmany`` answers the rows of the whole group in one list, so the grouped statement is the
read wrapped to answer a tag first, the member's place in the group; the rows come back split
by it, without it, in the order the read gave them. A group that fails for any reason is run
again one read at a time, all at once: a read changes nothing, and each then answers for
itself (as an outage, say) in the time one read takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine._storage.postgres.statement_groups import StatementGroups, run_tagged

Rows = tuple[list[str], list[tuple[Any, ...]]]


class ReadGroups(StatementGroups[Rows]):
    """Runs short reads of a StatementPool in groups (see the module)."""

    async def fetch(self, sql: str, args: Sequence[Any]) -> Rows:
        """Run ``sql``, a read, with ``args``, with the reads of the same statement it meets;
        return the names of its columns and its rows."""
        return await self._run(sql, args)

    async def _one(self, sql: str, args: Sequence[Any]) -> Rows:
        records = await self._pool.fetch(sql, args)
        if not records:
            return [], []
        return list(records[0].keys()), [tuple(r) for r in records]

    async def _many(self, sql: str, batch: Sequence[Sequence[Any]]) -> list[Rows]:
        members = await run_tagged(self._pool.fetch_each, sql, batch)
        # Each without its tag.
        return [
            (list(records[0].keys())[1:], [tuple(r)[1:] for r in records]) if records else ([], [])
            for records in members
        ]

    def _again_alone(self, error: Exception) -> bool:
        return True

    _alone_at_once = True
