"""Commit notices on PostgreSQL go out only when another process may hear them: an engine
alone on the database sends none, one that joins is let in before it serves, and it reads
every commit made without a notice before it does (migration 0010, ``multiprocess.notify``).

An observer connection of the test listens on the notice channel without joining, so it hears
what a commit sends without counting as a process; a marker it sends itself afterwards comes
after every notice of the commits made before it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from engine import Attribute, Context, EngineConfig, Flow, MatchOperator, RPCResult, StepList, rpc
from engine._runtime.multiprocess.notify import (
    ALONE,
    COMMITS_CHANNEL,
    FENCE,
    JOIN_CHANNEL,
    LOCK_CLASS,
    SharedNotifier,
)
from engine.testing import waiting_calls
from tests.conftest import running_engine
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

pytestmark = postgres_only("commit notices between processes on one PostgreSQL database")

MARKER = "dexlite_test_marker"


class NoteFlow(Flow[None]):
    """A Flow whose RPC writes one Attribute."""

    note = Attribute("note", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def set_note(self, context: Context, input: str) -> RPCResult[None]:
        """Write ``input`` to the note."""
        self.note.set(context, input)
        return RPCResult(None)


def _dsn(config: EngineConfig) -> str:
    return config.database_url.replace("postgresql+asyncpg://", "postgresql://")


class Observer:
    """Listens on the commit notice channel (without joining) and on its own marker."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

    def _hear(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self.heard.put_nowait((channel, payload))

    async def notices(self) -> list[str]:
        """Return the commit notices heard since the last call (those of every commit that
        ended before this call: they precede its marker)."""
        await self.conn.execute(f"NOTIFY {MARKER}")
        found = []
        while True:
            channel, payload = await asyncio.wait_for(self.heard.get(), 30)
            if channel == MARKER:
                return found
            found.append(payload)


@contextlib.asynccontextmanager
async def observing(config: EngineConfig) -> AsyncIterator[Observer]:
    conn = await asyncpg.connect(_dsn(config))
    observer = Observer(conn)
    try:
        await conn.add_listener(COMMITS_CHANNEL, observer._hear)
        await conn.add_listener(MARKER, observer._hear)
        yield observer
    finally:
        await conn.close()


async def test_an_engine_alone_sends_no_notice_until_another_joins_and_again_once_it_left(
    engine_config: EngineConfig,
) -> None:
    async with (
        running_engine([NoteFlow()], engine_config) as first,
        observing(engine_config) as observer,
    ):
        await first.start_flow(NoteFlow, "n", None)
        await first.invoke_rpc("set_note", "n", "alone")
        assert await observer.notices() == []

        async with running_engine([NoteFlow()], engine_config) as second:
            await first.invoke_rpc("set_note", "n", "joined")
            heard = await observer.notices()
            assert len(heard) == 1 and '"f":"n"' in heard[0], heard
            # And the other engine's waiters hear it: a match wakes on the first's commit
            # long before its own deadline (30 s) would have it read again.
            waiting = asyncio.create_task(
                second.wait_for_attribute_match(
                    "n", "note", MatchOperator.EQ, "heard", wait_seconds=30
                )
            )
            await eventually(
                lambda: waiting_calls(second).attribute_matches == 1, what="the match waiter"
            )
            await first.invoke_rpc("set_note", "n", "heard")
            match = await asyncio.wait_for(waiting, 15)
            assert (match.matched, match.value) == (True, "heard")
            await observer.notices()

        async def alone_again() -> bool:
            await first.invoke_rpc("set_note", "n", "alone again")
            return await observer.notices() == []

        await eventually(alone_again, what="the engine to be alone again")


async def test_a_process_that_joins_waits_for_the_commits_made_without_a_notice(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([NoteFlow()], engine_config):
        pass  # the schema, migrated
    dsn = _dsn(engine_config)
    alone, commit = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    joining = SharedNotifier("joining", dsn)
    try:
        # Another process, alone: it holds ALONE shared, as every process does, and
        # exclusively, and lets go of the exclusive hold when asked to.
        await alone.execute("SELECT pg_advisory_lock_shared($1, $2)", LOCK_CLASS, ALONE)
        assert await alone.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_CLASS, ALONE)
        asked = asyncio.Event()
        await alone.add_listener(JOIN_CHANNEL, lambda *_: asked.set())
        async with observing(engine_config) as observer:
            # One of its commits, under way, skips its notice.
            transaction = commit.transaction()
            await transaction.start()
            await commit.execute(f"SELECT dexlite_announce('{COMMITS_CHANNEL}', 'unheard')")

            starting = asyncio.create_task(joining.start())
            await asyncio.wait_for(asyncio.shield(asked.wait()), 30)
            assert await alone.fetchval("SELECT pg_advisory_unlock($1, $2)", LOCK_CLASS, ALONE)

            async def on_the_fence() -> bool:
                waiting = await alone.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND classid = $1 AND objid = $2",
                    LOCK_CLASS,
                    FENCE,
                )
                return bool(waiting == 1)

            await eventually(on_the_fence, what="the joining process to wait on the fence")
            assert not starting.done()
            await transaction.commit()
            await asyncio.wait_for(starting, 30)
            assert await observer.notices() == []  # the commit sent none
            # Joined: it holds ALONE shared, so neither process can be alone now.
            assert not await alone.fetchval(
                "SELECT pg_try_advisory_lock($1, $2)", LOCK_CLASS, ALONE
            )
            assert not joining.alone
            await commit.execute(f"SELECT dexlite_announce('{COMMITS_CHANNEL}', 'heard')")
            assert await observer.notices() == ["heard"]
    finally:
        await joining.close()
        await alone.close()
        await commit.close()


async def test_the_step_end_function_announces_through_the_gate(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([NoteFlow()], engine_config):
        pass  # the schema, migrated
    conn = await asyncpg.connect(_dsn(engine_config))
    try:
        body = await conn.fetchval(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.proname = 'dexlite_end_step'"
        )
    finally:
        await conn.close()
    assert "dexlite_announce(p_channel" in body and "pg_notify" not in body
