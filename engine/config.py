"""Long-lived settings of an Engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from engine.clock import Clock
from engine.stream import StreamStoreConfig
from engine.telemetry import Telemetry


@dataclass(frozen=True)
class EngineConfig:
    """Long-lived settings of an Engine."""

    database_url: str = "sqlite+aiosqlite:///./data/dexlite.db"
    blob_dir: str = "./data/blobs"
    clock: Clock = field(default_factory=Clock)
    step_threads: int = 32
    rpc_threads: int = 32
    sqlite_synchronous: str = "FULL"
    max_commit_batch: int = 128
    streams: StreamStoreConfig = field(default_factory=StreamStoreConfig)
    #: Closed runs stay readable this long, then are purged; None keeps them forever.
    retention: timedelta | None = timedelta(days=30)
    retention_check_interval: timedelta = timedelta(hours=1)
    #: How long an RPC handler may run when its ``@rpc`` names no ``timeout`` (no maximum).
    default_rpc_timeout: timedelta = timedelta(seconds=60)
    #: Run every RPC transactionally: each then needs an active run and commits even when it
    #: changed nothing (as Dex's server option).
    transactional_rpcs: bool = False
    #: PostgreSQL: the size of each of a process's two connection pools (commit units, and
    #: statements that are their own transaction), opened as they are needed: up to twice
    #: this many connections per process. Past it a caller waits for a free connection (at
    #: most ``database_pool_timeout``).
    database_pool_size: int = 20
    #: PostgreSQL: seconds to wait for the server (a connect, a free pooled connection, one
    #: statement, one lock wait) before a call fails with UnavailableError; 0 turns the
    #: statement or lock limit off.
    database_connect_timeout: float = 5.0
    database_pool_timeout: float = 10.0
    database_statement_timeout: float = 30.0
    database_lock_timeout: float = 10.0
    #: PostgreSQL: one-statement commits of the same kind that arrive while one of their kind
    #: is on its way go together, as one transaction (``commit_groups``); False sends each
    #: alone.
    group_commits: bool = True
    #: PostgreSQL: snapshot reads of the same kind that arrive while one of their kind is on
    #: its way go together, in one round trip (``read_groups``); False sends each alone.
    group_reads: bool = True
    #: PostgreSQL: how long a process's claims and RPC locks outlive its last lease renewal.
    lease_seconds: float = 15.0
    #: PostgreSQL: how often a process looks for the work of processes that died.
    poll_seconds: float = 1.0
    #: Told of RPCs, Step attempts and commits as they happen (the server records metrics).
    telemetry: Telemetry = field(default_factory=Telemetry)
    #: SQLite: bytes of running Flows' committed Attribute values kept in memory, so that
    #: snapshots of what it knows need no read (kept current by the one writer); 0 keeps none.
    state_cache_bytes: int = 32 * 1024 * 1024
    #: Keep each run's change log (what time travel and as-of reads restore) for the Flow types
    #: that do not opt out (``Flow.keep_change_log``); False keeps none, for any run started.
    change_log: bool = True
    # The SQLite accelerations' off switches (docs/guides/benchmarks.md lists each one's
    # measured gain). Each keeps behaviour; off, it only shows what the acceleration buys.
    #: SQLite: short reads (a run, a snapshot) on the event loop's own connection; False sends
    #: every read to a reader thread.
    reads_on_loop: bool = True
    #: SQLite: hot statements compiled once and run on the driver's cursor; False runs them
    #: through SQLAlchemy's ``Connection.execute``.
    prepared_statements: bool = True
    #: SQLite: an RPC's locks pass to the next holder as its commit is queued (the next holder
    #: reads the handed-off writes); False releases them once the commit ended. PostgreSQL:
    #: the same for this process's next RPC on the keys (``multiprocess/relay``).
    lock_handoffs: bool = True
    #: Immutable values an invocation wrote go to the next holder of its locks as objects;
    #: False makes every reader decode the stored text.
    value_reuse: bool = True
