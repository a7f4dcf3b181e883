"""Server settings reach the EngineConfig, the Stream Store and the request limits: by their
grouped names (``DEXLITE_STREAM__BACKEND``) and by every name the settings had before the groups
(``DEXLITE_STREAM_STORE_BACKEND``), with the engine's defaults."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from operator import attrgetter
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from app.flat_settings import FLAT_NAMES
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

#: Every setting as the old, flat Settings named it (``DEXLITE_<NAME>``), a value other than its
#: default, where the value arrives (``config``: the EngineConfig, ``limits``: the Limits,
#: ``settings``: the Settings) and what arrives there.
FLAT: list[tuple[str, str, str, Any]] = [
    ("database_url", "sqlite+aiosqlite:///o.db", "config.database_url", "sqlite+aiosqlite:///o.db"),
    ("blob_dir", "/var/blobs", "config.blob_dir", "/var/blobs"),
    ("host", "0.0.0.0", "settings.host", "0.0.0.0"),
    ("port", "9001", "settings.port", 9001),
    ("api_token", "t0ken", "settings.api_token", "t0ken"),
    ("cors_origins", '["https://a.example"]', "settings.cors_origins", ["https://a.example"]),
    ("remote_url", "http://engine:8000", "settings.remote_url", "http://engine:8000"),
    ("remote_token", "r3mote", "settings.remote_token", "r3mote"),
    ("sqlite_synchronous", "EXTRA", "config.sqlite_synchronous", "EXTRA"),
    ("step_threads", "3", "config.step_threads", 3),
    ("rpc_threads", "4", "config.rpc_threads", 4),
    ("shutdown_timeout_seconds", "2.5", "settings.shutdown_timeout_seconds", 2.5),
    ("max_request_bytes", "4096", "limits.max_request_bytes", 4096),
    ("max_id_length", "64", "limits.max_id_length", 64),
    ("max_value_bytes", "2048", "limits.max_value_bytes", 2048),
    ("max_query_length", "100", "limits.max_query_length", 100),
    ("max_query_depth", "3", "limits.max_query_depth", 3),
    ("max_names_per_read", "7", "limits.max_names_per_read", 7),
    ("max_page_size", "50", "limits.max_page_size", 50),
    ("max_wait_seconds", "5", "limits.max_wait_seconds", 5.0),
    ("log_format", "json", "settings.log_format", "json"),
    ("log_level", "debug", "settings.log_level", "debug"),
    ("registry", "orders:registry", "settings.registry", "orders:registry"),
    ("retention_days", "2", "config.retention", timedelta(days=2)),
    ("default_rpc_timeout_seconds", "86400", "config.default_rpc_timeout", timedelta(days=1)),
    ("transactional_rpcs", "true", "config.transactional_rpcs", True),
    ("database_pool_size", "5", "config.database_pool_size", 5),
    ("database_connect_timeout", "1.5", "config.database_connect_timeout", 1.5),
    ("database_pool_timeout", "2.5", "config.database_pool_timeout", 2.5),
    ("database_statement_timeout", "0", "config.database_statement_timeout", 0.0),
    ("database_lock_timeout", "3", "config.database_lock_timeout", 3.0),
    ("lease_seconds", "5", "config.lease_seconds", 5.0),
    ("poll_seconds", "0.5", "config.poll_seconds", 0.5),
    ("lock_retry_seconds", "0", "settings.lock_retry_seconds", 0.0),
    ("gc_tuning", "false", "settings.gc_tuning", False),
    ("gc_thresholds", "[1000, 5, 6]", "settings.gc_thresholds", (1000, 5, 6)),
    ("state_cache_bytes", "0", "config.state_cache_bytes", 0),
    ("change_log", "false", "config.change_log", False),
    ("fast_path", "false", "settings.fast_path", False),
    ("stream_store_backend", "redis", "config.streams.backend", "redis"),
    (
        "stream_redis_url",
        "redis://cache:6380/2",
        "config.streams.redis_url",
        "redis://cache:6380/2",
    ),
    (
        "stream_postgres_url",
        "postgresql://db/s",
        "config.streams.postgres_url",
        "postgresql://db/s",
    ),
    ("stream_namespace", "tenant-a", "config.streams.namespace", "tenant-a"),
    ("stream_default_capacity_bytes", "1000", "config.streams.default_capacity_bytes", 1000),
    ("stream_max_capacity_bytes", "2000", "config.streams.max_capacity_bytes", 2000),
    ("stream_max_message_bytes", "300", "config.streams.max_message_bytes", 300),
    ("stream_max_total_bytes", "4000", "config.streams.max_total_bytes", 4000),
    ("stream_message_overhead_bytes", "0", "config.streams.message_overhead_bytes", 0),
    ("stream_trim_trigger_ratio", "0.95", "config.streams.trim_trigger_ratio", 0.95),
    ("stream_trim_target_ratio", "0.5", "config.streams.trim_target_ratio", 0.5),
    ("stream_trim_workers", "2", "config.streams.trim_workers", 2),
    ("stream_max_read_messages", "10", "config.streams.max_read_messages", 10),
    ("stream_events_max_seconds", "0.5", "settings.stream.events_max_seconds", 0.5),
]
#: The grouped settings' flat names, for the grouped names of the same settings.
GROUPED = [case for case in FLAT if case[0] in FLAT_NAMES]


@pytest.fixture(autouse=True)
def _no_dexlite_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start each test from no ``DEXLITE_*`` variables at all."""
    for name in list(os.environ):
        if name.upper().startswith("DEXLITE_"):
            monkeypatch.delenv(name)


def _arrived(settings: Settings, where: str) -> Any:
    """Return what ``settings`` put at ``where`` (see FLAT)."""
    places = SimpleNamespace(
        config=config_from_settings(settings), limits=settings.limits.to_limits(), settings=settings
    )
    return attrgetter(where)(places)


def test_the_flat_names_are_every_setting_the_flat_settings_had() -> None:
    top_level = set(Settings.model_fields) - set(GROUPS)
    assert sorted(name for name, *_ in FLAT) == sorted(top_level | set(FLAT_NAMES))
    grouped = {(group, field) for group, model in GROUPS.items() for field in model.model_fields}
    assert set(FLAT_NAMES.values()) <= grouped
    assert len(set(FLAT_NAMES.values())) == len(FLAT_NAMES)  # one flat name per setting


def test_every_database_setting_reaches_the_engine() -> None:
    for group in (SQLiteSettings, PostgresSettings):
        assert len(engine_fields(group())) == len(group.model_fields), group


@pytest.mark.parametrize(("flat", "value", "where", "expected"), FLAT, ids=[c[0] for c in FLAT])
def test_every_flat_name_still_sets_its_setting(
    monkeypatch: pytest.MonkeyPatch, flat: str, value: str, where: str, expected: Any
) -> None:
    before = _arrived(Settings(), where)
    assert before != expected  # the value is not the default
    monkeypatch.setenv(f"DEXLITE_{flat.upper()}", value)
    assert _arrived(Settings(), where) == expected


@pytest.mark.parametrize(
    ("flat", "value", "where", "expected"), GROUPED, ids=[c[0] for c in GROUPED]
)
def test_every_grouped_name_sets_its_setting(
    monkeypatch: pytest.MonkeyPatch, flat: str, value: str, where: str, expected: Any
) -> None:
    group, field = FLAT_NAMES[flat]
    monkeypatch.setenv(f"DEXLITE_{group.upper()}__{field.upper()}", value)
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


def test_the_grouped_name_wins_over_the_flat_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEXLITE_STREAM_STORE_BACKEND", "redis")
    monkeypatch.setenv("DEXLITE_STREAM__BACKEND", "disabled")
    monkeypatch.setenv("DEXLITE_STREAM_NAMESPACE", "tenant-a")  # the group's others still count
    assert (Settings().stream.backend, Settings().stream.namespace) == ("disabled", "tenant-a")


def test_settings_given_in_python_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEXLITE_STREAM_STORE_BACKEND", "redis")
    monkeypatch.setenv("DEXLITE_LEASE_SECONDS", "5")
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
        ("DEXLITE_STREAM_TRIM_WORKERS", "0", "stream.trim_workers"),
        ("DEXLITE_STREAM_STORE_BACKEND", "mongo", "stream.backend"),
        ("DEXLITE_SQLITE_SYNCHRONOUS", "OFF", "sqlite.synchronous"),
        ("DEXLITE_POSTGRES__LEASE_SECONDS", "0", "postgres.lease_seconds"),
        ("DEXLITE_DATABASE_POOL_SIZE", "many", "postgres.pool_size"),
        ("DEXLITE_MAX_PAGE_SIZE", "1001", "limits.max_page_size"),
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
    flat = {"DEXLITE_STREAM_STORE_BACKEND": "x"}
    assert variable_of(where, environ=flat) == "DEXLITE_STREAM_STORE_BACKEND"
    both = {**flat, "DEXLITE_STREAM__BACKEND": "y"}
    assert variable_of(where, environ=both) == "DEXLITE_STREAM__BACKEND"
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
