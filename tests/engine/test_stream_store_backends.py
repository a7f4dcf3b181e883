"""One contract for every Stream Store (memory, postgres, redis), two processes on one shared
store, and choosing a store from the settings.

A second store instance on the same backing store stands for another ``dexlite serve``
process; the memory store is one process by design, so its "other process" is itself.

Isolation: a PostgreSQL store gets a fresh schema (in a database this run creates and drops)
and a Redis store a fresh key prefix whose keys are deleted afterwards. ``DEXLITE_TEST_STREAM_
STORE`` (comma-separated) narrows the stores the engine-level Stream tests run on. A server
that does not answer skips its tests, unless ``DEXLITE_REQUIRE_POSTGRES=1`` (CI) fails them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
import redis.asyncio as aioredis

from app.main import config_from_settings
from app.settings import Settings, StreamSettings
from engine import (
    Context,
    Engine,
    EngineConfig,
    FailedPreconditionError,
    Flow,
    InvalidArgumentError,
    ManualClock,
    Registry,
    ResourceExhaustedError,
    Step,
    StepDecision,
    StepList,
    Stream,
    StreamStoreConfig,
    graceful_complete,
)
from engine._streams import StreamService, stream_store
from engine._streams.factory import postgres_dsn
from engine._streams.store_interface import StoredStreamMessage, StreamStore
from tests.conftest import running_engine
from tests.support import backends
from tests.support.waiting import eventually

T = TypeVar("T")
STORES = ("memory", "postgres", "redis")
REDIS_URL = os.environ.get("DEXLITE_TEST_REDIS", "redis://127.0.0.1:6379/0")
OVERHEAD = 10
WAIT = 10.0

pytestmark = backends.backend_independent("Stream Stores keep nothing in the engine database")


def selected_stores() -> list[str]:
    """Return the stores the engine-level Stream tests run on (``DEXLITE_TEST_STREAM_STORE``).

    Redis does not depend on the engine's database, so it runs in the SQLite half only; in the
    PostgreSQL half the postgres store lives in the engine's own database, as it does when
    the Stream Store's ``postgres_url`` is unset.
    """
    chosen = os.environ.get("DEXLITE_TEST_STREAM_STORE", ",".join(STORES)).split(",")
    if unknown := set(chosen) - set(STORES):
        raise RuntimeError(f"DEXLITE_TEST_STREAM_STORE names unknown stores: {sorted(unknown)}")
    return [s for s in chosen if not (backends.ON_POSTGRES and s == "redis")]


@cache
def _redis_unreachable() -> str | None:
    async def probe() -> None:
        client = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
        try:
            await client.ping()
        finally:
            await client.aclose()

    try:
        backends.run_blocking(probe())
    except (OSError, aioredis.RedisError) as exc:
        return f"Redis is not reachable at {REDIS_URL}: {exc}"
    return None


def require(store: str) -> None:
    """Skip (or, under DEXLITE_REQUIRE_POSTGRES=1, fail) when the store's server is away."""
    reason = {"postgres": backends.server_reachable, "redis": _redis_unreachable}[store]()
    if reason is not None:
        if backends.REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)


_database: list[str] = []
_database_lock = threading.Lock()


def _session_database() -> str:
    """Return the asyncpg DSN of this run's database of Stream schemas, creating it once."""
    with _database_lock:
        if not _database:
            name = f"dexlite_streams_{uuid.uuid4().hex[:12]}"

            async def create() -> None:
                admin = await asyncpg.connect(backends.SERVER, timeout=5)
                try:
                    await admin.execute(f'CREATE DATABASE "{name}"')
                finally:
                    await admin.close()

            backends.run_blocking(create())
            _database.append(name)
    return backends.SERVER.rsplit("/", 1)[0] + "/" + _database[0]


def drop_stream_database() -> None:
    """Drop the run's database of Stream schemas, if it made one (at the end of the run)."""
    with _database_lock:
        if not _database:
            return
        name = _database.pop()

    async def drop() -> None:
        admin = await asyncpg.connect(backends.SERVER, timeout=5)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    backends.run_blocking(drop())


@pytest.fixture(scope="session", autouse=True)
def _stream_database() -> Iterator[None]:
    """Drop the run's database of Stream schemas when the run ends."""
    yield
    drop_stream_database()


@asynccontextmanager
async def store_config(store: str, database_url: str | None = None) -> AsyncIterator[Any]:
    """Yield the StreamStoreConfig of a fresh, isolated ``store``; clean it up afterwards.

    A postgres store uses ``database_url`` when it is a PostgreSQL database the test owns
    (the engine's), else a fresh schema of this run's Stream database.
    """
    namespace = f"t{uuid.uuid4().hex[:12]}"
    if store == "memory":
        yield StreamStoreConfig()
        return
    require(store)
    if store == "redis":
        try:
            yield StreamStoreConfig(backend="redis", redis_url=REDIS_URL, namespace=namespace)
        finally:
            client = aioredis.Redis.from_url(REDIS_URL)
            try:
                keys = [key async for key in client.scan_iter(match=f"{namespace}:*")]
                if keys:
                    await client.delete(*keys)
            finally:
                await client.aclose()
        return
    if database_url and database_url.startswith("postgresql"):
        yield StreamStoreConfig(backend="postgres", namespace=namespace)
        return
    dsn = _session_database()
    admin = await asyncpg.connect(dsn, timeout=5)
    try:
        await admin.execute(f'CREATE SCHEMA "{namespace}"')
        try:
            yield StreamStoreConfig(
                backend="postgres", postgres_url=f"{dsn}?search_path={namespace}"
            )
        finally:
            await admin.execute("SET lock_timeout = '10s'")
            await admin.execute(f'DROP SCHEMA "{namespace}" CASCADE')
    finally:
        await admin.close()


# -- the store-level contract -----------------------------------------------------------------


class Backing:
    """One backing store of a test and the store instances ("processes") opened on it."""

    def __init__(self, kind: str, config: StreamStoreConfig) -> None:
        self.kind = kind
        self.config = config
        self.clock = ManualClock()
        self.stores: list[StreamStore] = []

    @property
    def shared(self) -> bool:
        return self.kind != "memory"

    async def open(self, **settings: Any) -> Any:
        """Open another instance on the backing store, with ``settings`` on the config."""
        settings.setdefault("message_overhead_bytes", OVERHEAD)
        store = stream_store(dataclasses.replace(self.config, **settings), self.clock)
        assert store is not None
        await store.open()
        self.stores.append(store)
        return store

    async def peer(self, store: Any) -> Any:
        """Return another process on ``store``'s backing store (memory: the store itself)."""
        return await self.open(**_settings_of(store)) if self.shared else store

    async def lose_contents(self) -> None:
        """Empty the backing store behind the instances' backs (a crash, a flush)."""
        if self.kind == "redis":
            client = aioredis.Redis.from_url(self.config.redis_url)
            try:
                keys = [k async for k in client.scan_iter(match=f"{self.config.namespace}:*")]
                await client.delete(*keys)
            finally:
                await client.aclose()
        else:  # what PostgreSQL does to UNLOGGED tables when it restarts after a crash
            assert self.config.postgres_url is not None
            conn = await asyncpg.connect(self.config.postgres_url)
            try:
                await conn.execute("TRUNCATE stream_messages, stream_state")
            finally:
                await conn.close()

    async def kill_listener(self, store: Any) -> None:
        """End ``store``'s listening connection from the server side (a restart, a proxy)."""
        if self.kind == "redis":
            client = aioredis.Redis.from_url(self.config.redis_url, decode_responses=True)
            try:
                mine = [
                    c["id"]
                    for c in await client.client_list(_type="pubsub")
                    if c["name"] == f"dexlite-streams-{store.origin}"
                ]
                assert len(mine) == 1, mine
                await client.execute_command("CLIENT", "KILL", "ID", mine[0])
            finally:
                await client.aclose()
        else:
            assert self.config.postgres_url is not None
            conn = await asyncpg.connect(self.config.postgres_url)
            try:
                pid = store._listener.get_server_pid()
                assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
            finally:
                await conn.close()


def _settings_of(store: Any) -> dict[str, Any]:
    return {f.name: getattr(store.config, f.name) for f in dataclasses.fields(StreamStoreConfig)}


@pytest.fixture(params=STORES)
async def backing(request: pytest.FixtureRequest) -> AsyncIterator[Backing]:
    """Yield an isolated backing store of each kind; close every instance afterwards."""
    async with store_config(request.param) as config:
        backing = Backing(request.param, config)
        try:
            yield backing
        finally:
            for store in backing.stores:
                await store.close()


def text_of(size: int, flow_id: str = "f", source: str = "s") -> str:
    """Return a JSON string value whose message is estimated at exactly ``size`` bytes."""
    return '"' + "x" * (size - 2 - len(flow_id) - len(source) - OVERHEAD) + '"'


async def add(store: Any, text: str, flow_id: str = "f", name: str = "progress", **kw: Any) -> Any:
    capacity = kw.pop("capacity", 100_000)
    return await store.append(kw.pop("flow_type", "News"), name, capacity, flow_id, "s", text)


async def trimmed(store: Any) -> None:
    await eventually(lambda: store.trims_running() == 0, what="trimming to end")


def seqs(messages: list[StoredStreamMessage]) -> list[int]:
    return [m.seq for m in messages]


async def test_one_sequence_per_flow_type_and_stream_shared_by_its_flow_ids(
    backing: Backing,
) -> None:
    store = await backing.open()
    other = await backing.peer(store)
    assert [(await add(s, '"a"', f)).seq for s, f in [(store, "f1"), (other, "f2")]] == [1, 2]
    assert (await add(store, '"b"', "f1")).seq == 3
    assert (await add(other, '"c"', "f1", name="other")).seq == 1
    assert (await add(store, '"d"', "f1", flow_type="Sports")).seq == 1
    first = await other.next_after("News", "progress", "f1", 0, 0)
    assert (first.seq, first.flow_id, first.text, first.source) == (1, "f1", '"a"', "s")
    assert first.created_at == backing.clock.now() and first.size == 3 + 2 + 1 + OVERHEAD
    assert (await store.next_after("News", "progress", "f1", 1, 0)).seq == 3
    assert await store.next_after("News", "progress", "f1", 3, 0) is None
    assert await store.next_after("News", "progress", "nobody", 0, 0) is None


async def test_a_waiting_reader_wakes_when_another_process_appends(backing: Backing) -> None:
    store = await backing.open()
    other = await backing.peer(store)
    reader = asyncio.create_task(store.next_after("News", "progress", "f", 0, 30))
    await eventually(lambda: store.readers_waiting() == 1, what="the reader to wait")
    await add(other, '"theirs"', "someone else")
    await add(other, '"news"')
    found = await asyncio.wait_for(reader, WAIT)
    assert found.text == '"news"'
    assert store.readers_waiting() == 0


async def test_a_reader_whose_wake_up_was_lost_still_reads_at_its_deadline(
    backing: Backing,
) -> None:
    if not backing.shared:
        pytest.skip("the memory store has no notifications to lose")
    store = await backing.open()
    other = await backing.peer(store)
    real = other._notification
    other._notification = lambda ft, name, _flow_id: real(ft, name, "nobody")
    loop = asyncio.get_running_loop()
    started = loop.time()
    reader = asyncio.create_task(store.next_after("News", "progress", "f", 0, 0.5))
    await eventually(lambda: store.readers_waiting() == 1, what="the reader to wait")
    await add(other, '"unannounced"')
    found = await asyncio.wait_for(reader, WAIT)
    assert loop.time() - started >= 0.5  # no wake-up came: it waited out its time...
    assert found is not None and found.text == '"unannounced"'  # ...and read once more


async def test_a_lost_listening_connection_comes_back_and_wakes_its_readers(
    backing: Backing,
) -> None:
    if not backing.shared:
        pytest.skip("the memory store listens to nothing")
    store = await backing.open()
    other = await backing.peer(store)
    reader = asyncio.create_task(store.next_after("News", "progress", "f", 0, 30))
    await eventually(lambda: store.readers_waiting() == 1, what="the reader to wait")
    await backing.kill_listener(store)
    await add(other, '"while deaf"')  # its notification may reach nobody...
    found = await asyncio.wait_for(reader, WAIT)  # ...the reconnection wakes the reader
    assert found.text == '"while deaf"'
    await eventually(lambda: store.listener_reconnects == 1, what="the listener to return")
    reader = asyncio.create_task(store.next_after("News", "progress", "f", found.seq, 30))
    await eventually(lambda: store.readers_waiting() == 1, what="the reader to wait")
    await add(other, '"heard again"')
    assert (await asyncio.wait_for(reader, WAIT)).text == '"heard again"'


async def test_a_wait_ends_empty_when_only_other_flow_ids_were_written(backing: Backing) -> None:
    store = await backing.open()
    reader = asyncio.create_task(store.next_after("News", "progress", "mine", 0, 0.3))
    await eventually(lambda: store.readers_waiting() == 1, what="the reader to wait")
    await add(await backing.peer(store), '"theirs"', "other")
    assert await asyncio.wait_for(reader, WAIT) is None
    assert store.readers_waiting() == 0


async def test_pages_are_newest_first_and_say_whether_older_messages_remain(
    backing: Backing,
) -> None:
    store = await backing.open()
    for i in range(5):
        await add(store, f'"m{i}"')
        await add(store, '"elsewhere"', "g")
    page, more = await store.page("News", "progress", "f", None, 2)
    assert ([m.text for m in page], more) == (['"m4"', '"m3"'], True)
    page, more = await store.page("News", "progress", "f", page[-1].seq, 2)
    assert ([m.text for m in page], more) == (['"m2"', '"m1"'], True)
    page, more = await store.page("News", "progress", "f", page[-1].seq, 2)
    assert ([m.text for m in page], more) == (['"m0"'], False)
    page, more = await store.page("News", "progress", "f", None, 5)
    assert (seqs(page), more) == ([9, 7, 5, 3, 1], False)
    assert await store.page("News", "progress", "f", 1, 5) == ([], False)
    assert await store.page("News", "progress", "nobody", None, 5) == ([], False)


async def test_stats_count_estimated_sizes_and_messages(backing: Backing) -> None:
    store = await backing.open()
    assert await store.stats("News", "progress") == {
        "usage": 0,
        "messages": 0,
        "trimming": False,
        "capacity": None,
    }
    await add(store, '"hello"', "flow-1", capacity=5000)
    await add(store, '"hi"', "f", capacity=5000)
    stats = await (await backing.peer(store)).stats("News", "progress")
    usage = (7 + 6 + 1 + OVERHEAD) + (4 + 1 + 1 + OVERHEAD)
    assert stats == {"usage": usage, "messages": 2, "trimming": False, "capacity": 5000}


async def test_trimming_starts_at_the_trigger_and_removes_the_oldest_down_to_the_target(
    backing: Backing,
) -> None:
    store = await backing.open()
    for i in range(8):  # 100 bytes each, capacity 1000: trigger 900, target 700
        await add(store, text_of(100, f"f{i % 3}"), f"f{i % 3}", capacity=1000)
    assert (await store.stats("News", "progress"))["usage"] == 800
    assert store.trims_running() == 0
    await add(store, text_of(100, "f0"), "f0", capacity=1000)  # 900: the trigger
    assert (await store.stats("News", "progress"))["trimming"]
    await trimmed(store)
    stats = await store.stats("News", "progress")
    assert (stats["usage"], stats["messages"], stats["trimming"]) == (700, 7, False)
    # The two oldest went, across Flow IDs: seq 1 (f0) and 2 (f1).
    assert (await store.next_after("News", "progress", "f0", 0, 0)).seq == 4
    assert (await store.next_after("News", "progress", "f1", 0, 0)).seq == 5
    assert (await store.next_after("News", "progress", "f2", 0, 0)).seq == 3


async def test_an_append_past_capacity_is_refused_until_trimming_made_room(
    backing: Backing,
) -> None:
    store = await backing.open()
    other = await backing.peer(store)
    await add(store, text_of(800), capacity=1000)
    await add(store, text_of(50), capacity=1000)
    with pytest.raises(ResourceExhaustedError, match="capacity") as refused:
        await add(other, text_of(300), capacity=1000)
    assert refused.value.retryable is True
    await trimmed(other)  # the refusal asked the refusing process to make room
    assert (await add(other, text_of(300), capacity=1000)).seq == 3
    page, _ = await store.page("News", "progress", "f", None, 10)
    assert seqs(page) == [3, 2]


async def test_a_message_that_can_never_fit_is_refused_for_good(backing: Backing) -> None:
    store = await backing.open(max_message_bytes=2000, max_total_bytes=1500)
    await add(store, '"keep"', capacity=1000)
    for text, capacity, match in [
        ('"' + "x" * 1999 + '"', 100_000, "at most 2000 bytes per message"),
        (text_of(1001), 1000, "never fit"),  # over the Stream's capacity
        (text_of(1501), 100_000, "never fit"),  # over the whole store's
    ]:
        with pytest.raises(ResourceExhaustedError, match=match) as refused:
            await add(store, text, capacity=capacity)
        assert refused.value.retryable is False
    assert store.trims_running() == 0
    assert seqs((await store.page("News", "progress", "f", None, 10))[0]) == [1]


async def test_a_nul_in_a_source_is_refused_only_by_postgres_which_cannot_store_it(
    backing: Backing,
) -> None:
    store = await backing.open()
    if backing.kind != "postgres":
        assert (await store.append("News", "progress", 1000, "f", "a\x00b", '"x"')).seq == 1
        return
    with pytest.raises(InvalidArgumentError, match="NUL") as refused:  # text cannot hold it
        await store.append("News", "progress", 1000, "f", "a\x00b", '"x"')
    assert refused.value.field == "source"


async def test_the_store_wide_limit_trims_the_largest_streams_oldest_first(
    backing: Backing,
) -> None:
    store = await backing.open(max_total_bytes=1000)
    for _ in range(6):
        await add(store, text_of(100))  # News/progress: 600
    for _ in range(3):
        await add(store, text_of(100), name="other")  # News/other: 300
    other = await backing.peer(store)
    with pytest.raises(ResourceExhaustedError, match="server") as refused:
        await add(other, text_of(250), name="other")
    assert refused.value.retryable is True
    await trimmed(other)
    # 150 bytes had to go: the largest Stream gave up its two oldest messages.
    assert (await store.stats("News", "progress"))["usage"] == 400
    assert (await store.stats("News", "other"))["usage"] == 300
    await add(other, text_of(250), name="other")


async def test_every_process_sees_one_epoch_and_takes_the_others_tokens(
    backing: Backing,
) -> None:
    if not backing.shared:
        pytest.skip("the memory store is one process")
    a, b = await backing.open(), await backing.open()
    assert a.epoch == b.epoch and a.epoch
    registry = Registry([NewsFlow()])
    on_a = StreamService(registry, a.config, backing.clock, a)
    on_b = StreamService(registry, b.config, backing.clock, b)
    token = await on_a.write("NewsFlow", NewsFlow.progress, "f", "one", "a")
    await on_a.write("NewsFlow", NewsFlow.progress, "f", "two", "a")
    after = await on_b.read("NewsFlow", NewsFlow.progress, "f", token, 0)
    assert after is not None and after.value == "two"
    page = await on_a.list("NewsFlow", NewsFlow.progress, "f", 1, "")
    older = await on_b.list("NewsFlow", NewsFlow.progress, "f", 1, page.next_page_token)
    assert [m.value for m in older.messages] == ["one"]


async def test_the_epoch_changes_when_the_contents_are_lost(backing: Backing) -> None:
    store = await backing.open()
    registry = Registry([NewsFlow()])
    service = StreamService(registry, store.config, backing.clock, store)
    old = await service.write("NewsFlow", NewsFlow.progress, "f", "gone", "s")
    await service.write("NewsFlow", NewsFlow.progress, "f", "gone too", "s")
    page_token = (await service.list("NewsFlow", NewsFlow.progress, "f", 1, "")).next_page_token
    if backing.shared:
        stale = await backing.open()  # another process, which knew the old epoch too
        await backing.lose_contents()
        fresh = await backing.open()
    else:  # the memory store's contents are lost with its process
        stale = fresh = await backing.open()
    assert fresh.epoch != store.epoch
    assert await fresh.page("News", "progress", "f", None, 10) == ([], False)
    on_fresh = StreamService(registry, fresh.config, backing.clock, fresh)
    await on_fresh.write("NewsFlow", NewsFlow.progress, "f", "new", "s")
    # The stale process learns of the new epoch during this very read.
    on_stale = StreamService(registry, stale.config, backing.clock, stale)
    message = await on_stale.read("NewsFlow", NewsFlow.progress, "f", old, 0)
    assert message is not None and message.value == "new"  # the old token starts at the head
    assert stale.epoch == fresh.epoch
    page = await on_stale.list("NewsFlow", NewsFlow.progress, "f", 10, page_token)
    assert page.messages == [] and page.next_page_token == ""


async def test_close_wakes_waiting_readers_and_later_calls_fail(backing: Backing) -> None:
    store = await backing.open()
    reader = asyncio.create_task(store.next_after("News", "progress", "f", 0, 30))
    await eventually(lambda: store.readers_waiting() == 1, what="the reader to wait")
    await store.close()
    with pytest.raises(FailedPreconditionError):
        await asyncio.wait_for(reader, WAIT)
    with pytest.raises(FailedPreconditionError):
        await add(store, '"late"')
    with pytest.raises(FailedPreconditionError):
        await store.page("News", "progress", "f", None, 1)


async def test_concurrent_processes_share_one_sequence_and_keep_each_writers_order(
    backing: Backing,
) -> None:
    store = await backing.open()
    other = await backing.peer(store)

    async def writer(on: Any, name: str) -> None:
        for i in range(60):
            await on.append("News", "progress", 100_000, "f", name, f'"{name}:{i}"')

    await asyncio.gather(writer(store, "a"), writer(other, "b"), writer(store, "c"))
    page, more = await store.page("News", "progress", "f", None, 1000)
    assert seqs(page) == list(range(180, 0, -1)) and not more
    for name in "abc":
        mine = [m.text for m in reversed(page) if m.source == name]
        assert mine == [f'"{name}:{i}"' for i in range(60)]


# -- engines on a shared store ----------------------------------------------------------------


class NewsFlow(Flow[None]):
    progress = Stream("progress", str)

    def get_steps(self) -> StepList[Any]:
        return StepList.start_step(Announce())


class Announce(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.progress.write(context, f"hello from {context.flow_id}")
        return graceful_complete()


@pytest.fixture(params=["postgres", "redis"])
async def shared_config(request: pytest.FixtureRequest) -> AsyncIterator[StreamStoreConfig]:
    """Yield the config of a fresh shared store of each kind."""
    async with store_config(request.param) as config:
        yield config


def engine_on(tmp_path: Path, name: str, streams: StreamStoreConfig) -> EngineConfig:
    directory = tmp_path / name
    return EngineConfig(
        database_url=f"sqlite+aiosqlite:///{directory}/dexlite.db",
        blob_dir=str(directory / "blobs"),
        sqlite_synchronous="NORMAL",
        streams=streams,
    )


async def test_two_engines_on_one_shared_store_follow_each_others_streams(
    tmp_path: Path, shared_config: StreamStoreConfig
) -> None:
    flow = NewsFlow()
    async with (
        running_engine([flow], engine_on(tmp_path, "a", shared_config)) as a,
        running_engine([flow], engine_on(tmp_path, "b", shared_config)) as b,
    ):
        follower = asyncio.create_task(b.read_stream("n1", NewsFlow.progress, wait_seconds=30))
        await eventually(lambda: b._waiting_calls()[2] == 1, what="B's reader to wait")
        await a.start_flow(NewsFlow, "n1")
        message = await asyncio.wait_for(follower, WAIT)
        assert message is not None and message.value == "hello from n1"
        token = await b.write_stream("n1", NewsFlow.progress, "from b", source="cli")
        assert message.source.startswith("#")
        page = await a.list_stream_messages("n1", NewsFlow.progress)
        assert [m.value for m in page.messages] == ["from b", "hello from n1"]
        assert await a.read_stream("n1", NewsFlow.progress, token) is None


async def test_a_shared_store_keeps_its_contents_across_an_engine_restart(
    tmp_path: Path, shared_config: StreamStoreConfig
) -> None:
    config = engine_on(tmp_path, "a", shared_config)
    async with running_engine([NewsFlow()], config) as eng:
        old = await eng.write_stream("f", NewsFlow.progress, "before", source="s")
    async with running_engine([NewsFlow()], config) as eng:
        await eng.write_stream("f", NewsFlow.progress, "after", source="s")
        message = await eng.read_stream("f", NewsFlow.progress, old)
        assert message is not None and message.value == "after"  # the token still counts
        page = await eng.list_stream_messages("f", NewsFlow.progress)
        assert [m.value for m in page.messages] == ["after", "before"]


# -- choosing a store -------------------------------------------------------------------------


def test_the_postgres_store_on_a_sqlite_database_needs_its_own_url(tmp_path: Path) -> None:
    config = engine_on(tmp_path, "a", StreamStoreConfig(backend="postgres"))
    with pytest.raises(
        InvalidArgumentError, match=r"set its postgres_url \(DEXLITE_STREAM__POSTGRES_URL\)"
    ) as refused:
        Engine(Registry([NewsFlow()]), config)
    assert refused.value.field == "streamPostgresUrl"


def test_the_postgres_store_uses_the_engine_database_as_a_plain_asyncpg_dsn() -> None:
    config = StreamStoreConfig(backend="postgres")
    url = "postgresql+asyncpg://me:p%40ss@db.example:5433/dex?ssl=require"
    assert postgres_dsn(config, url) == "postgresql://me:p%40ss@db.example:5433/dex?ssl=require"
    own = dataclasses.replace(config, postgres_url="postgresql://other/streams")
    assert postgres_dsn(own, url) == "postgresql://other/streams"
    with pytest.raises(InvalidArgumentError, match="postgresql://") as refused:
        postgres_dsn(dataclasses.replace(config, postgres_url="sqlite:///x.db"), url)
    assert refused.value.field == "streamPostgresUrl"


def test_settings_choose_the_store_and_where_it_lives() -> None:
    settings = Settings(
        stream=StreamSettings(
            backend="redis",
            redis_url="redis://cache:6380/2",
            postgres_url="postgresql://db/streams",
            namespace="tenant-a",
        )
    )
    streams = config_from_settings(settings).streams
    assert (streams.backend, streams.redis_url) == ("redis", "redis://cache:6380/2")
    assert (streams.postgres_url, streams.namespace) == ("postgresql://db/streams", "tenant-a")
    for bad in ({"backend": "mongo"}, {"namespace": "a:b"}, {"namespace": " "}):
        with pytest.raises(InvalidArgumentError):
            StreamStoreConfig(**bad)


async def test_an_unreachable_store_fails_to_open_with_failed_precondition() -> None:
    config = StreamStoreConfig(backend="redis", redis_url="redis://127.0.0.1:1/0")
    store = stream_store(config, ManualClock())
    assert store is not None
    with pytest.raises(FailedPreconditionError, match="redis Stream Store cannot be reached"):
        await store.open()
