"""Shared fixtures: a fresh database per test (SQLite, or PostgreSQL under
``DEXLITE_TEST_BACKEND=postgres``; see ``tests/support/backends``), engines and HTTP clients
over real apps."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI

import engine
from app.main import config_from_settings, create_app
from app.settings import PostgresSettings, Settings, SQLiteSettings
from tests.server import TEST_LEASE_SECONDS, TEST_POLL_SECONDS
from tests.support import backends
from tests.support.flow_clients import SIDES, ServeFlows, served_flows


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """Return the URL of a fresh database for this test, on the selected backend."""
    return backends.database_url_for(tmp_path)


@pytest.fixture(autouse=True)
def _drop_test_databases() -> Iterator[None]:
    """Drop the PostgreSQL databases the test created (its servers and engines are closed),
    on either backend: tests that run every implementation make them in the SQLite half too.

    A module-scoped fixture's database was made before this snapshot, so it stays.
    """
    before = backends.created_databases()
    yield
    backends.drop_databases(backends.created_databases() - before)


#: The modules that take longest (tens of seconds of one worker each, measured), handed out
#: first: each module goes to one worker whole, and a long one handed out last keeps its
#: worker busy after the others have finished. The other modules follow, those with the most
#: tests first (``make test`` runs xdist with ``--no-loadscope-reorder``, which keeps this order;
#: xdist's own order is by number of tests alone, and put these one-test modules last).
LONGEST_FIRST = (
    "tests/contract/test_schemathesis.py",
    "tests/tooling/test_tooling.py",
    "tests/patterns/test_hash_partitioned.py",
    "tests/patterns/test_sequentially_chunked.py",
    "tests/api/test_time_travel_processes.py",
    "tests/api/test_schedules_processes.py",
    "tests/contract/test_typescript_client.py",
    "tests/engine/test_flows.py",
    "tests/cli/test_streams_tail.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Let the commands the tests start stop on the Ctrl-C (SIGINT) some tests send them.

    A shell starts a background job (``make test &``, a CI step run that way) with SIGINT
    ignored, and an ignored signal stays ignored across exec: a ``dexlite`` command would then
    never see the test's SIGINT and wait out its long poll. A handler of our own (Python's
    usual one) is reset to the default at exec instead, as in a suite started from a terminal.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: The parametrized runs that add an HTTP hop to a test that also runs in process: the run of
#: ``serve_flows`` through ``app.client.Client`` and a pattern's run through a front end. What
#: the hop adds (the client, the server's routes, the front end) does not depend on the backend
#: and runs in the SQLite half; on PostgreSQL each such test runs in process, and tests/api
#: covers the server's routes on PostgreSQL.
HTTP_HOPS = {"serve_flows": "client", "make_client": "front-end"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the HTTP-hop runs (see HTTP_HOPS) in the SQLite half only, and order the modules
    for the workers (see LONGEST_FIRST)."""
    hop = backends.backend_independent("an HTTP hop over a test that also runs in process")
    for item in items:
        params = getattr(item, "callspec", None)
        chosen = params.params if params is not None else {}
        if any(chosen.get(name) == side for name, side in HTTP_HOPS.items()):
            item.add_marker(hop)
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    root = Path(str(config.rootpath))
    counts: dict[Path, int] = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1

    def order(item: pytest.Item) -> tuple[int, int, str]:
        try:
            name = item.path.resolve().relative_to(root).as_posix()
        except ValueError:
            name = str(item.path)
        return (rank.get(name, len(rank)), -counts[item.path], name)

    items.sort(key=order)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop what the run still holds on PostgreSQL: module servers' databases and the
    template."""
    backends.drop_databases(backends.created_databases(), template=True)


def pytest_report_header() -> str:
    """Name the backend the run uses, first thing in its output."""
    where = f" ({backends.SERVER})" if backends.ON_POSTGRES else ""
    return f"dexlite test backend: {backends.BACKEND}{where}"


@pytest.fixture
def engine_config(tmp_path: Path, db_url: str) -> engine.EngineConfig:
    """Return an EngineConfig on this test's database and blob directory."""
    # NORMAL keeps the suite fast; the crash tests use the FULL default of the server.
    return engine.EngineConfig(
        database_url=db_url,
        blob_dir=str(tmp_path / "blobs"),
        sqlite_synchronous="NORMAL",
        lease_seconds=TEST_LEASE_SECONDS,
        poll_seconds=TEST_POLL_SECONDS,
    )


@pytest.fixture(params=SIDES)
def serve_flows(
    request: pytest.FixtureRequest, engine_config: engine.EngineConfig, tmp_path: Path
) -> ServeFlows:
    """Return ``serve(flows)``, an async context manager yielding a FlowClient over ``flows``:
    the Engine in process, then (the test's second run) ``app.client.Client`` on a server
    process of the same Flows (see :mod:`tests.support.flow_clients`)."""
    side = request.param
    server_dir = tmp_path / "server"
    server_dir.mkdir()

    def serve(
        flows: list[engine.Flow[Any]],
    ) -> contextlib.AbstractAsyncContextManager[engine.FlowClient]:
        return served_flows(side, flows, engine_config, server_dir)

    return serve


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    """Return server Settings on this test's database."""
    return Settings(
        database_url=db_url,
        blob_dir=str(tmp_path / "blobs"),
        sqlite=SQLiteSettings(synchronous="NORMAL"),
        postgres=PostgresSettings(lease_seconds=TEST_LEASE_SECONDS, poll_seconds=TEST_POLL_SECONDS),
        # The suite starts hundreds of apps in one process: leave its collector alone
        # (tests/api/test_gc_tuning.py checks what the server does with it).
        gc_tuning=False,
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


@dataclasses.dataclass(frozen=True)
class ServedApp:
    """A started app and an HTTP client over it; ``engine`` is the app's Engine."""

    app: FastAPI
    client: httpx.AsyncClient

    @property
    def engine(self) -> engine.Engine:
        eng = self.app.state.engine
        assert isinstance(eng, engine.Engine), "the app is not started"
        return eng


@asynccontextmanager
async def served_app(
    settings: Settings,
    registry: engine.Registry | None = None,
    *,
    engine_config: engine.EngineConfig | None = None,
    routers: Sequence[APIRouter] = (),
) -> AsyncIterator[ServedApp]:
    """Yield a started app (lifespan included) with an HTTP client talking to it.

    ``routers`` are mounted too: a bundled example's routes over a Registry of test Flows.
    """
    app = create_app(settings, registry, engine_config=engine_config)
    for router in routers:
        app.include_router(router)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield ServedApp(app, client)


@asynccontextmanager
async def api_client(
    settings: Settings,
    registry: engine.Registry | None = None,
    *,
    engine_config: engine.EngineConfig | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """Yield an HTTP client talking to a started app (lifespan included)."""
    async with served_app(settings, registry, engine_config=engine_config) as served:
        yield served.client


@pytest.fixture
def make_client(settings: Settings) -> Callable[..., Any]:
    """Return a factory of HTTP clients over this test's database; keywords change settings
    (:meth:`Settings.updated`: a group by a dict, ``stream={"max_read_messages": 5}``)."""

    def factory(registry: engine.Registry | None = None, **overrides: Any) -> Any:
        chosen = settings.updated(**overrides) if overrides else settings
        return api_client(chosen, registry)

    return factory


@pytest.fixture
def make_app(settings: Settings) -> Callable[..., Any]:
    """Return a factory of started apps (:class:`ServedApp`) over this test's database.

    ``engine_config`` replaces the EngineConfig the settings describe (see
    :func:`manual_clock_config`); ``routers`` are mounted besides the app's own; other keywords
    change settings (:meth:`Settings.updated`).
    """

    def factory(
        registry: engine.Registry | None = None,
        *,
        engine_config: engine.EngineConfig | None = None,
        routers: Sequence[APIRouter] = (),
        **overrides: Any,
    ) -> Any:
        chosen = settings.updated(**overrides) if overrides else settings
        return served_app(chosen, registry, engine_config=engine_config, routers=routers)

    return factory


def manual_clock_config(settings: Settings) -> tuple[engine.EngineConfig, engine.ManualClock]:
    """Return the settings' EngineConfig on a fresh ManualClock, and the clock.

    Retention is off: its periodic check would be one more deadline to skip past.
    """
    clock = engine.ManualClock()
    config = dataclasses.replace(config_from_settings(settings), clock=clock, retention=None)
    return config, clock
