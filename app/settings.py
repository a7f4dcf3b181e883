"""Settings, read from ``DEXLITE_*`` environment variables.

The settings of the SQLite database, the PostgreSQL database, the Stream Store and the request
limits are groups: ``DEXLITE_<GROUP>__<FIELD>`` (``DEXLITE_STREAM__BACKEND``). The Stream Store
backend also answers to ``DEXLITE_STREAM_STORE_BACKEND``, the name dexlite's design fixes for it
(tests outside this repository set it; :class:`StreamStoreBackendSource`); where both are set,
``DEXLITE_STREAM__BACKEND`` wins.

A setting the engine has a default for takes its default from there (EngineConfig,
StreamStoreConfig, Limits), so each default is written once. A setting of an EngineConfig field
is declared with :func:`engine_setting`, naming the field, and :func:`engine_fields` passes such
settings on by those names; the Stream Store's and the limits' settings have their fields'
names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, PositiveInt
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

import engine
from app.limits import Limits
from engine.config import EngineConfig
from engine.stream import StreamStoreConfig

_ENGINE = EngineConfig()
_STREAM = StreamStoreConfig()
_LIMITS = Limits()
#: Where an engine setting keeps the name of its EngineConfig field: pydantic's free-form field
#: metadata, ``json_schema_extra``.
_ENGINE_FIELD = "engine_field"

StreamStoreBackend = Literal["memory", "postgres", "redis", "disabled"]


def engine_setting(name: str, **constraints: Any) -> Any:
    """Declare the setting of EngineConfig's field ``name``: its default is the engine's
    (validated, so a default the setting's ``constraints`` refuse fails at once)."""
    return Field(
        getattr(_ENGINE, name),
        validate_default=True,
        json_schema_extra={_ENGINE_FIELD: name},
        **constraints,
    )


def engine_fields(settings: BaseModel) -> dict[str, Any]:
    """Return the engine settings among ``settings``' fields (those of :func:`engine_setting`)
    as keyword arguments of EngineConfig."""
    found: dict[str, Any] = {}
    for name, info in type(settings).model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and _ENGINE_FIELD in extra:
            found[str(extra[_ENGINE_FIELD])] = getattr(settings, name)
    return found


def _days(span: timedelta | None) -> float:
    return 0.0 if span is None else span / timedelta(days=1)


class SQLiteSettings(BaseModel):
    """The SQLite database's settings (``DEXLITE_SQLITE__<NAME>``)."""

    synchronous: Literal["NORMAL", "FULL", "EXTRA"] = engine_setting(
        "sqlite_synchronous", description="SQLite synchronous mode; FULL survives power loss."
    )
    state_cache_bytes: int = engine_setting(
        "state_cache_bytes",
        ge=0,
        description="SQLite: bytes of running Flows' committed Attribute values kept in memory "
        "(current with every commit), so that snapshots of what it knows need no read; 0 "
        "keeps none.",
    )
    # The accelerations' off switches: each keeps every answer the same and only shows what
    # it buys (bench/accelerations.py measures them; docs/guides/benchmarks.md lists them).
    commit_batch: int = engine_setting(
        "max_commit_batch",
        ge=1,
        description="SQLite: most queued commit units the one writer commits in one "
        "transaction (group commit); 1 commits each alone.",
    )
    reads_on_loop: bool = engine_setting(
        "reads_on_loop",
        description="SQLite: short reads (a run, a snapshot) on the event loop's own "
        "connection; false sends every read to a reader thread.",
    )
    prepared_statements: bool = engine_setting(
        "prepared_statements",
        description="SQLite: hot statements compiled once and run on the driver's cursor; "
        "false runs them through SQLAlchemy.",
    )
    lock_handoffs: bool = engine_setting(
        "lock_handoffs",
        description="SQLite: an RPC's locks pass to the next holder as its commit is queued "
        "(it reads the handed-off writes; answers still wait for the commit); false holds them "
        "until the commit ended.",
    )
    value_reuse: bool = engine_setting(
        "value_reuse",
        description="Immutable values an RPC wrote go to the next holder of its locks as "
        "objects; false makes the next holder decode the stored text.",
    )


class PostgresSettings(BaseModel):
    """The PostgreSQL database's settings (``DEXLITE_POSTGRES__<NAME>``)."""

    pool_size: int = engine_setting(
        "database_pool_size",
        ge=1,
        description="PostgreSQL: the size of each of a process's two connection pools (commit "
        "units; one-statement transactions): up to twice this many connections per process.",
    )
    connect_timeout: float = engine_setting(
        "database_connect_timeout",
        gt=0,
        description="PostgreSQL: seconds to reach the server and log in before a request "
        "answers 503 UNAVAILABLE.",
    )
    pool_timeout: float = engine_setting(
        "database_pool_timeout",
        gt=0,
        description="PostgreSQL: seconds to wait for a free pooled connection before a request "
        "answers 503 UNAVAILABLE.",
    )
    statement_timeout: float = engine_setting(
        "database_statement_timeout",
        ge=0,
        description="PostgreSQL: seconds one statement may run (statement_timeout) before "
        "the request answers 503 UNAVAILABLE; 0 sets no limit.",
    )
    lock_timeout: float = engine_setting(
        "database_lock_timeout",
        ge=0,
        description="PostgreSQL: seconds one wait for a row or advisory lock may last "
        "(lock_timeout) before the request answers 503 UNAVAILABLE; 0 sets no limit.",
    )
    group_commits: bool = engine_setting(
        "group_commits",
        description="PostgreSQL: one-statement commits of the same kind that arrive while "
        "one of their kind is on its way go together, as one transaction; false sends "
        "each alone.",
    )
    group_reads: bool = engine_setting(
        "group_reads",
        description="PostgreSQL: snapshot reads of the same kind that arrive while one of "
        "their kind is on its way go together, in one round trip; false sends each alone.",
    )
    lease_seconds: float = engine_setting(
        "lease_seconds",
        gt=0,
        description="PostgreSQL: a process that stops renewing its lease for this long is "
        "dead; the others take over its Steps and free its locks.",
    )
    poll_seconds: float = engine_setting(
        "poll_seconds",
        gt=0,
        description="PostgreSQL: how often a process looks for dead processes' work.",
    )


class StreamSettings(BaseModel):
    """The Stream Store's settings (``DEXLITE_STREAM__<NAME>``): a StreamStoreConfig, and how
    long a Stream events response lasts."""

    # 'memory' Streams live in this process and vanish when it restarts; 'postgres' and
    # 'redis' are shared by every process serving the same data.
    backend: StreamStoreBackend = Field(
        cast(StreamStoreBackend, _STREAM.backend),  # a str there: validate_default checks it
        validate_default=True,
        description="'memory' keeps Stream messages in this process (lost on restart; one "
        "process); 'postgres' keeps them in UNLOGGED tables of the PostgreSQL database "
        "(postgres_url, else database_url) and 'redis' in Redis (redis_url), where every "
        "`dexlite serve` process sharing them reads and writes the same Streams; 'disabled' "
        "refuses client Stream writes and reads with FAILED_PRECONDITION and drops Step writes.",
    )
    redis_url: str = Field(_STREAM.redis_url, description="The Redis server of backend 'redis'.")
    postgres_url: str | None = Field(
        _STREAM.postgres_url,
        description="The PostgreSQL database (postgresql://... or postgresql+asyncpg://...) of "
        "backend 'postgres'; unset, the engine's database_url, which must then be a PostgreSQL "
        "URL.",
    )
    namespace: str = Field(
        _STREAM.namespace,
        description="Keeps apart the Streams of several deployments sharing one Redis or "
        "PostgreSQL database (a key prefix, a table column).",
    )
    default_capacity_bytes: int = Field(
        _STREAM.default_capacity_bytes,
        ge=1,
        description="Capacity of a Stream that declares no stream_capacity_bytes (8 MiB), "
        "shared by every Flow ID of its Flow type.",
    )
    max_capacity_bytes: int = Field(
        _STREAM.max_capacity_bytes,
        ge=1,
        description="Limit on one Stream's capacity (64 MiB); larger declarations are reduced.",
    )
    max_message_bytes: int = Field(
        _STREAM.max_message_bytes,
        ge=1,
        description="Limit on one message's serialized value (1 MiB).",
    )
    max_total_bytes: int = Field(
        _STREAM.max_total_bytes,
        ge=1,
        description="Memory of all Streams of this server (256 MiB); past it the oldest "
        "messages of the largest Streams are trimmed.",
    )
    message_overhead_bytes: int = Field(
        _STREAM.message_overhead_bytes,
        ge=0,
        description="Bytes added to each message's estimated size (96).",
    )
    trim_trigger_ratio: float = Field(
        _STREAM.trim_trigger_ratio,
        gt=0,
        le=1,
        description="Background trimming starts at this fraction of a Stream's capacity (0.9).",
    )
    trim_target_ratio: float = Field(
        _STREAM.trim_target_ratio,
        gt=0,
        lt=1,
        description="Trimming removes the oldest messages down to this fraction (0.7).",
    )
    trim_workers: int = Field(
        _STREAM.trim_workers,
        ge=1,
        description="Trim jobs running at once; one per Stream at a time (4).",
    )
    max_read_messages: int = Field(
        _STREAM.max_read_messages,
        ge=1,
        description="Largest pageSize of listStreamMessages (1000).",
    )
    events_max_seconds: float = Field(
        60.0,
        gt=0,
        description="A Stream events (SSE) response ends after this long (60 s); EventSource "
        "reconnects with Last-Event-ID and resumes where it stopped, and shutdown is not held "
        "up by open streams for longer than this.",
    )

    def to_config(self) -> StreamStoreConfig:
        """Return the StreamStoreConfig these settings describe."""
        return StreamStoreConfig(**self.model_dump(exclude={"events_max_seconds"}))


class LimitsSettings(BaseModel):
    """The request limits (``DEXLITE_LIMITS__<NAME>``); the API's own bounds can only be
    lowered."""

    max_request_bytes: int = Field(
        _LIMITS.max_request_bytes, ge=1024, description="Request bodies over this size get 413."
    )
    max_id_length: int = Field(
        _LIMITS.max_id_length,
        ge=1,
        le=256,
        description="Longest Flow ID or run ID a request may name.",
    )
    max_value_bytes: int = Field(
        _LIMITS.max_value_bytes,
        ge=1,
        description="Largest single value in a request, as JSON: a Flow or RPC input, an "
        "Attribute value, a Channel message.",
    )
    max_query_length: int = Field(
        _LIMITS.max_query_length,
        ge=1,
        le=4096,
        description="Longest SearchFlows query (at most 4096).",
    )
    max_query_depth: int = Field(
        _LIMITS.max_query_depth,
        ge=1,
        le=16,
        description="Deepest nesting of parentheses in a query (at most 16).",
    )
    max_names_per_read: int = Field(
        _LIMITS.max_names_per_read, ge=1, description="Most names one GetAttributes may ask for."
    )
    max_page_size: int = Field(
        _LIMITS.max_page_size,
        ge=1,
        le=engine.MAX_PAGE_SIZE,
        description="Largest pageSize of any listing (at most 1000).",
    )
    max_wait_seconds: float = Field(
        _LIMITS.max_wait_seconds,
        gt=0,
        le=engine.MAX_WAIT_SECONDS,
        description="Longest waitSeconds of any long poll (at most 60).",
    )

    def to_limits(self) -> Limits:
        """Return the Limits these settings describe."""
        return Limits(**self.model_dump())


#: The groups of settings: field of Settings -> its model.
GROUPS: dict[str, type[BaseModel]] = {
    "sqlite": SQLiteSettings,
    "postgres": PostgresSettings,
    "stream": StreamSettings,
    "limits": LimitsSettings,
}

#: The Stream Store backend's fixed name beside its grouped one, and the setting it sets.
STREAM_STORE_BACKEND = "DEXLITE_STREAM_STORE_BACKEND"
STREAM_STORE_BACKEND_FIELD = ("stream", "backend")


class StreamStoreBackendSource(PydanticBaseSettingsSource):
    """Reads ``DEXLITE_STREAM_STORE_BACKEND`` into the Stream Store's ``backend``.

    Place it after the environment's own source: ``DEXLITE_STREAM__BACKEND``, which that one
    reads, wins.
    """

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` reads its one variable, which is no field's name."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        # Regardless of case, as the environment's own source matches names.
        for name, value in os.environ.items():
            if name.upper() == STREAM_STORE_BACKEND:
                group, field = STREAM_STORE_BACKEND_FIELD
                return {group: {field: value}}
        return {}


class Settings(BaseSettings):
    """Server settings; every field can be set as ``DEXLITE_<NAME>``, every field of a group
    as ``DEXLITE_<GROUP>__<NAME>``, and the Stream Store backend as
    ``DEXLITE_STREAM_STORE_BACKEND`` too (:class:`StreamStoreBackendSource`)."""

    model_config = SettingsConfigDict(
        env_prefix="DEXLITE_", env_nested_delimiter="__", extra="ignore"
    )

    database_url: str = engine_setting(
        "database_url",
        description="SQLAlchemy URL: sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )
    blob_dir: str = engine_setting("blob_dir", description="Object storage for hard-delete values.")
    host: str = Field("127.0.0.1", description="Address `dexlite serve` binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port `dexlite serve` listens on.")
    api_token: str | None = Field(
        None, description="When set, /api, /patterns and /primitives need 'Authorization: Bearer'."
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
    step_threads: int = engine_setting(
        "step_threads", ge=1, description="Threads for `def` Step handlers."
    )
    rpc_threads: int = engine_setting(
        "rpc_threads", ge=1, description="Threads for `def` RPC handlers."
    )
    shutdown_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="`dexlite serve`: on SIGTERM, how long in-flight requests get to finish "
        "before open long polls are cut and the engine closes.",
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
        _days(_ENGINE.retention),
        ge=0,
        description="Closed runs are purged this many days after closing; 0 keeps them.",
    )
    default_rpc_timeout_seconds: float = Field(
        _ENGINE.default_rpc_timeout.total_seconds(),
        gt=0,
        description="How long an RPC handler may run when its @rpc names no timeout (the "
        "Dex's api.defaultRpcTimeout; no maximum). An RPC's own timeout wins.",
    )
    transactional_rpcs: bool = engine_setting(
        "transactional_rpcs",
        description="Run every RPC transactionally: each needs an active run (else 404 "
        "FLOW_NOT_ACTIVE_OR_NOT_FOUND) and commits even when it changed nothing.",
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
    change_log: bool = engine_setting(
        "change_log",
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
    sqlite: SQLiteSettings = Field(default_factory=SQLiteSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    stream: StreamSettings = Field(default_factory=StreamSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Read ``DEXLITE_STREAM_STORE_BACKEND`` too, below ``DEXLITE_STREAM__BACKEND``."""
        return (
            init_settings,
            env_settings,
            StreamStoreBackendSource(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    def updated(self, **changes: Any) -> Settings:
        """Return a copy with ``changes``, validated: a field by its name, a group by a dict
        of the fields it changes (its others are kept) or by a whole group's model.

        (``model_copy(update=...)`` validates nothing, and a dict would replace a whole group.)
        """
        values = self.model_dump()
        for name, value in changes.items():
            if name not in type(self).model_fields:
                raise TypeError(f"Settings has no field {name!r}")
            if name in GROUPS and isinstance(value, dict):
                value = {**values[name], **value}
            values[name] = value
        return type(self).model_validate(values)


def variable_of(location: tuple[int | str, ...], environ: Mapping[str, str] | None = None) -> str:
    """Return the environment variable of the setting at ``location`` (a ValidationError's
    ``loc``): ``DEXLITE_<NAME>``, or in a group ``DEXLITE_<GROUP>__<NAME>``; the Stream Store
    backend's is ``DEXLITE_STREAM_STORE_BACKEND`` when only that name is set (in ``environ``, by
    default the process's environment)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    if len(location) < 2 or location[0] not in GROUPS:
        return (prefix + str(location[0])).upper()
    grouped = f"{prefix}{location[0]}__{location[1]}".upper()
    if tuple(location[:2]) == STREAM_STORE_BACKEND_FIELD:
        names = {name.upper() for name in (os.environ if environ is None else environ)}
        if STREAM_STORE_BACKEND in names and grouped not in names:
            return STREAM_STORE_BACKEND
    return grouped
