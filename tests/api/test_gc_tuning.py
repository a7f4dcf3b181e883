"""The server sets its garbage collector once the engine has started (``DEXLITE_GC_TUNING``,
``DEXLITE_GC_THRESHOLDS``, ``app/gc_tuning.py``) and puts it back when it shuts down."""

from __future__ import annotations

import gc

import pytest

from app.settings import Settings
from tests.conftest import served_app
from tests.support.backends import backend_independent

pytestmark = backend_independent("the collector's settings do not touch the database")


async def test_the_server_freezes_startup_and_sets_its_thresholds_until_it_stops(
    settings: Settings,
) -> None:
    before = gc.get_threshold()
    tuned = settings.model_copy(update={"gc_tuning": True, "gc_thresholds": (12_345, 11, 12)})
    async with served_app(tuned) as served:
        assert gc.get_threshold() == (12_345, 11, 12)
        assert gc.get_freeze_count() > 0  # what startup loaded is out of collections
        assert (await served.client.get("/healthz")).status_code == 200
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_without_gc_tuning_the_collector_is_left_alone(settings: Settings) -> None:
    before = gc.get_threshold()
    async with served_app(settings.model_copy(update={"gc_tuning": False})):
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0


def test_the_default_and_the_environment_spelling() -> None:
    assert Settings().gc_tuning is True
    assert Settings().gc_thresholds == (20_000, 50, 50)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DEXLITE_GC_THRESHOLDS", "[1000, 5, 5]")
        env.setenv("DEXLITE_GC_TUNING", "false")
        assert Settings().gc_thresholds == (1000, 5, 5)
        assert Settings().gc_tuning is False
        env.setenv("DEXLITE_GC_THRESHOLDS", "[0, 5, 5]")
        with pytest.raises(ValueError, match="greater than 0"):
            Settings()
