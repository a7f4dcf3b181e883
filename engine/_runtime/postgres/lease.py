"""A serving process's lease on a PostgreSQL database: its row in ``processes``, renewed while it
runs and deleted when it stops.

Times are the database server's clock (microseconds), so that machines with skewed clocks
agree on who is alive. A process is alive while ``lease_expires_at`` is ahead of the server's
clock; once it passes, its Step claims and RPC locks are free for the others to take over.
Stopping expires the row at once, so a clean shutdown hands everything over without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import Any

from sqlalchemy import BigInteger, Connection, insert, literal_column, select, update
from uuid6 import uuid7

from engine._runtime.ports import Database
from engine._storage import tables as t

log = logging.getLogger("dexlite.lease")

#: The database server's clock in epoch microseconds.
SERVER_NOW = literal_column(
    "(extract(epoch from clock_timestamp()) * 1000000)::bigint", BigInteger()
)
_p = t.processes


def live_processes() -> Any:
    """Return a SELECT of the IDs of the processes whose lease has not expired."""
    return select(_p.c.process_id).where(_p.c.lease_expires_at > SERVER_NOW)


def new_process_id() -> str:
    """Return a new ID for this process's engine: host, PID and a unique suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid7().hex[-12:]}"


class ProcessLease:
    """This process's lease: taken at start, renewed every third of its length."""

    def __init__(self, database: Database, process_id: str, lease_seconds: float) -> None:
        self.process_id = process_id
        self._database = database
        self._lease_us = int(lease_seconds * 1_000_000)
        self._interval = lease_seconds / 3
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Register this process and start renewing its lease."""

        await self._database.write(self._insert)
        self._task = asyncio.get_running_loop().create_task(self._renew(), name="dexlite-lease")

    def _insert(self, conn: Connection) -> None:
        conn.execute(
            insert(_p).values(
                process_id=self.process_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=SERVER_NOW,
                lease_expires_at=SERVER_NOW + self._lease_us,
            )
        )

    async def stop(self) -> None:
        """Stop renewing and end the lease now: this process's claims are free at once, and
        the next poll of another process re-arms the timeouts and waits this one watched
        (its row, expired, says so; that process then deletes it)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        statement = (
            update(_p)
            .where(_p.c.process_id == self.process_id)
            .values(lease_expires_at=SERVER_NOW - 1)
        )
        with contextlib.suppress(Exception):  # a database that is gone frees it by expiry
            await self._database.write(lambda conn: conn.execute(statement))

    async def _renew(self) -> None:
        statement = (
            update(_p)
            .where(_p.c.process_id == self.process_id)
            .values(lease_expires_at=SERVER_NOW + self._lease_us)
        )

        def renew(conn: Connection) -> None:
            if conn.execute(statement).rowcount == 0:
                # Another process found the lease lapsed and forgot it: take a new one (its
                # claims were free meanwhile; the fencing tokens refuse what that superseded).
                self._insert(conn)

        while True:
            await asyncio.sleep(self._interval)
            try:
                await self._database.write(renew)
            except Exception:  # keep trying: the lease lasts three intervals
                log.exception("could not renew the lease of process %s", self.process_id)
