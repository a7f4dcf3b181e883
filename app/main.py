"""The FastAPI app factory."""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

import engine
from app import problems
from app.api_docs import install_api_docs
from app.client import Client
from app.errors import install_error_handlers
from app.fast_path import FastPath
from app.gc_tuning import tune_gc
from app.limits import check_parameters
from app.logs import RequestIDMiddleware, configure_logging
from app.metrics import HTTPMetricsMiddleware, Metrics
from app.middleware import BearerAuthMiddleware, BodyLimitMiddleware
from app.openapi import install_openapi
from app.routes import (
    channels,
    flows,
    front_end,
    meta,
    schedules,
    search,
    state,
    streams,
    travel,
)
from app.settings import Settings, engine_fields

PLAYGROUND_DIR = Path(__file__).resolve().parent.parent / "playground"
VERSION = "0.1.0"


def config_from_settings(settings: Settings) -> engine.EngineConfig:
    """Return the EngineConfig the settings describe: the engine settings (those declared with
    ``engine_setting``, top-level, SQLite and PostgreSQL) by their EngineConfig names, the Stream
    Store's as a StreamStoreConfig, and the two given in other units."""
    return engine.EngineConfig(
        retention=timedelta(days=settings.retention_days) if settings.retention_days else None,
        default_rpc_timeout=timedelta(seconds=settings.default_rpc_timeout_seconds),
        streams=settings.stream.to_config(),
        **engine_fields(settings),
        **engine_fields(settings.sqlite),
        **engine_fields(settings.postgres),
    )


class RegistryLoadError(ValueError):
    """DEXLITE_REGISTRY names nothing that gives an engine.Registry; the message says why."""


def load_registry(path: str) -> engine.Registry:
    """Import ``module:attribute`` and return the Registry it names (or that it returns).

    The current directory is searched first, as uvicorn and Python's own ``-m`` do, so a
    ``orders.py`` next to where the server starts is found without setting PYTHONPATH.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise RegistryLoadError(
            f"DEXLITE_REGISTRY={path!r} must look like 'module:attribute' (say 'orders:registry')"
        )
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (module_name == missing or module_name.startswith(missing + ".")):
            raise  # the module was found; something it imports was not (its traceback helps)
        raise RegistryLoadError(
            f"DEXLITE_REGISTRY={path!r}: no module named {exc.name!r} in the current directory "
            f"({here}) or the installed packages"
        ) from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise RegistryLoadError(
            f"DEXLITE_REGISTRY={path!r}: module {module_name!r} has no attribute {attribute!r}"
        )
    if callable(found) and not isinstance(found, engine.Registry):
        found = found()
    if not isinstance(found, engine.Registry):
        raise RegistryLoadError(
            f"DEXLITE_REGISTRY={path!r} gives a {type(found).__name__}, not an engine.Registry"
        )
    return found


def create_app(
    settings: Settings | None = None,
    registry: engine.Registry | None = None,
    *,
    engine_config: engine.EngineConfig | None = None,
) -> FastAPI:
    """Build the app. With no registry it serves the bundled examples and their routes; with a
    Registry it serves the engine API for exactly those Flows (and the playground).

    ``engine_config`` replaces the EngineConfig the settings describe, so tests can run the
    app on a ManualClock.
    """
    settings = settings or Settings()
    configure_logging(settings.log_format, settings.log_level)
    config = engine_config or config_from_settings(settings)
    metrics = Metrics()
    if type(config.telemetry) is engine.Telemetry:  # the caller chose no telemetry of its own
        config = dataclasses.replace(config, telemetry=metrics.telemetry)
    routers = []
    if registry is None and settings.registry:
        registry = load_registry(settings.registry)
    if registry is None:
        from patterns import bundled_flows, bundled_routers

        registry = engine.Registry(bundled_flows())
        routers = bundled_routers()
    chosen_registry = registry

    remote_url = settings.remote_url
    app = FastAPI(
        # dexlite reports through its own /metrics and logs; FastAPI's OpenTelemetry hooks would
        # look up the global providers on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        dependencies=[Depends(check_parameters)],
        title="dexlite",
        # Served offline by install_api_docs: FastAPI's pages load their scripts from a CDN.
        docs_url=None,
        redoc_url=None,
        version=VERSION,
        summary="A durable flow engine: Flows, Steps, Attributes, RPCs and locks over REST.",
        lifespan=_lifespan(settings, chosen_registry, config),
    )
    app.state.settings = settings
    app.state.engine = None
    app.state.client = None
    app.state.metrics = metrics
    app.state.limits = settings.limits.to_limits()
    install_error_handlers(app)
    if remote_url is None:
        for api in (flows, state, channels, streams, search, travel, schedules, meta):
            app.include_router(api.router)
    else:
        app.include_router(front_end.router)
    app.include_router(problems.router)
    for router in routers:
        app.include_router(router)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/playground/")

    if PLAYGROUND_DIR.is_dir():
        app.mount(
            "/playground", StaticFiles(directory=PLAYGROUND_DIR, html=True), name="playground"
        )

    install_openapi(app)
    install_api_docs(app, "dexlite")

    _add_middleware(app, settings, metrics)
    return app


def _lifespan(
    settings: Settings, chosen_registry: engine.Registry, config: engine.EngineConfig
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Return the app's lifespan: an Engine over ``chosen_registry`` for as long as the app
    runs, or, in a front end (``remote_url``), a Client of the dexlite server that runs it."""
    remote_url = settings.remote_url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if remote_url is not None:
            # A front-end process: the routes call the dexlite server that runs the Flows.
            async with Client(
                remote_url, registry=chosen_registry, token=settings.remote_token
            ) as client:
                app.state.client = client
                try:
                    yield
                finally:
                    app.state.client = None
            return
        eng = engine.Engine(chosen_registry, config)
        await eng.start()
        app.state.engine = eng
        app.state.client = eng
        restore_gc = tune_gc(settings.gc_thresholds if settings.gc_tuning else None)
        try:
            yield
        finally:
            restore_gc()
            app.state.engine = None
            app.state.client = None
            await eng.close()

    return lifespan


def _add_middleware(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    """Wrap the app in its middleware; the last added runs first on a request."""
    # Innermost: it stands in for FastAPI's routing, not for the middleware around it.
    app.add_middleware(FastPath, fastapi_app=app, enabled=settings.fast_path)
    app.add_middleware(BodyLimitMiddleware, limit=settings.limits.max_request_bytes)
    if settings.api_token:
        app.add_middleware(BearerAuthMiddleware, token=settings.api_token)
    # Outside the others (but CORS): every answer is timed and has an ID, a 401 included.
    app.add_middleware(HTTPMetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestIDMiddleware)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )
