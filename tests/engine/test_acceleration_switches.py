"""Each SQLite acceleration's off switch (EngineConfig) takes effect and changes no answer.

The bench's ``accelerations`` scenario measures what each one buys by turning it off; these
tests make sure that what it turns off is the acceleration and nothing else: concurrent locked
increments still lose and duplicate nothing, and each switch shows in what the engine does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine as SQLAlchemyEngine

import engine
from engine import _codec
from patterns.primitives.rpc.flow import CounterFlow
from tests.conftest import running_engine
from tests.engine.test_lock_handoffs import _counter, _increment, _queued, writer_held
from tests.support.backends import sqlite_only
from tests.support.waiting import eventually

pytestmark = sqlite_only("the switches turn off accelerations of the SQLite engine")

SWITCHES = ["reads_on_loop", "prepared_statements", "lock_handoffs", "value_reuse"]


def _off(config: engine.EngineConfig, *names: str) -> engine.EngineConfig:
    return dataclasses.replace(config, **dict.fromkeys(names, False))


@pytest.mark.parametrize("switch", [*SWITCHES, "all"])
async def test_concurrent_locked_increments_give_the_same_answers_with_it_off(
    engine_config: engine.EngineConfig, switch: str
) -> None:
    config = _off(engine_config, *(SWITCHES if switch == "all" else [switch]))
    calls = 60
    async with running_engine([CounterFlow()], config) as eng:
        await eng.start_flow(CounterFlow, "c")
        answers = await asyncio.gather(*(_increment(eng, "c") for _ in range(calls)))
        assert sorted(answers) == list(range(1, calls + 1))
        assert await _counter(eng, "c") == calls


class _Statements:
    """Every statement SQLAlchemy's listeners hear: its text, whether it came through
    ``Connection.execute`` (an execution context) and the thread it ran on."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, bool]] = []

    def __call__(
        self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        on_main = threading.current_thread() is threading.main_thread()
        self.seen.append((statement.lstrip().upper(), context is not None, on_main))


@pytest.fixture
def statements() -> Iterator[_Statements]:
    heard = _Statements()
    event.listen(SQLAlchemyEngine, "before_cursor_execute", heard)
    try:
        yield heard
    finally:
        event.remove(SQLAlchemyEngine, "before_cursor_execute", heard)


@pytest.mark.parametrize("prepared", [True, False])
async def test_prepared_statements_off_runs_the_writer_s_statements_through_sqlalchemy(
    engine_config: engine.EngineConfig, statements: _Statements, prepared: bool
) -> None:
    config = dataclasses.replace(engine_config, prepared_statements=prepared)
    async with running_engine([CounterFlow()], config) as eng:
        await eng.start_flow(CounterFlow, "c")
        statements.seen.clear()
        assert await eng.invoke_rpc("increment", "c", 1) == 1
    writes = [via for text, via, _ in statements.seen if text.startswith("INSERT INTO ATTRIBUTES")]
    assert writes, statements.seen
    # Prepared, a statement reaches the listeners with no execution context.
    assert all(via is not prepared for via in writes)


@pytest.mark.parametrize("on_loop", [True, False])
async def test_reads_on_loop_off_sends_snapshot_reads_to_reader_threads(
    engine_config: engine.EngineConfig, statements: _Statements, on_loop: bool
) -> None:
    # Statements through SQLAlchemy, so that the listeners hear the reads too.
    config = dataclasses.replace(engine_config, reads_on_loop=on_loop, prepared_statements=False)
    async with running_engine([CounterFlow()], config) as eng:
        await eng.start_flow(CounterFlow, "c")
        statements.seen.clear()
        await eng.get_attributes("c", ["counter"])
        # get_attributes' own reads, not the retention job's scan (a reader thread always).
        reads = [
            (text, on_main)
            for text, _, on_main in statements.seen
            if text.startswith("SELECT") and "ATTRIBUTES.NAME" in text
        ]
    assert reads, statements.seen
    assert [on_main for _, on_main in reads] == [on_loop] * len(reads), reads


async def test_lock_handoffs_off_releases_the_locks_only_once_the_commit_ended(
    engine_config: engine.EngineConfig,
) -> None:
    config = dataclasses.replace(engine_config, sqlite_synchronous="FULL", lock_handoffs=False)
    async with running_engine([CounterFlow()], config) as eng:
        await eng.start_flow(CounterFlow, "c")
        async with writer_held(eng) as gate:
            first = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 1))
            # The unit waits behind the held writer, its locks still held: nothing is handed
            # off, whereas with the switch on the same unit is handed off (the tests of
            # test_lock_handoffs wait for exactly that), and the next increment meets the
            # lock.
            await eventually(
                lambda: eng._services.locks.holder("c", "counter") is not None,
                what="the first increment to hold the lock",
            )
            await eng._services.database.read(lambda conn: None)
            assert eng._services.committer.handoffs.pending("c") == ()
            with pytest.raises(engine.RPCLockConflictError):
                await eng.invoke_rpc("increment", "c", 1)
            gate.set()
            assert await first == 1
        # Once the commit ended, the lock is free.
        assert await eng.invoke_rpc("increment", "c", 1) == 2


@pytest.mark.parametrize("reuse", [True, False])
async def test_value_reuse_off_makes_the_next_holder_decode_the_stored_text(
    engine_config: engine.EngineConfig, monkeypatch: pytest.MonkeyPatch, reuse: bool
) -> None:
    decoded: list[str] = []
    real_decode = _codec.decode

    def counting_decode(value_type: Any, text: str) -> Any:
        decoded.append(text)
        return real_decode(value_type, text)

    monkeypatch.setattr(_codec, "decode", counting_decode)
    config = dataclasses.replace(engine_config, sqlite_synchronous="FULL", value_reuse=reuse)
    async with running_engine([CounterFlow()], config) as eng:
        await eng.start_flow(CounterFlow, "c")
        async with writer_held(eng) as gate:
            first = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 1))
            await _queued(eng, "c", 1)
            decoded.clear()
            # The second increment reads the first one's value, handed off and not committed.
            second = asyncio.ensure_future(eng.invoke_rpc("increment", "c", 10))
            await _queued(eng, "c", 2)
            reads_of_the_first = decoded.count("1")
            gate.set()
            assert (await first, await second) == (1, 11)
    assert reads_of_the_first == (0 if reuse else 1)
