"""The periodic part of sharing a database: take over what dead processes left.

Every ``poll_seconds`` a process claims the due Steps of processes whose lease expired (and
any unclaimed ones), fires the Flow timeouts a poll overdue (indexed ``runs.timeout_at``),
grants again on the Flows where its Steps wait for locks (a holder may have died), and, once
it sees a dead process, re-arms the Flow timeouts and re-watches the
durable waits of every open run (what the dead process was timing and watching), then
forgets that process. Firing twice is harmless: every commit unit checks the state it
changes under the run's row lock, so a timeout or a wait commits once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy import Connection, delete, select

from engine._enums import RunStatus
from engine._runtime.postgres.claims import PostgresStepQueue
from engine._runtime.postgres.lease import SERVER_NOW
from engine._runtime.postgres.lock_table import PostgresLockTable
from engine._runtime.timeouts import Timeouts
from engine._storage import tables as t
from engine._storage.postgres.database import PostgresDatabase
from engine.clock import Clock, to_micros
from engine.errors import UnavailableError

log = logging.getLogger("dexlite.coordinator")

_p, _r = t.processes, t.runs


#: How many due Flow timeouts one poll fires at most.
TIMEOUT_BATCH = 64


class Coordinator:
    """Runs the takeover poll of one process."""

    def __init__(
        self,
        *,
        database: PostgresDatabase,
        queue: PostgresStepQueue,
        locks: PostgresLockTable,
        sweep: Callable[[], Awaitable[None]],
        timeouts: Timeouts,
        clock: Clock,
        poll_seconds: float,
        lease_seconds: float,
        process_id: str,
    ) -> None:
        self._me = process_id  # never its own row: a lapsed lease is renewed, not taken over
        self._database = database
        self._queue = queue
        self._locks = locks
        self._sweep = sweep
        self._timeouts = timeouts
        self._clock = clock
        self._poll = poll_seconds
        self._lease_us = int(lease_seconds * 1_000_000)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._outcomes_seen = 0

    def start(self) -> None:
        """Start polling."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="dexlite-poll")

    def wake(self) -> None:
        """Poll now (a notification said there may be work)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll)
            self._wake.clear()
            try:
                await self.poll_once()
            except UnavailableError as exc:  # the database may be restarting: poll again later
                log.warning("the takeover poll waits for the database: %s", exc)
            except Exception:
                log.exception("the takeover poll failed")

    async def poll_once(self) -> None:
        """Take over what dead processes left, once (and, after a commit of unknown outcome,
        what this process's own commit may have left)."""
        unknown = self._database.unknown_outcomes
        if unknown != self._outcomes_seen:
            await self._queue.adopt()
            self._outcomes_seen = unknown
        dead = await self._database.read(
            lambda conn: list(
                conn.execute(
                    select(_p.c.process_id).where(
                        _p.c.lease_expires_at <= SERVER_NOW, _p.c.process_id != self._me
                    )
                ).scalars()
            )
        )
        if dead:
            log.warning("processes %s stopped renewing their lease; taking over", dead)
            await self._sweep()
        await self._queue.poll()
        await self._due_timeouts()
        self._locks.regrant()
        if dead:

            def forget(conn: Connection) -> None:
                conn.execute(
                    delete(_p).where(_p.c.process_id.in_(dead), _p.c.lease_expires_at <= SERVER_NOW)
                )

            await self._database.write(forget)

    async def _due_timeouts(self) -> None:
        """Fire the Flow timeouts whose deadline passed a poll ago: whichever process armed
        one normally fires it on time; one still open then is fired here (the close commits
        once, whoever applies it)."""
        late = to_micros(self._clock.now()) - int(self._poll * 1_000_000)
        query = (
            select(_r.c.run_id, _r.c.flow_id, _r.c.flow_type)
            .where(_r.c.status == RunStatus.RUNNING, _r.c.timeout_at <= late)
            .order_by(_r.c.timeout_at)
            .limit(TIMEOUT_BATCH)
        )
        for row in await self._database.read(lambda conn: conn.execute(query).all()):
            self._timeouts.due(row.run_id, row.flow_id, row.flow_type)
