"""Shared fixtures: a fresh SQLite file per test, engines and HTTP clients over real apps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine
from app.main import create_app
from app.settings import Settings


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """Return the URL of a fresh SQLite database file for this test."""
    return f"sqlite+aiosqlite:///{tmp_path}/dexlite.db"


@pytest.fixture
def engine_config(tmp_path: Path, db_url: str) -> engine.EngineConfig:
    """Return an EngineConfig on this test's database and blob directory."""
    # NORMAL keeps the suite fast; the crash tests use the FULL default of the server.
    return engine.EngineConfig(
        database_url=db_url, blob_dir=str(tmp_path / "blobs"), sqlite_synchronous="NORMAL"
    )


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    """Return server Settings on this test's database."""
    return Settings(
        database_url=db_url, blob_dir=str(tmp_path / "blobs"), sqlite_synchronous="NORMAL"
    )


@asynccontextmanager
async def running_engine(
    flows: list[engine.Flow[Any]], config: engine.EngineConfig
) -> AsyncIterator[engine.Engine]:
    """Start an Engine over ``flows`` and close it afterwards."""
    eng = engine.Engine(engine.Registry(flows), config)
    await eng.start()
    try:
        yield eng
    finally:
        await eng.close()


@asynccontextmanager
async def api_client(
    settings: Settings, registry: engine.Registry | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """Yield an HTTP client talking to a started app (lifespan included)."""
    app = create_app(settings, registry)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture
def make_client(settings: Settings) -> Callable[..., Any]:
    """Return a factory of HTTP clients over this test's database."""

    def factory(registry: engine.Registry | None = None, **overrides: Any) -> Any:
        chosen = settings.model_copy(update=overrides) if overrides else settings
        return api_client(chosen, registry)

    return factory
