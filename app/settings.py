"""Settings, read from ``DEXLITE_*`` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.stream import DEFAULT_REDIS_URL


class Settings(BaseSettings):
    """Server settings; every field can be set as ``DEXLITE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="DEXLITE_", extra="ignore")

    database_url: str = Field(
        "sqlite+aiosqlite:///./data/dexlite.db",
        description="SQLAlchemy URL: sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )
    blob_dir: str = Field("./data/blobs", description="Object storage for hard-delete values.")
    host: str = Field("127.0.0.1", description="Address `dexlite serve` binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port `dexlite serve` listens on.")
    api_token: str | None = Field(
        None, description="When set, /api, /patterns and /primitives need 'Authorization: Bearer'."
    )
    max_request_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Request bodies over this size get 413."
    )
    cors_origins: list[str] = Field(default_factory=list, description="Allowed CORS origins.")
    remote_url: str | None = Field(
        None,
        description="A front-end process: serve the bundled examples' routes against the "
        "dexlite server at this URL (this process runs no engine and serves no /api/v1).",
    )
    remote_token: str | None = Field(
        None, description="The bearer token sent to the server of remote_url, if it needs one."
    )
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = Field(
        "FULL", description="SQLite synchronous mode; FULL survives power loss."
    )
    step_threads: int = Field(32, ge=1, description="Threads for `def` Step handlers.")
    rpc_threads: int = Field(32, ge=1, description="Threads for `def` RPC handlers.")
    shutdown_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="`dexlite serve`: on SIGTERM, how long in-flight requests get to finish "
        "before open long polls are cut and the engine closes.",
    )
    max_id_length: int = Field(
        256, ge=1, le=256, description="Longest Flow ID or run ID a request may name."
    )
    max_value_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Largest single value in a request, as JSON: a Flow or RPC input, an "
        "Attribute value, a Channel message.",
    )
    max_query_length: int = Field(
        4096, ge=1, le=4096, description="Longest SearchFlows query (at most 4096)."
    )
    max_query_depth: int = Field(
        16, ge=1, le=16, description="Deepest nesting of parentheses in a query (at most 16)."
    )
    max_names_per_read: int = Field(
        100, ge=1, description="Most names one GetAttributes may ask for."
    )
    max_page_size: int = Field(
        1000, ge=1, le=1000, description="Largest pageSize of any listing (at most 1000)."
    )
    max_wait_seconds: float = Field(
        60.0, gt=0, le=60, description="Longest waitSeconds of any long poll (at most 60)."
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="json: one JSON object per log line, with requestId, flowId and runId, "
        "and one dexlite.access line per request.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="The least severe log level written (json format)."
    )
    registry: str | None = Field(
        None,
        description="Serve this Registry ('module:attribute', a Registry or a function returning "
        "one) instead of the bundled examples.",
    )
    retention_days: float = Field(
        30.0, ge=0, description="Closed runs are purged this many days after closing; 0 keeps them."
    )
    default_rpc_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="How long an RPC handler may run when its @rpc names no timeout (the "
        "seed's api.defaultRpcTimeout; no maximum). An RPC's own timeout wins.",
    )
    transactional_rpcs: bool = Field(
        False,
        description="Run every RPC transactionally: each needs an active run (else 404 "
        "FLOW_NOT_ACTIVE_OR_NOT_FOUND) and commits even when it changed nothing.",
    )
    database_pool_size: int = Field(
        20, ge=1, description="PostgreSQL: connections each process keeps open."
    )
    database_connect_timeout: float = Field(
        5.0,
        gt=0,
        description="PostgreSQL: seconds to reach the server and log in before a request "
        "answers 503 UNAVAILABLE.",
    )
    database_pool_timeout: float = Field(
        10.0,
        gt=0,
        description="PostgreSQL: seconds to wait for a free pooled connection before a request "
        "answers 503 UNAVAILABLE.",
    )
    database_statement_timeout: float = Field(
        30.0,
        ge=0,
        description="PostgreSQL: seconds one statement may run (statement_timeout) before "
        "the request answers 503 UNAVAILABLE; 0 sets no limit.",
    )
    database_lock_timeout: float = Field(
        10.0,
        ge=0,
        description="PostgreSQL: seconds one wait for a row or advisory lock may last "
        "(lock_timeout) before the request answers 503 UNAVAILABLE; 0 sets no limit.",
    )
    lease_seconds: float = Field(
        15.0,
        gt=0,
        description="PostgreSQL: a process that stops renewing its lease for this long is "
        "dead; the others take over its Steps and free its locks.",
    )
    poll_seconds: float = Field(
        1.0, gt=0, description="PostgreSQL: how often a process looks for dead processes' work."
    )
    lock_retry_seconds: float = Field(
        10.0, ge=0, description="How long example routes retry an RPC lock conflict."
    )
    gc_tuning: bool = Field(
        True,
        description="Once the engine has started, freeze what startup loaded out of garbage "
        "collections (gc.freeze) and set the collector's thresholds to gc_thresholds; false "
        "leaves the collector as Python sets it. Each request allocates thousands of objects, "
        "and at Python's (700, 10, 10) the collections took a third of a register's time.",
    )
    gc_thresholds: tuple[PositiveInt, PositiveInt, PositiveInt] = Field(
        (20_000, 50, 50), description="The thresholds gc_tuning sets (gc.set_threshold)."
    )
    state_cache_bytes: int = Field(
        32 * 1024 * 1024,
        ge=0,
        description="SQLite: bytes of running Flows' committed Attribute values kept in memory "
        "(current with every commit), so that snapshots of what it knows need no read; 0 "
        "keeps none.",
    )
    change_log: bool = Field(
        True,
        description="Keep each run's change log (its Attribute writes and Channel messages by "
        "commit): what time travel and as-of reads restore. Flow types may opt out one by one "
        "(keep_change_log = False); false keeps none for any run started from now on.",
    )
    fast_path: bool = Field(
        True,
        description="Answer requests to routes with plain parameters and a JSON body without "
        "FastAPI's general per-request machinery (app/fast_path.py): the same answers, in less "
        "than half the time; false sends every request through FastAPI.",
    )
    # 'memory' Streams live in this process and vanish when it restarts; 'postgres' and
    # 'redis' are shared by every process serving the same data.
    stream_store_backend: Literal["memory", "postgres", "redis", "disabled"] = Field(
        "memory",
        description="'memory' keeps Stream messages in this process (lost on restart; one "
        "process); 'postgres' keeps them in UNLOGGED tables of the PostgreSQL database "
        "(stream_postgres_url, else database_url) and 'redis' in Redis (stream_redis_url), "
        "where every `dexlite serve` process sharing them reads and writes the same Streams; "
        "'disabled' refuses client Stream writes and reads with FAILED_PRECONDITION and drops "
        "Step writes.",
    )
    stream_redis_url: str = Field(
        DEFAULT_REDIS_URL, description="The Redis server of stream_store_backend 'redis'."
    )
    stream_postgres_url: str | None = Field(
        None,
        description="The PostgreSQL database (postgresql://... or postgresql+asyncpg://...) of "
        "stream_store_backend 'postgres'; unset, the engine's database_url, which must then be "
        "a PostgreSQL URL.",
    )
    stream_namespace: str = Field(
        "dexlite",
        description="Keeps apart the Streams of several deployments sharing one Redis or "
        "PostgreSQL database (a key prefix, a table column).",
    )
    stream_default_capacity_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1,
        description="Capacity of a Stream that declares no stream_capacity_bytes (8 MiB), "
        "shared by every Flow ID of its Flow type.",
    )
    stream_max_capacity_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1,
        description="Limit on one Stream's capacity (64 MiB); larger declarations are reduced.",
    )
    stream_max_message_bytes: int = Field(
        1024 * 1024, ge=1, description="Limit on one message's serialized value (1 MiB)."
    )
    stream_max_total_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1,
        description="Memory of all Streams of this server (256 MiB); past it the oldest "
        "messages of the largest Streams are trimmed.",
    )
    stream_message_overhead_bytes: int = Field(
        96, ge=0, description="Bytes added to each message's estimated size (96)."
    )
    stream_trim_trigger_ratio: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Background trimming starts at this fraction of a Stream's capacity (0.9).",
    )
    stream_trim_target_ratio: float = Field(
        0.7,
        gt=0,
        lt=1,
        description="Trimming removes the oldest messages down to this fraction (0.7).",
    )
    stream_trim_workers: int = Field(
        4, ge=1, description="Trim jobs running at once; one per Stream at a time (4)."
    )
    stream_max_read_messages: int = Field(
        1000, ge=1, description="Largest pageSize of listStreamMessages (1000)."
    )
    stream_events_max_seconds: float = Field(
        60.0,
        gt=0,
        description="A Stream events (SSE) response ends after this long (60 s); EventSource "
        "reconnects with Last-Event-ID and resumes where it stopped, and shutdown is not held "
        "up by open streams for longer than this.",
    )
