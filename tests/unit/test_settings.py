"""Server settings reach the EngineConfig: the seed's RPC options and the shared-database ones."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.main import config_from_settings
from app.settings import Settings
from engine import EngineConfig


def test_the_defaults_are_the_engines() -> None:
    config, default = config_from_settings(Settings()), EngineConfig()
    assert config.default_rpc_timeout == default.default_rpc_timeout == timedelta(seconds=60)
    assert config.transactional_rpcs is default.transactional_rpcs is False
    assert (config.lease_seconds, config.poll_seconds) == (15.0, 1.0)
    assert config.database_pool_size == 20


def test_environment_variables_set_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEXLITE_DEFAULT_RPC_TIMEOUT_SECONDS", "86400")  # no maximum
    monkeypatch.setenv("DEXLITE_TRANSACTIONAL_RPCS", "true")
    monkeypatch.setenv("DEXLITE_LEASE_SECONDS", "5")
    config = config_from_settings(Settings())
    assert config.default_rpc_timeout == timedelta(days=1)
    assert config.transactional_rpcs is True
    assert config.lease_seconds == 5.0


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_non_positive_default_rpc_timeout_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("DEXLITE_DEFAULT_RPC_TIMEOUT_SECONDS", value)
    with pytest.raises(ValueError, match="default_rpc_timeout_seconds"):
        Settings()
