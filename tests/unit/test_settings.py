"""Server settings reach the EngineConfig, the Stream Store and the request limits: each by its
name, ``DEXLITE_<NAME>`` or in a group ``DEXLITE_<GROUP>__<NAME>`` (``DEXLITE_STREAM__BACKEND``),
and the Stream Store backend by ``DEXLITE_STREAM_STORE_BACKEND`` too, with the engine's
defaults. The flat names the grouped settings had before the groups set nothing."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from operator import attrgetter
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from app.limits import Limits
from app.main import config_from_settings
from app.settings import (
    GROUPS,
    PostgresSettings,
    Settings,
    SQLiteSettings,
    StreamSettings,
    engine_fields,
    variable_of,
)
from engine import EngineConfig, StreamStoreConfig

#: Every setting by its environment variable, a value other than its default, where the value
#: arrives (``config``: the EngineConfig, ``limits``: the Limits, ``settings``: the Settings)
#: and what arrives there.
NAMED: list[tuple[str, str, str, Any]] = [
    ("DATABASE_URL", "sqlite+aiosqlite:///o.db", "config.database_url", "sqlite+aiosqlite:///o.db"),
    ("BLOB_DIR", "/var/blobs", "config.blob_dir", "/var/blobs"),
    ("HOST", "0.0.0.0", "settings.host", "0.0.0.0"),
    ("PORT", "9001", "settings.port", 9001),
    ("API_TOKEN", "t0ken", "settings.api_token", "t0ken"),
    ("CORS_ORIGINS", '["https://a.example"]', "settings.cors_origins", ["https://a.example"]),
    ("REMOTE_URL", "http://engine:8000", "settings.remote_url", "http://engine:8000"),
    ("REMOTE_TOKEN", "r3mote", "settings.remote_token", "r3mote"),
    ("STEP_THREADS", "3", "config.step_threads", 3),
    ("RPC_THREADS", "4", "config.rpc_threads", 4),
    ("SHUTDOWN_TIMEOUT_SECONDS", "2.5", "settings.shutdown_timeout_seconds", 2.5),
    ("LOG_FORMAT", "json", "settings.log_format", "json"),
    ("LOG_LEVEL", "debug", "settings.log_level", "debug"),
    ("REGISTRY", "orders:registry", "settings.registry", "orders:registry"),
    ("RETENTION_DAYS", "2", "config.retention", timedelta(days=2)),
    ("DEFAULT_RPC_TIMEOUT_SECONDS", "86400", "config.default_rpc_timeout", timedelta(days=1)),
    ("TRANSACTIONAL_RPCS", "true", "config.transactional_rpcs", True),
    ("LOCK_RETRY_SECONDS", "0", "settings.lock_retry_seconds", 0.0),
    ("GC_TUNING", "false", "settings.gc_tuning", False),
    ("GC_THRESHOLDS", "[1000, 5, 6]", "settings.gc_thresholds", (1000, 5, 6)),
    ("CHANGE_LOG", "false", "config.change_log", False),
    ("FAST_PATH", "false", "settings.fast_path", False),
    ("SQLITE__SYNCHRONOUS", "EXTRA", "config.sqlite_synchronous", "EXTRA"),
    ("SQLITE__STATE_CACHE_BYTES", "0", "config.state_cache_bytes", 0),
    ("SQLITE__COMMIT_BATCH", "1", "config.max_commit_batch", 1),
    ("SQLITE__READS_ON_LOOP", "false", "config.reads_on_loop", False),
    ("SQLITE__PREPARED_STATEMENTS", "false", "config.prepared_statements", False),
    ("SQLITE__LOCK_HANDOFFS", "false", "config.lock_handoffs", False),
    ("SQLITE__VALUE_REUSE", "false", "config.value_reuse", False),
    ("POSTGRES__POOL_SIZE", "5", "config.database_pool_size", 5),
    ("POSTGRES__CONNECT_TIMEOUT", "1.5", "config.database_connect_timeout", 1.5),
    ("POSTGRES__POOL_TIMEOUT", "2.5", "config.database_pool_timeout", 2.5),
    ("POSTGRES__STATEMENT_TIMEOUT", "0", "config.database_statement_timeout", 0.0),
    ("POSTGRES__LOCK_TIMEOUT", "3", "config.database_lock_timeout", 3.0),
    ("POSTGRES__GROUP_COMMITS", "false", "config.group_commits", False),
    ("POSTGRES__GROUP_READS", "false", "config.group_reads", False),
    ("POSTGRES__LEASE_SECONDS", "5", "config.lease_seconds", 5.0),
    ("POSTGRES__POLL_SECONDS", "0.5", "config.poll_seconds", 0.5),
    ("STREAM__BACKEND", "redis", "config.streams.backend", "redis"),
    (
        "STREAM__REDIS_URL",
        "redis://cache:6380/2",
        "config.streams.redis_url",
        "redis://cache:6380/2",
    ),
    (
        "STREAM__POSTGRES_URL",
        "postgresql://db/s",
        "config.streams.postgres_url",
        "postgresql://db/s",
    ),
    ("STREAM__NAMESPACE", "tenant-a", "config.streams.namespace", "tenant-a"),
    ("STREAM__DEFAULT_CAPACITY_BYTES", "1000", "config.streams.default_capacity_bytes", 1000),
    ("STREAM__MAX_CAPACITY_BYTES", "2000", "config.streams.max_capacity_bytes", 2000),
    ("STREAM__MAX_MESSAGE_BYTES", "300", "config.streams.max_message_bytes", 300),
    ("STREAM__MAX_TOTAL_BYTES", "4000", "config.streams.max_total_bytes", 4000),
    ("STREAM__MESSAGE_OVERHEAD_BYTES", "0", "config.streams.message_overhead_bytes", 0),
    ("STREAM__TRIM_TRIGGER_RATIO", "0.95", "config.streams.trim_trigger_ratio", 0.95),
    ("STREAM__TRIM_TARGET_RATIO", "0.5", "config.streams.trim_target_ratio", 0.5),
    ("STREAM__TRIM_WORKERS", "2", "config.streams.trim_workers", 2),
    ("STREAM__MAX_READ_MESSAGES", "10", "config.streams.max_read_messages", 10),
    ("STREAM__EVENTS_MAX_SECONDS", "0.5", "settings.stream.events_max_seconds", 0.5),
    ("LIMITS__MAX_REQUEST_BYTES", "4096", "limits.max_request_bytes", 4096),
    ("LIMITS__MAX_ID_LENGTH", "64", "limits.max_id_length", 64),
    ("LIMITS__MAX_VALUE_BYTES", "2048", "limits.max_value_bytes", 2048),
    ("LIMITS__MAX_QUERY_LENGTH", "100", "limits.max_query_length", 100),
    ("LIMITS__MAX_QUERY_DEPTH", "3", "limits.max_query_depth", 3),
    ("LIMITS__MAX_NAMES_PER_READ", "7", "limits.max_names_per_read", 7),
    ("LIMITS__MAX_PAGE_SIZE", "50", "limits.max_page_size", 50),
    ("LIMITS__MAX_WAIT_SECONDS", "5", "limits.max_wait_seconds", 5.0),
]

#: Flat names that grouped settings had before the groups, each with a value it would set:
#: ``DEXLITE_POSTGRES__POOL_SIZE`` was ``DEXLITE_DATABASE_POOL_SIZE``, and so on. (``OFF`` is
#: no synchronous mode the setting takes: read, it would be refused.)
RETIRED: list[tuple[str, str]] = [
    ("DEXLITE_DATABASE_POOL_SIZE", "7"),
    ("DEXLITE_LEASE_SECONDS", "5"),
    ("DEXLITE_SQLITE_SYNCHRONOUS", "OFF"),
    ("DEXLITE_STATE_CACHE_BYTES", "0"),
    ("DEXLITE_STREAM_NAMESPACE", "tenant-a"),
    ("DEXLITE_STREAM_MAX_TOTAL_BYTES", "4000"),
    ("DEXLITE_MAX_PAGE_SIZE", "50"),
    ("DEXLITE_MAX_REQUEST_BYTES", "4096"),
]


@pytest.fixture(autouse=True)
def _no_dexlite_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start each test from no ``DEXLITE_*`` variables at all."""
    for name in list(os.environ):
        if name.upper().startswith("DEXLITE_"):
            monkeypatch.delenv(name)


def _arrived(settings: Settings, where: str) -> Any:
    """Return what ``settings`` put at ``where`` (see NAMED)."""
    places = SimpleNamespace(
        config=config_from_settings(settings), limits=settings.limits.to_limits(), settings=settings
    )
    return attrgetter(where)(places)


def test_the_table_names_every_setting() -> None:
    top_level = [name.upper() for name in Settings.model_fields if name not in GROUPS]
    grouped = [
        f"{group}__{field}".upper()
        for group, model in GROUPS.items()
        for field in model.model_fields
    ]
    assert sorted(name for name, *_ in NAMED) == sorted(top_level + grouped)


def test_every_database_setting_reaches_the_engine() -> None:
    for group in (SQLiteSettings, PostgresSettings):
        assert len(engine_fields(group())) == len(group.model_fields), group


@pytest.mark.parametrize(("name", "value", "where", "expected"), NAMED, ids=[c[0] for c in NAMED])
def test_every_setting_is_set_by_its_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, where: str, expected: Any
) -> None:
    before = _arrived(Settings(), where)
    assert before != expected  # the value is not the default
    monkeypatch.setenv(f"DEXLITE_{name}", value)
    assert _arrived(Settings(), where) == expected


def test_grouped_names_by_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEXLITE_STREAM__BACKEND", "redis")
    monkeypatch.setenv("DEXLITE_POSTGRES__POOL_SIZE", "3")
    monkeypatch.setenv("DEXLITE_SQLITE__SYNCHRONOUS", "NORMAL")
    monkeypatch.setenv("DEXLITE_LIMITS__MAX_PAGE_SIZE", "10")
    settings = Settings()
    config = config_from_settings(settings)
    assert (config.streams.backend, config.database_pool_size) == ("redis", 3)
    assert config.sqlite_synchronous == "NORMAL"
    assert settings.limits.to_limits().max_page_size == 10


@pytest.mark.parametrize(("variable", "value"), RETIRED, ids=[c[0] for c in RETIRED])
def test_a_flat_name_of_a_grouped_setting_sets_nothing(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    default = Settings()
    monkeypatch.setenv(variable, value)
    assert Settings() == default


def test_dexlite_database_pool_size_leaves_the_pool_size_at_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEXLITE_DATABASE_POOL_SIZE", "7")
    settings = Settings()
    assert settings.postgres.pool_size == 20
    assert config_from_settings(settings).database_pool_size == 20


@pytest.mark.parametrize(
    "variable", ["DEXLITE_STREAM_STORE_BACKEND", "dexlite_stream_store_backend"]
)
def test_the_stream_store_backend_is_set_by_its_fixed_name_too(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "redis")
    assert config_from_settings(Settings()).streams.backend == "redis"


def test_the_grouped_stream_store_backend_wins_over_its_fixed_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEXLITE_STREAM_STORE_BACKEND", "redis")
    monkeypatch.setenv("DEXLITE_STREAM__NAMESPACE", "tenant-a")  # the group's others still count
    assert (Settings().stream.backend, Settings().stream.namespace) == ("redis", "tenant-a")
    monkeypatch.setenv("DEXLITE_STREAM__BACKEND", "disabled")
    assert (Settings().stream.backend, Settings().stream.namespace) == ("disabled", "tenant-a")


def test_settings_given_in_python_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEXLITE_STREAM_STORE_BACKEND", "redis")
    monkeypatch.setenv("DEXLITE_POSTGRES__LEASE_SECONDS", "5")
    settings = Settings(stream=StreamSettings(backend="disabled"))
    assert (settings.stream.backend, settings.postgres.lease_seconds) == ("disabled", 5.0)


def test_the_defaults_are_the_engines() -> None:
    settings = Settings()
    config, default = config_from_settings(settings), EngineConfig()
    # The clock and telemetry are objects of their own, not settings.
    assert dataclasses.replace(config, clock=default.clock, telemetry=default.telemetry) == default
    assert config.streams == StreamStoreConfig()
    assert settings.limits.to_limits() == Limits()
    assert config.default_rpc_timeout == timedelta(seconds=60)
    assert config.transactional_rpcs is False
    assert (config.lease_seconds, config.poll_seconds, config.database_pool_size) == (15.0, 1.0, 20)


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("DEXLITE_DEFAULT_RPC_TIMEOUT_SECONDS", "0", "default_rpc_timeout_seconds"),
        ("DEXLITE_DEFAULT_RPC_TIMEOUT_SECONDS", "-1", "default_rpc_timeout_seconds"),
        ("DEXLITE_STREAM__TRIM_WORKERS", "0", "stream.trim_workers"),
        ("DEXLITE_STREAM__BACKEND", "mongo", "stream.backend"),
        ("DEXLITE_STREAM_STORE_BACKEND", "mongo", "stream.backend"),
        ("DEXLITE_SQLITE__SYNCHRONOUS", "OFF", "sqlite.synchronous"),
        ("DEXLITE_POSTGRES__LEASE_SECONDS", "0", "postgres.lease_seconds"),
        ("DEXLITE_POSTGRES__POOL_SIZE", "many", "postgres.pool_size"),
        ("DEXLITE_LIMITS__MAX_PAGE_SIZE", "1001", "limits.max_page_size"),
        ("DEXLITE_LIMITS__MAX_REQUEST_BYTES", "10", "limits.max_request_bytes"),
    ],
)
def test_a_bad_value_is_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")) as refused:
        Settings()
    assert isinstance(refused.value, ValidationError)
    # What `dexlite serve` names in its one line: the variable that was set.
    assert variable_of(refused.value.errors()[0]["loc"]) == variable


def test_a_variable_is_named_as_it_was_set() -> None:
    where = ("stream", "backend")
    assert variable_of(where, environ={}) == "DEXLITE_STREAM__BACKEND"
    fixed = {"DEXLITE_STREAM_STORE_BACKEND": "x"}
    assert variable_of(where, environ=fixed) == "DEXLITE_STREAM_STORE_BACKEND"
    both = {**fixed, "DEXLITE_STREAM__BACKEND": "y"}
    assert variable_of(where, environ=both) == "DEXLITE_STREAM__BACKEND"
    # A flat name of another grouped setting is no name of it.
    retired = {"DEXLITE_STREAM_NAMESPACE": "x"}
    assert variable_of(("stream", "namespace"), environ=retired) == "DEXLITE_STREAM__NAMESPACE"
    assert variable_of(("port",), environ={}) == "DEXLITE_PORT"
    assert variable_of(("stream",), environ={}) == "DEXLITE_STREAM"


def test_updated_validates_and_keeps_the_rest_of_a_group() -> None:
    settings = Settings(database_url="sqlite+aiosqlite:///a.db").updated(
        postgres={"lock_timeout": 0.5}, stream={"backend": "disabled"}, fast_path=False
    )
    assert settings.database_url == "sqlite+aiosqlite:///a.db"
    assert (settings.postgres.lock_timeout, settings.postgres.lease_seconds) == (0.5, 15.0)
    assert (settings.stream.backend, settings.fast_path) == ("disabled", False)
    with pytest.raises(ValueError, match=r"postgres\.pool_size"):
        settings.updated(postgres={"pool_size": 0})
    with pytest.raises(TypeError, match="stream_store_backend"):
        settings.updated(stream_store_backend="redis")
