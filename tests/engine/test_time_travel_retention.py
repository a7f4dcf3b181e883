"""Retention purges the change log with its run: a traveled Flow's runs, once closed past the
retention period, leave no log rows, history or Step executions behind."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, func, select

from engine import EngineConfig, FlowNotFoundError, ManualClock, StopType, TimeTravelOptions
from engine._storage import tables as t
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.travel_app import OrderFlow, flows


def _rows(run_ids: list[str]) -> Any:
    def count(conn: Connection) -> dict[str, int]:
        return {
            table.name: conn.execute(
                select(func.count()).select_from(table).where(table.c.run_id.in_(run_ids))
            ).scalar_one()
            for table in (t.change_log, t.history, t.step_executions, t.attributes)
        }

    return count


async def test_a_purged_run_leaves_no_change_log(engine_config: EngineConfig) -> None:
    clock = ManualClock()
    config = dataclasses.replace(
        engine_config,
        clock=clock,
        retention=timedelta(days=7),
        retention_check_interval=timedelta(hours=1),
    )
    async with running_engine(flows(), config) as eng:
        first = await eng.start_flow(OrderFlow, "order", "o-1")
        await settle(eng)
        await eng.invoke_rpc("set_note", "order", "logged")
        await eng.publish_to_channel("order", "mail", "m-1")
        second = await eng.time_travel("order", TimeTravelOptions(run_id=first.run_id))
        await settle(eng)
        await eng.stop_flow("order", StopType.TERMINATE)
        runs = [first.run_id, second.run_id]
        database = eng._services.database
        before = await database.read(_rows(runs))
        assert before["change_log"] > 0 and before["history"] > 0
        await clock.advance_when_idle(timedelta(days=7, hours=2).total_seconds())
        with pytest.raises(FlowNotFoundError):
            await eng.describe_flow("order")
        after = await database.read(_rows(runs))
    assert after == {"change_log": 0, "history": 0, "step_executions": 0, "attributes": 0}
