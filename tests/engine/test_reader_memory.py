"""Threads that hand results to the event loop keep nothing of them afterwards.

A reader thread used to keep its last read's result in its frame until its next read: after a
start on 100,000 open runs, the recovery read of every open run (as rows) lived on for good,
and garbage collections walked it.
"""

from __future__ import annotations

import gc

from sqlalchemy.engine import Row

from engine import EngineConfig, StartFlowOptions
from patterns.primitives.rpc.flow import CounterFlow
from tests.conftest import running_engine


def _rows() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Row))


async def test_recovery_keeps_none_of_the_rows_it_read(engine_config: EngineConfig) -> None:
    count = 300
    async with running_engine([CounterFlow()], engine_config) as eng:
        for n in range(count):
            await eng.start_flow(
                CounterFlow, f"c{n}", options=StartFlowOptions(initial_attributes={"counter": n})
            )
        assert await eng.invoke_rpc("increment", "c7", 1) == 8
    before = _rows()
    async with running_engine([CounterFlow()], engine_config) as eng:  # recovers every run
        stats = await eng.stats()
        assert stats.open_runs == {"CounterFlow": count}
        history = await eng.get_flow_history("c7")
        assert len(history.events) == 2
        assert _rows() - before < count // 10
