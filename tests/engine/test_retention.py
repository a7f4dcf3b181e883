"""Closed runs stay readable until the retention period passes, then are purged."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from engine import (
    Attribute,
    AttributeIndex,
    Context,
    EngineConfig,
    Flow,
    FlowNotFoundError,
    IndexType,
    ManualClock,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    graceful_complete,
)
from tests.conftest import running_engine
from tests.support.subflow_app import ParentFlow
from tests.support.subflow_app import flows as subflow_flows


class Finish(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.status.set(context, "done")
        return graceful_complete("ok")


class KeptFlow(Flow[None]):
    status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "keyword7"))
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Finish())


class OpenFlow(Flow[None]):
    status = Attribute("status", str)


def _config(base: EngineConfig, clock: ManualClock) -> EngineConfig:
    return EngineConfig(
        **{
            **base.__dict__,
            "clock": clock,
            "retention": timedelta(days=7),
            "retention_check_interval": timedelta(hours=1),
        }
    )


async def _gone(eng: object, flow_id: str) -> bool:
    try:
        await eng.describe_flow(flow_id)  # type: ignore[attr-defined]
    except FlowNotFoundError:
        return True
    return False


async def test_closed_runs_are_purged_after_retention_and_open_ones_stay(
    engine_config: EngineConfig, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with running_engine([KeptFlow(), OpenFlow()], _config(engine_config, clock)) as eng:
        await eng.start_flow(
            KeptFlow, "old", None, StartFlowOptions(initial_attributes={"secret": "s"})
        )
        await eng.start_flow(OpenFlow, "open", None)
        assert (await eng.wait_for_flow("old", wait_seconds=5)).status == "COMPLETED"
        # Six days on, every hourly purge on the way has run and kept the closed run.
        await clock.advance_when_idle(timedelta(days=6).total_seconds())
        assert not await _gone(eng, "old")
        await eng.start_flow(KeptFlow, "young", None)
        await eng.wait_for_flow("young", wait_seconds=5)
        blob_files_before = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]

        # Past seven days, the next hourly purge takes the old run.
        await clock.advance_when_idle(timedelta(days=1, hours=2).total_seconds())

        assert await _gone(eng, "old")
        assert (await eng.describe_flow("young")).status == "COMPLETED"
        assert (await eng.describe_flow("open")).status == "RUNNING"
        page = await eng.search_flows("FlowType = 'KeptFlow'", 100, "")
        assert [f.flow_id for f in page.flows] == ["young"]
        with pytest.raises(FlowNotFoundError):
            await eng.get_flow_history("old")
        assert blob_files_before
        assert [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == []
        # The Flow ID is free again.
        assert (await eng.start_flow(KeptFlow, "old", None)).started


async def test_retention_none_keeps_closed_runs(engine_config: EngineConfig) -> None:
    clock = ManualClock()
    config = EngineConfig(**{**_config(engine_config, clock).__dict__, "retention": None})
    async with running_engine([KeptFlow()], config) as eng:
        await eng.start_flow(KeptFlow, "kept", None)
        await eng.wait_for_flow("kept", wait_seconds=5)
        clock.advance(timedelta(days=365).total_seconds())
        assert await eng.purge_closed_runs() == 0
        assert (await eng.describe_flow("kept")).status == "COMPLETED"


async def test_purged_subflows_leave_no_link_and_a_purged_parent_keeps_its_childs_link(
    engine_config: EngineConfig,
) -> None:
    clock = ManualClock()
    async with running_engine(subflow_flows(), _config(engine_config, clock)) as eng:
        # "done" and its child close now; "waiting" stays open on a child that holds.
        await eng.start_flow(ParentFlow, "done", {"children": 1})
        await eng.start_flow(ParentFlow, "waiting", {"children": 1, "outcome": "hold"})
        await clock.settle()
        assert (await eng.wait_for_flow("done")).status == "COMPLETED"
        await clock.advance_when_idle(timedelta(days=8).total_seconds())
        assert await _gone(eng, "done") and await _gone(eng, "SubFlow:done-FanOut-1-0")
        assert [f.flow_id for f in (await eng.search_flows("ParentFlowId = 'done'")).flows] == []
        # An open parent and its open child stay, still linked.
        held = await eng.search_flows("ParentFlowId = 'waiting'")
        assert [(f.flow_id, f.status) for f in held.flows] == [
            ("SubFlow:waiting-FanOut-1-0", "RUNNING")
        ]
        # A child outlives its purged parent and still names it.
        await eng.stop_flow("waiting")
        await clock.advance_when_idle(timedelta(days=8).total_seconds())
        assert await _gone(eng, "waiting")
        child = await eng.describe_flow("SubFlow:waiting-FanOut-1-0")
        assert (child.status, child.parent_flow_id) == ("RUNNING", "waiting")
