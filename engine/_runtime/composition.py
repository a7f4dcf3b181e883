"""Builds the engine from its parts, in one place.

Every component receives what it needs when it is built; nothing is wired afterwards except the
commit listener's subscription to the Notifier. A backend that runs several processes over one
database swaps the coordination parts (database, locks, Step queue, timers, notifier, Stream
store, blob store) here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine._runtime.attributes import Attributes
from engine._runtime.channels import ChannelCalls
from engine._runtime.committed_state import CommittedState
from engine._runtime.committer import Committer
from engine._runtime.flows import FlowQueries, RunWatchers
from engine._runtime.followers import CommitFollowers
from engine._runtime.locks import MemoryLockTable
from engine._runtime.matches import AttributeMatches
from engine._runtime.notifier import LocalNotifier
from engine._runtime.ports import BlobStore, Database, LockTable, StepQueue, TimerQueue
from engine._runtime.postgres.commits import PostgresCommitter
from engine._runtime.postgres.lease import new_process_id
from engine._runtime.postgres.lock_table import PostgresLockTable
from engine._runtime.postgres.parts import PostgresCoordination, postgres_coordination
from engine._runtime.recovery import recover
from engine._runtime.retention import Retention
from engine._runtime.rpcs import RPCExecutor
from engine._runtime.scheduler import Scheduler
from engine._runtime.schedules import Schedules
from engine._runtime.snapshots import Snapshots
from engine._runtime.sqlite.commits import SQLiteCommitter
from engine._runtime.starts import Starter
from engine._runtime.step_queue import MemoryStepQueue
from engine._runtime.time_travel import TimeTravel
from engine._runtime.timeouts import Timeouts
from engine._runtime.timers import ClockTimers
from engine._runtime.waits import ChannelWaits
from engine._runtime.workload import Workload
from engine._storage.blobs import FileBlobStore
from engine._storage.databases import DatabaseSettings, open_database
from engine._storage.outage import PostgresTimeouts
from engine._storage.postgres.database import PostgresDatabase
from engine._storage.sqlite.database import SQLiteDatabase
from engine._streams import StreamService, stream_store
from engine._streams.store_interface import StreamStore
from engine.clock import Clock
from engine.config import EngineConfig
from engine.registry import Registry

STEPS_DUE = "Steps due"
TIMERS_DUE = "timers due"
TRIMS = "Stream trims running"
STEP_WRITES = "Step Stream writes on their way"


@dataclass
class Services:
    """The running parts of one Engine."""

    registry: Registry
    clock: Clock
    database: Database
    blobs: BlobStore
    timers: TimerQueue
    locks: LockTable
    queue: StepQueue
    workload: Workload
    committer: Committer
    snapshots: Snapshots
    streams: StreamService
    scheduler: Scheduler
    timeouts: Timeouts
    waits: ChannelWaits
    matches: AttributeMatches
    flows: FlowQueries
    attributes: Attributes
    channels: ChannelCalls
    starter: Starter
    rpcs: RPCExecutor
    travel: TimeTravel
    schedules: Schedules
    retention: Retention | None
    followers: CommitFollowers
    coordination: PostgresCoordination | None = field(default=None)
    recovered_steps: int = 0

    async def start(self) -> None:
        """Open storage, resume every open run, and start running Steps and timers."""
        await self.database.open()
        try:
            if self.coordination is not None:
                await self.coordination.start(self.followers.on_remote)
            await self.streams.open()
        except BaseException:
            if self.coordination is not None:
                await self.coordination.stop()
            await self.database.close()
            raise
        self.timers.start()
        self.recovered_steps = await self._recover()
        self.scheduler.start()
        self.schedules.start()
        if self.coordination is not None:
            self.coordination.coordinator(self._sweep, self.timeouts, self.clock).start()
        if self.retention is not None:
            self.retention.start()
        self.clock.attach(self.workload)

    async def _recover(self) -> int:
        return await recover(
            database=self.database,
            registry=self.registry,
            locks=self.locks,
            scheduler=self.scheduler,
            timeouts=self.timeouts,
            waits=self.waits,
            claim=self.queue if self.coordination is not None else None,
        )

    async def _sweep(self) -> None:
        """Re-arm every open run's timeout and re-watch every durable wait (a process that was
        doing so died); Steps are claimed by the poll."""
        await recover(
            database=self.database,
            registry=self.registry,
            locks=self.locks,
            scheduler=self.scheduler,
            timeouts=self.timeouts,
            waits=self.waits,
            claim=None,
            steps=False,
        )

    async def close(self) -> None:
        """Stop running Steps and close storage; open runs resume on the next start."""
        self.clock.detach(self.workload)
        if self.coordination is not None:
            await self.coordination.stop_polling()
        await self.streams.close()  # waiting Stream readers return now
        await self.schedules.stop()
        await self.scheduler.close()
        await self.waits.close()
        await self.timeouts.close()
        await self.timers.stop()
        if self.retention is not None:
            await self.retention.stop()
        self.rpcs.close()
        if self.coordination is not None:
            await self.coordination.stop()  # after the attempts stopped: the others take over now
        await self.database.close()


def compose(registry: Registry, config: EngineConfig) -> Services:
    """Build the parts of an Engine: in-process coordination over SQLite, coordination
    through the database on PostgreSQL (where several processes may serve it)."""
    clock = config.clock
    workload = Workload()
    process_id = new_process_id()
    committed = CommittedState(config.state_cache_bytes)
    opened = _open_database(config, committed, process_id)
    database: Database = opened
    blobs = FileBlobStore(config.blob_dir)
    timers = ClockTimers(clock, on_fired=workload.touch)
    coordination = _postgres_coordination(opened, process_id, registry, timers, workload, config)
    locks: LockTable
    queue: StepQueue
    notifier: LocalNotifier
    if coordination is not None:
        locks, queue, notifier = coordination.locks, coordination.queue, coordination.notifier
    else:
        locks = MemoryLockTable()
        queue = MemoryStepQueue(timers, clock)
        notifier = LocalNotifier()
    committer = _committer(opened, notifier, workload, locks, config)
    # Only the database's one writer sees every commit: on PostgreSQL others commit too.
    snapshots = Snapshots(
        database,
        blobs,
        committed if coordination is None and config.state_cache_bytes > 0 else None,
        reuse=config.value_reuse,
    )
    store = stream_store(config.streams, clock, config.database_url, workload.touch)
    streams = StreamService(registry, config.streams, clock, store, workload.touch)
    starter = Starter(
        registry=registry,
        database=database,
        blobs=blobs,
        committer=committer,
        clock=clock,
        change_log=config.change_log,
    )
    scheduler = Scheduler(
        registry=registry,
        queue=queue,
        locks=locks,
        committer=committer,
        snapshots=snapshots,
        blobs=blobs,
        starter=starter,
        streams=streams,
        workload=workload,
        clock=clock,
        threads=config.step_threads,
        telemetry=config.telemetry,
    )
    timeouts = Timeouts(
        registry=registry,
        timers=timers,
        snapshots=snapshots,
        blobs=blobs,
        committer=committer,
        workload=workload,
        clock=clock,
    )
    waits = ChannelWaits(committer=committer, timers=timers, workload=workload, clock=clock)
    matches = AttributeMatches(registry, database, snapshots)
    watchers = RunWatchers()
    schedules = Schedules(
        registry=registry,
        database=database,
        committer=committer,
        starter=starter,
        timers=timers,
        workload=workload,
        clock=clock,
        telemetry=config.telemetry,
        # Other processes create and change Schedules too: look for theirs now and then.
        poll_seconds=config.poll_seconds if coordination is not None else None,
    )
    followers = CommitFollowers(
        scheduler=scheduler,
        matches=matches,
        watchers=watchers,
        timeouts=timeouts,
        waits=waits,
        schedules=schedules,
    )
    notifier.subscribe(followers.on_commit)
    _add_probes(workload, queue, timers, store, streams)
    retention = _retention(config, committer, blobs, timers, workload)
    flows = FlowQueries(
        registry=registry,
        database=database,
        committer=committer,
        watchers=watchers,
        clock=clock,
    )
    return Services(
        registry=registry,
        clock=clock,
        database=database,
        blobs=blobs,
        timers=timers,
        locks=locks,
        queue=queue,
        workload=workload,
        committer=committer,
        snapshots=snapshots,
        streams=streams,
        scheduler=scheduler,
        timeouts=timeouts,
        waits=waits,
        matches=matches,
        flows=flows,
        attributes=Attributes(
            registry=registry,
            database=database,
            snapshots=snapshots,
            blobs=blobs,
            locks=locks,
            committer=committer,
            clock=clock,
        ),
        channels=ChannelCalls(
            registry=registry,
            database=database,
            snapshots=snapshots,
            committer=committer,
            clock=clock,
        ),
        starter=starter,
        rpcs=RPCExecutor(
            registry=registry,
            database=database,
            snapshots=snapshots,
            blobs=blobs,
            locks=locks,
            committer=committer,
            clock=clock,
            threads=config.rpc_threads,
            default_timeout=config.default_rpc_timeout,
            all_transactional=config.transactional_rpcs,
            telemetry=config.telemetry,
        ),
        travel=TimeTravel(
            registry=registry, database=database, committer=committer, flows=flows, clock=clock
        ),
        schedules=schedules,
        retention=retention,
        followers=followers,
        coordination=coordination,
    )


def _committer(
    opened: SQLiteDatabase | PostgresDatabase,
    notifier: LocalNotifier,
    workload: Workload,
    locks: LockTable,
    config: EngineConfig,
) -> Committer:
    """Return the backend's Committer: through SQLite's one ordered writer, or PostgreSQL's
    one-statement commits and relays."""
    if isinstance(opened, PostgresDatabase):
        assert isinstance(locks, PostgresLockTable)
        return PostgresCommitter(
            opened, notifier, workload, locks, config.telemetry, relays=config.lock_handoffs
        )
    assert isinstance(locks, MemoryLockTable)
    return SQLiteCommitter(
        opened, notifier, workload, locks, config.telemetry, handoffs=config.lock_handoffs
    )


def _open_database(
    config: EngineConfig, committed: CommittedState, process_id: str
) -> SQLiteDatabase | PostgresDatabase:
    """Open the database ``config`` names, its commits reported to the committed-state copy
    and the telemetry."""
    return open_database(
        DatabaseSettings(
            url=config.database_url,
            sqlite_synchronous=config.sqlite_synchronous,
            max_batch=config.max_commit_batch,
            pool_size=config.database_pool_size,
            group_commits=config.group_commits,
            group_reads=config.group_reads,
            timeouts=PostgresTimeouts(
                connect=config.database_connect_timeout,
                pool=config.database_pool_timeout,
                statement=config.database_statement_timeout,
                lock=config.database_lock_timeout,
            ),
            on_batch=config.telemetry.commit_batch,
            on_committed=committed.committed,
            on_committing=committed.committing,
            on_settled=committed.settled,
            reads_on_loop=config.reads_on_loop,
            prepared_statements=config.prepared_statements,
        ),
        claimant=process_id,
    )


def _postgres_coordination(
    opened: SQLiteDatabase | PostgresDatabase,
    process_id: str,
    registry: Registry,
    timers: ClockTimers,
    workload: Workload,
    config: EngineConfig,
) -> PostgresCoordination | None:
    """Return the parts that coordinate several processes through a PostgreSQL database
    (locks, Step queue, notices, leases), or None on SQLite, where one process serves it."""
    if not isinstance(opened, PostgresDatabase):
        return None
    return postgres_coordination(
        database=opened,
        process_id=process_id,
        registry=registry,
        timers=timers,
        clock=config.clock,
        workload=workload,
        lease_seconds=config.lease_seconds,
        poll_seconds=config.poll_seconds,
    )


def _add_probes(
    workload: Workload,
    queue: StepQueue,
    timers: ClockTimers,
    store: StreamStore | None,
    streams: StreamService,
) -> None:
    """Tell ``workload`` how to name the work in hand (what ``settle`` waits for)."""
    workload.add_probe(lambda: f"{n} {STEPS_DUE}" if (n := queue.ready()) else None)
    workload.add_probe(lambda: TIMERS_DUE if timers.has_due() else None)
    if store is not None:
        workload.add_probe(lambda: f"{n} {TRIMS}" if (n := store.trims_running()) else None)
        workload.add_probe(
            lambda: f"{n} {STEP_WRITES}" if (n := streams.step_writes_pending()) else None
        )


def _retention(
    config: EngineConfig,
    committer: Committer,
    blobs: FileBlobStore,
    timers: ClockTimers,
    workload: Workload,
) -> Retention | None:
    """Return the purge of closed runs past ``config.retention``, or None when it is off."""
    if config.retention is None:
        return None
    return Retention(
        committer=committer,
        blobs=blobs,
        timers=timers,
        workload=workload,
        clock=config.clock,
        retention_seconds=config.retention.total_seconds(),
        interval_seconds=config.retention_check_interval.total_seconds(),
    )
