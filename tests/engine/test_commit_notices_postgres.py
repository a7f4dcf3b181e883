"""Commit notices on PostgreSQL go out once a commit has ended, and only when another process
may hear them: an engine alone on the database sends none, and one that joins is let in
before it serves (``engine._runtime.postgres.notify``).

An observer connection of the test listens on the notice channel without joining, so it hears
what a commit sends without counting as a process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from engine import EngineConfig, MatchOperator
from engine._runtime.postgres.notify import (
    ALL,
    ALONE,
    COMMITS_CHANNEL,
    JOIN_CHANNEL,
    LOCK_CLASS,
    MAX_PAYLOAD,
    PostgresNotifier,
    _changes,
    _notices,
)
from engine._storage.records import AttributeWrite, RunChange
from engine.testing import announces_commits, waiting_calls
from tests.conftest import running_engine
from tests.engine.test_shared_postgres import StatusFlow
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

pytestmark = postgres_only("commit notices between processes on one PostgreSQL database")


def _dsn(config: EngineConfig) -> str:
    return config.database_url.replace("postgresql+asyncpg://", "postgresql://")


class Observer:
    """Listens on the commit notice channel without joining (so it is no process)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.heard: asyncio.Queue[str] = asyncio.Queue()

    def _hear(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.heard.put_nowait(payload)

    async def until(self, flow_id: str) -> list[str]:
        """Return the Flow IDs named by the notices heard up to the first naming ``flow_id``.

        One engine sends its notices in commit order on one connection, and PostgreSQL
        delivers them in that order: a notice of an earlier commit would come before."""
        named: list[str] = []
        while flow_id not in named:
            payload = await asyncio.wait_for(self.heard.get(), 30)
            named.extend(change.flow_id for change in _changes(payload)[1])
        return named


@contextlib.asynccontextmanager
async def observing(config: EngineConfig) -> AsyncIterator[Observer]:
    conn = await asyncpg.connect(_dsn(config))
    observer = Observer(conn)
    try:
        await conn.add_listener(COMMITS_CHANNEL, observer._hear)
        yield observer
    finally:
        await conn.close()


async def test_an_engine_alone_sends_no_notice_until_another_joins_and_again_once_it_left(
    engine_config: EngineConfig,
) -> None:
    flows = ("alone-1", "joined-1", "alone-2", "joined-2")
    async with (
        running_engine([StatusFlow()], engine_config) as first,
        observing(engine_config) as observer,
    ):
        assert not announces_commits(first)  # alone once started
        for flow_id in flows:
            await first.start_flow(StatusFlow, flow_id, None)
        await first.invoke_rpc("set_status", "alone-1", "unheard")

        async with running_engine([StatusFlow()], engine_config) as second:
            # Let in before the other served, and neither is alone now.
            assert announces_commits(first) and announces_commits(second)
            # The other engine's waiter hears the first's commit: the match wakes long before
            # its own deadline (30 s) would have it read again.
            waiting = asyncio.create_task(
                second.wait_for_attribute_match(
                    "joined-1", "status", MatchOperator.EQ, "heard", wait_seconds=30
                )
            )
            await eventually(
                lambda: waiting_calls(second).attribute_matches == 1, what="the match waiter"
            )
            await first.invoke_rpc("set_status", "joined-1", "heard")
            match = await asyncio.wait_for(waiting, 15)
            assert (match.matched, match.value) == (True, "heard")
            # Its notice is the first the observer hears: the earlier commits sent none.
            assert await observer.until("joined-1") == ["joined-1"]

        await eventually(lambda: not announces_commits(first), what="the engine alone again")
        await first.invoke_rpc("set_status", "alone-2", "unheard")
        async with running_engine([StatusFlow()], engine_config):
            await first.invoke_rpc("set_status", "joined-2", "heard")
            assert await observer.until("joined-2") == ["joined-2"]


async def test_a_process_that_joins_asks_the_one_alone_to_let_go_before_it_serves(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([StatusFlow()], engine_config):
        pass  # the schema, migrated
    dsn = _dsn(engine_config)
    alone = await asyncpg.connect(dsn)
    joining = PostgresNotifier("joining", dsn)
    try:
        # Another process, alone: it holds ALONE shared, as every process does, and
        # exclusively, and lets go of the exclusive hold when asked to.
        await alone.execute("SELECT pg_advisory_lock_shared($1, $2)", LOCK_CLASS, ALONE)
        assert await alone.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_CLASS, ALONE)
        asked = asyncio.Event()
        await alone.add_listener(JOIN_CHANNEL, lambda *_: asked.set())
        starting = asyncio.create_task(joining.start())
        await asyncio.wait_for(asyncio.shield(asked.wait()), 30)
        assert not starting.done()  # it does not serve until let in
        assert await alone.fetchval("SELECT pg_advisory_unlock($1, $2)", LOCK_CLASS, ALONE)
        await asyncio.wait_for(starting, 30)
        # Joined: it holds ALONE shared, so neither process can be alone now.
        assert not await alone.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_CLASS, ALONE)
        assert not joining.alone
    finally:
        await joining.close()
        await alone.close()


def test_a_batch_of_commits_too_large_for_one_notice_is_split_and_a_huge_one_named_only() -> None:
    big = "x" * 500
    huge = RunChange(
        flow_id="f",
        flow_type="F",
        run_id="r",
        writes=tuple(AttributeWrite(f"name-{i}-{big}", "", "1") for i in range(40)),
        ended_step_ids=("r:S-1",),
    )
    small = [
        RunChange(
            flow_id=f"g{n}", flow_type="F", run_id=f"q{n}", writes=(AttributeWrite(big, "", "1"),)
        )
        for n in range(30)
    ]
    nothing = RunChange(flow_id="h", flow_type="F", run_id="s")
    payloads = _notices("me", [huge, nothing, *small])
    assert len(payloads) > 1 and all(len(p.encode()) <= MAX_PAYLOAD for p in payloads)
    found = [change for p in payloads for change in _changes(p)[1]]
    assert {_changes(p)[0] for p in payloads} == {"me"}
    # The huge change names its run's writes and queues as ALL; the rest are whole, in order.
    assert [(c.flow_id, c.written, c.ended_step_ids, c.published) for c in found] == [
        ("f", ALL, ("r:S-1",), ALL),
        *[(f"g{n}", ((big, ""),), (), ()) for n in range(30)],
    ]
    assert _notices("me", [nothing]) == []
