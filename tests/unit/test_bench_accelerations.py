"""The bench's accelerations scenario turns each acceleration off by a setting that exists and
changes what it names: a misspelt variable would be ignored and the row would measure nothing."""

from __future__ import annotations

import dataclasses
import os

import pytest

from app.main import config_from_settings
from app.settings import Settings
from bench.accelerations import ACCELERATIONS


@pytest.mark.parametrize("name", sorted(ACCELERATIONS))
def test_each_acceleration_s_variable_changes_the_server_s_settings(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    for key in [k for k in os.environ if k.startswith("DEXLITE_")]:
        monkeypatch.delenv(key)
    default = Settings()
    env, _ = ACCELERATIONS[name]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    changed = Settings()
    assert changed != default
    if name not in ("fast_path", "gc_tuning"):  # the app's own; the rest reach the engine
        assert _engine_fields(changed) != _engine_fields(default)


def _engine_fields(settings: Settings) -> dict[str, object]:
    """The EngineConfig of ``settings``, without the clock and telemetry (new objects each)."""
    config = config_from_settings(settings)
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name not in ("clock", "telemetry")
    }
