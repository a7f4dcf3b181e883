"""Seed 002: "When a parent reuses a Flow ID with IDReusePolicy, or time travels, it can enter the
same Step execution and try to start the same SubFlow ID again." A traveled parent re-enters
FanOut-1, derives the same child ID under a new Request ID, and the reuse policy's table
decides; running children of the old run keep running."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Engine, EngineConfig, SubFlowReusePolicy, TimeTravelOptions, TravelPoint
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.subflow_app import FanOut, ParentFlow, flows

ATTACH = SubFlowReusePolicy.ATTACH
RESTART = SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
ALWAYS = SubFlowReusePolicy.ALWAYS_RESTART
CHILD = "SubFlow:parent-FanOut-1-0"


async def child_runs(eng: Engine) -> list[tuple[str, str]]:
    page = await eng.search_flows(f"FlowId = '{CHILD}' ORDER BY StartTime ASC")
    return [(f.run_id, str(f.status)) for f in page.flows]


async def seen(eng: Engine) -> dict[str, Any]:
    result = await eng.wait_for_flow("parent", wait_seconds=10)
    assert result.status == "COMPLETED", result
    [completion] = result.completions
    [child] = completion.output
    return child  # type: ignore[no-any-return]


async def travel_back(eng: Engine) -> list[str]:
    """Travel the parent to before FanOut; return its new run's SubFlow events."""
    latest = await eng.describe_flow("parent")
    traveled = await eng.time_travel(
        "parent", TimeTravelOptions(run_id=latest.run_id, to=TravelPoint.step_type(FanOut))
    )
    await settle(eng)
    page = await eng.get_flow_history("parent", run_id=traveled.run_id, page_size=1000)
    return [str(e.event_type) for e in page.events if e.event_type.startswith("SUBFLOW_")]


@pytest.mark.parametrize(
    ("outcome", "policy", "reused"),
    [
        ("complete", ATTACH, True),  # ATTACH returns a closed child's result, any status
        ("fail", ATTACH, True),
        ("complete", RESTART, True),  # the default returns a completed child's result...
        ("fail", RESTART, False),  # ...and starts a failed one again
        ("complete", ALWAYS, False),  # ALWAYS_RESTART starts again, whatever it ended with
        ("fail", ALWAYS, False),
    ],
)
async def test_a_traveled_parent_meets_its_closed_child_under_the_reuse_policy(
    engine_config: EngineConfig, outcome: str, policy: SubFlowReusePolicy, reused: bool
) -> None:
    async with running_engine(flows(), engine_config) as eng:
        await eng.start_flow(ParentFlow, "parent", {"outcome": outcome, "policy": policy})
        first = await seen(eng)
        assert first["flowId"] == CHILD
        assert first["status"] == ("COMPLETED" if outcome == "complete" else "FAILED")
        subflow_events = await travel_back(eng)
        again = await seen(eng)
        runs = await child_runs(eng)
        if reused:
            assert subflow_events == ["SUBFLOW_ATTACHED", "SUBFLOW_CLOSED"]
            assert again == first
            assert [r for r, _ in runs] == [first["runId"]]
        else:
            assert subflow_events == ["SUBFLOW_STARTED", "SUBFLOW_CLOSED"]
            assert (again["flowId"], again["status"]) == (CHILD, first["status"])
            assert again["runId"] != first["runId"]
            assert [r for r, _ in runs] == [first["runId"], again["runId"]]


async def test_a_running_child_of_the_old_run_keeps_running_and_the_new_run_attaches(
    engine_config: EngineConfig,
) -> None:
    async with running_engine(flows(), engine_config) as eng:
        started = await eng.start_flow(ParentFlow, "parent", {"outcome": "hold"})
        await settle(eng)  # the child holds until released
        [(child_run, status)] = await child_runs(eng)
        assert status == "RUNNING"
        subflow_events = await travel_back(eng)
        assert (await eng.describe_flow("parent", started.run_id)).status == "TERMINATED"
        # The old run closing left its child running; the re-entered wait attached to it.
        assert await child_runs(eng) == [(child_run, "RUNNING")]
        assert subflow_events == ["SUBFLOW_ATTACHED"]
        await eng.publish_to_channel(CHILD, "release", "go")
        child = await seen(eng)
        assert (child["runId"], child["status"]) == (child_run, "COMPLETED")
