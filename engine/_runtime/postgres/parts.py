"""The coordination parts of a process on a PostgreSQL database, built and started together."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from engine._runtime.ports import TimerQueue
from engine._runtime.postgres.claims import PostgresStepQueue
from engine._runtime.postgres.coordinator import Coordinator
from engine._runtime.postgres.lease import ProcessLease
from engine._runtime.postgres.lock_rows import CHANNEL as LOCKS_CHANNEL
from engine._runtime.postgres.lock_table import PostgresLockTable
from engine._runtime.postgres.notify import PostgresNotifier, RemoteListener
from engine._runtime.timeouts import Timeouts
from engine._runtime.workload import Workload
from engine._storage.postgres.database import PostgresDatabase
from engine.clock import Clock
from engine.registry import Registry


@dataclass
class PostgresCoordination:
    """Lease, locks, Step claims, the notifier and the takeover poll of one process."""

    database: PostgresDatabase
    lease: ProcessLease
    locks: PostgresLockTable
    queue: PostgresStepQueue
    notifier: PostgresNotifier
    poll_seconds: float
    lease_seconds: float
    _coordinator: Coordinator | None = field(default=None)

    async def start(self, on_remote: RemoteListener) -> None:
        """Take the lease and listen (the database is open)."""
        await self.lease.start()
        self.notifier.subscribe_remote(on_remote)
        self.notifier.listen(LOCKS_CHANNEL, self.locks.regrant)
        try:
            await self.notifier.start()
        except BaseException:
            await self.lease.stop()
            raise

    def coordinator(
        self, sweep: Callable[[], Awaitable[None]], timeouts: Timeouts, clock: Clock
    ) -> Coordinator:
        """Build the takeover poll (recovery is done) and return it, to be started."""
        self._coordinator = Coordinator(
            database=self.database,
            queue=self.queue,
            locks=self.locks,
            sweep=sweep,
            timeouts=timeouts,
            clock=clock,
            poll_seconds=self.poll_seconds,
            lease_seconds=self.lease_seconds,
            process_id=self.lease.process_id,
        )
        return self._coordinator

    async def stop_polling(self) -> None:
        """Stop the takeover poll (first thing on close)."""
        if self._coordinator is not None:
            await self._coordinator.stop()

    async def stop(self) -> None:
        """Finish lock changes, stop listening and give the lease up."""
        await self.locks.close()
        await self.notifier.close()
        await self.lease.stop()


def postgres_coordination(
    *,
    database: PostgresDatabase,
    process_id: str,
    registry: Registry,
    timers: TimerQueue,
    clock: Clock,
    workload: Workload,
    lease_seconds: float,
    poll_seconds: float,
) -> PostgresCoordination:
    """Build the coordination parts of process ``process_id`` on ``database``."""
    lease = ProcessLease(database, process_id, lease_seconds)
    return PostgresCoordination(
        database=database,
        lease=lease,
        locks=PostgresLockTable(database, lease, workload),
        queue=PostgresStepQueue(
            database=database,
            lease=lease,
            timers=timers,
            clock=clock,
            workload=workload,
            flow_types=registry.flow_types,
            poll_seconds=poll_seconds,
        ),
        notifier=PostgresNotifier(process_id, database.dsn()),
        poll_seconds=poll_seconds,
        lease_seconds=lease_seconds,
    )
