"""SubFlows through the Engine: children started in the commit that begins the wait, the seed's
reuse-policy table cell by cell, any_of and all_of, parents that close before their children,
failures the parent reads, parent fields in FlowInfo and SearchFlows, and history."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Channel,
    Context,
    DefinitionError,
    Engine,
    EngineConfig,
    Flow,
    IdReusePolicy,
    InvalidArgumentError,
    RetryPolicy,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    StopType,
    SubFlow,
    SubFlowOptions,
    SubFlowReusePolicy,
    Timer,
    Wait,
    go_to,
    graceful_complete,
)
from engine.testing import settle
from tests.conftest import manual_clock_config, running_engine
from tests.support.subflow_app import ChildFlow, ChildInput, ParentFlow, flows

ATTACH = SubFlowReusePolicy.ATTACH
RESTART = SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
ALWAYS = SubFlowReusePolicy.ALWAYS_RESTART
MINUTE = timedelta(minutes=1)
ONCE = StepOptions(
    wait_for_retry=RetryPolicy(max_attempts=1), execute_retry=RetryPolicy(max_attempts=1)
)


def child_id(parent: str, index: int = 0, execution: str = "FanOut-1") -> str:
    return f"SubFlow:{parent}-{execution}-{index}"


async def start_parent(eng: Engine, flow_id: str, **input: Any) -> str:
    started = await eng.start_flow(
        ParentFlow, flow_id, input, StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE)
    )
    return started.run_id


async def parent_saw(eng: Engine, flow_id: str) -> list[dict[str, Any]]:
    result = await eng.wait_for_flow(flow_id)
    assert result.status == "COMPLETED", result
    [completion] = result.completions
    return completion.output  # type: ignore[no-any-return]


async def runs_of(eng: Engine, flow_id: str) -> list[tuple[str, str]]:
    """Return (run ID, status) of every run of ``flow_id``, oldest first."""
    page = await eng.search_flows(f"FlowId = '{flow_id}' ORDER BY StartTime ASC")
    return [(f.run_id, f.status) for f in page.flows]


async def events(eng: Engine, flow_id: str, run_id: str | None = None) -> list[Any]:
    page = await eng.get_flow_history(flow_id, run_id=run_id, page_size=1000)
    assert page.next_page_token == ""
    return page.events


async def test_fan_out_of_50_children_with_all_of(engine_config: EngineConfig) -> None:
    async with running_engine(flows(), engine_config) as eng:
        parent_run = await start_parent(eng, "fan", children=50)
        await settle(eng)
        seen = await parent_saw(eng, "fan")
        assert [s["flowId"] for s in seen] == [child_id("fan", i) for i in range(50)]
        assert [s["outputs"] for s in seen] == [
            [{"tag": f"c{i}", "secret": None}] for i in range(50)
        ]
        assert {s["status"] for s in seen} == {"COMPLETED"}
        history = await events(eng, "fan")
        started = [e.details for e in history if e.event_type == "SUBFLOW_STARTED"]
        closed = [e.details for e in history if e.event_type == "SUBFLOW_CLOSED"]
        assert [e["index"] for e in started] == list(range(50))
        assert sorted(e["index"] for e in closed) == list(range(50))
        assert {e["status"] for e in closed} == {"COMPLETED"}
        assert [e["runId"] for e in started] == [s["runId"] for s in seen]
        # The children start in the commit that moves the parent Step into its wait.
        waiting = next(e for e in history if e.event_type == "STEP_WAITING")
        assert {e.at for e in history if e.event_type == "SUBFLOW_STARTED"} == {waiting.at}
        child_history = await events(eng, child_id("fan", 49))
        assert child_history[0].event_type == "FLOW_STARTED"
        assert child_history[0].at == waiting.at
        assert child_history[0].details["requestId"] == f"{parent_run}:FanOut-1:49"
        # The last event before the Step closes is the 50th child closing, and nothing in
        # between: the commit that closes the child wakes the parent.
        kinds = [e.event_type for e in history]
        assert kinds.index("STEP_CLOSED") > max(
            i for i, k in enumerate(kinds) if k == "SUBFLOW_CLOSED"
        )
        by_run = await eng.search_flows(f"ParentRunId = '{parent_run}'", page_size=100)
        assert len(by_run.flows) == 50
        assert (await eng.search_flows("ParentRunId = 'nope'")).flows == []
        # Each child says who its parent is; SearchFlows filters on ParentFlowId.
        info = await eng.describe_flow(child_id("fan", 7))
        assert (info.parent_flow_id, info.parent_run_id) == ("fan", parent_run)
        parent = await eng.describe_flow("fan")
        assert (parent.parent_flow_id, parent.parent_run_id) == (None, None)
        children = await eng.search_flows("ParentFlowId = 'fan'", page_size=100)
        assert sorted(f.flow_id for f in children.flows) == sorted(
            child_id("fan", i) for i in range(50)
        )
        assert {f.parent_run_id for f in children.flows} == {parent_run}
        top = await eng.search_flows("ParentFlowId IS NULL")
        assert [f.flow_id for f in top.flows] == ["fan"]
        prefixed = await eng.search_flows(
            "ParentFlowId STARTS_WITH 'fa' AND FlowId = 'SubFlow:fan-FanOut-1-3'"
        )
        assert [f.flow_id for f in prefixed.flows] == [child_id("fan", 3)]
        # Like an index key, != is false for a run without a parent; NOT complements exactly.
        others = await eng.search_flows("ParentFlowId != 'nobody'", page_size=100)
        assert len(others.flows) == 50
        assert [f.flow_id for f in (await eng.search_flows("NOT ParentFlowId = 'fan'")).flows] == [
            "fan"
        ]


async def test_a_child_that_fails_is_read_by_the_parent(engine_config: EngineConfig) -> None:
    async with running_engine(flows(), engine_config) as eng:
        await start_parent(eng, "sad", children=2, outcome="fail")
        await settle(eng)
        seen = await parent_saw(eng, "sad")
        assert [(s["status"], s["errorType"], s["errorMessage"], s["outputs"]) for s in seen] == [
            ("FAILED", "ChildFailed", "child c0 failed", []),
            ("FAILED", "ChildFailed", "child c1 failed", []),
        ]
        closed = [e.details for e in await events(eng, "sad") if e.event_type == "SUBFLOW_CLOSED"]
        assert {(e["index"], e["status"]) for e in closed} == {(0, "FAILED"), (1, "FAILED")}


async def test_any_of_a_timer_wins_over_a_running_child_which_keeps_running(
    settings: Any,
) -> None:
    config, clock = manual_clock_config(settings)
    async with running_engine(flows(), config) as eng:
        await start_parent(eng, "race", children=1, outcome="hold", race_timer_seconds=60)
        await clock.settle()
        assert (await eng.wait_for_flow("race")).status == "RUNNING"
        await clock.advance_when_idle(60)
        seen = await parent_saw(eng, "race")
        # The Timer won: the child the parent reads is still running, and stays so.
        assert [(s["flowId"], s["status"], s["outputs"]) for s in seen] == [
            (child_id("race"), "RUNNING", [])
        ]
        assert (await eng.describe_flow(child_id("race"))).status == "RUNNING"
        await eng.publish_to_channel(child_id("race"), ChildFlow.release, "go")
        await clock.settle()
        child = await eng.wait_for_flow(child_id("race"))
        assert child.status == "COMPLETED" and child.run_id == seen[0]["runId"]
        kinds = [e.event_type for e in await events(eng, "race")]
        assert "SUBFLOW_CLOSED" not in kinds  # the wait was over before the child closed


async def test_any_of_children_completes_with_the_first_to_close(
    engine_config: EngineConfig,
) -> None:
    class Either(Step[None]):
        def wait_for(self, context: Context, input: None) -> Wait:
            return Wait.any_of(
                SubFlow.run(ChildFlow, ChildInput(tag="slow", outcome="hold")),
                SubFlow.run(ChildFlow, ChildInput(tag="fast")),
            )

        def execute(self, context: Context, input: None) -> StepDecision:
            return graceful_complete(
                [str(SubFlow.get_condition_results(context, i).status) for i in (0, 1)]
            )

    class EitherFlow(Flow[None]):
        def get_steps(self) -> StepList[None]:
            return StepList.start_step(Either())

    async with running_engine([EitherFlow(), ChildFlow()], engine_config) as eng:
        await eng.start_flow(EitherFlow, "either")
        await settle(eng)
        result = await eng.wait_for_flow("either")
        assert result.status == "COMPLETED"
        assert result.completions[0].output == ["RUNNING", "COMPLETED"]
        assert (await eng.describe_flow("SubFlow:either-Either-1-0")).status == "RUNNING"


@pytest.mark.parametrize("stop", ["CANCEL", "TERMINATE", "FAIL", "timeout"])
async def test_a_parent_that_closes_leaves_its_running_child_running(
    settings: Any, stop: str
) -> None:
    config, clock = manual_clock_config(settings)
    async with running_engine(flows(), config) as eng:
        options = StartFlowOptions(timeout=MINUTE) if stop == "timeout" else None
        await eng.start_flow(ParentFlow, "quit", {"outcome": "hold"}, options)
        await clock.settle()
        if stop == "timeout":
            await clock.advance_when_idle(60)
        else:
            await eng.stop_flow("quit", StopType(stop))
        await clock.settle()
        parent = await eng.wait_for_flow("quit")
        assert (
            parent.status
            == {
                "CANCEL": "CANCELED",
                "TERMINATE": "TERMINATED",
                "FAIL": "FAILED",
                "timeout": "TIMED_OUT",
            }[stop]
        )
        assert (await eng.describe_flow(child_id("quit"))).status == "RUNNING"
        await eng.publish_to_channel(child_id("quit"), ChildFlow.release, "go")
        await clock.settle()
        child = await eng.wait_for_flow(child_id("quit"))
        assert child.status == "COMPLETED"
        assert child.completions[0].output == {"tag": "c0", "secret": None}


async def test_a_child_times_out_by_its_options_and_the_parent_reads_it(settings: Any) -> None:
    config, clock = manual_clock_config(settings)
    async with running_engine(flows(), config) as eng:
        await start_parent(eng, "slow", outcome="hold", child_timeout_seconds=90)
        await clock.advance_when_idle(89)
        assert (await eng.describe_flow(child_id("slow"))).status == "RUNNING"
        await clock.advance_when_idle(1)
        [seen] = await parent_saw(eng, "slow")
        assert (seen["status"], seen["outputs"]) == ("TIMED_OUT", [])


# -- the seed's reuse-policy table ----------------------------------------------------------

#: (existing child, policy) -> what the second parent run's SubFlow start does.
TABLE = {
    ("running", ATTACH): "attach",
    ("running", RESTART): "attach",
    ("running", ALWAYS): "terminate and start",
    ("completed", ATTACH): "result",
    ("completed", RESTART): "result",
    ("completed", ALWAYS): "start",
    ("failed", ATTACH): "result",
    ("failed", RESTART): "start",
    ("failed", ALWAYS): "start",
}


@pytest.mark.parametrize(("existing", "policy"), list(TABLE), ids=lambda v: str(v))
async def test_the_reuse_policy_table(
    engine_config: EngineConfig, existing: str, policy: SubFlowReusePolicy
) -> None:
    expected = TABLE[(existing, policy)]
    child = child_id("reused")
    async with running_engine(flows(), engine_config) as eng:
        # The first run of the parent's Flow ID leaves its child running, completed or failed.
        outcome = {"running": "hold", "completed": "complete", "failed": "fail"}[existing]
        first_parent = await start_parent(eng, "reused", outcome=outcome, policy=policy)
        await settle(eng)
        if existing == "running":
            await eng.stop_flow("reused", StopType.TERMINATE)
            await settle(eng)
        [(first_child, first_status)] = await runs_of(eng, child)
        assert (
            first_status
            == {"running": "RUNNING", "completed": "COMPLETED", "failed": "FAILED"}[existing]
        )
        # A new run of the parent's Flow ID enters the same Step execution (FanOut-1) and
        # derives the same SubFlow ID, with another Request ID (it names the new parent run).
        second_parent = await start_parent(eng, "reused", outcome="complete", policy=policy)
        await settle(eng)
        history = await events(eng, "reused", second_parent)
        [meeting] = [
            e
            for e in history
            if e.event_type.startswith("SUBFLOW_") and e.event_type != "SUBFLOW_CLOSED"
        ]
        runs = await runs_of(eng, child)
        if expected == "attach":
            assert meeting.event_type == "SUBFLOW_ATTACHED"
            assert runs == [(first_child, "RUNNING")]
            assert (await eng.wait_for_flow("reused")).status == "RUNNING"  # it waits for it
            await eng.publish_to_channel(child, ChildFlow.release, "go")
            await settle(eng)
            [seen] = await parent_saw(eng, "reused")
            assert (seen["runId"], seen["status"]) == (first_child, "COMPLETED")
            assert await runs_of(eng, child) == [(first_child, "COMPLETED")]
        elif expected == "result":
            assert meeting.event_type == "SUBFLOW_ATTACHED"
            [seen] = await parent_saw(eng, "reused")
            assert (seen["runId"], seen["status"]) == (first_child, first_status)
            assert runs == [(first_child, first_status)]
        else:
            assert meeting.event_type == "SUBFLOW_STARTED"
            [seen] = await parent_saw(eng, "reused")
            new_child = seen["runId"]
            assert new_child != first_child and seen["status"] == "COMPLETED"
            before = "TERMINATED" if expected == "terminate and start" else first_status
            assert runs == [(first_child, before), (new_child, "COMPLETED")]
        assert meeting.details["runId"] == seen["runId"]
        # ParentRunId names the run that started a child: an attached child is not the new one's.
        mine = await eng.search_flows(f"ParentRunId = '{second_parent}'")
        assert [f.run_id for f in mine.flows] == (
            [seen["runId"]] if meeting.event_type == "SUBFLOW_STARTED" else []
        )
        info = await eng.describe_flow(child, seen["runId"])
        # The run the second parent started names it; an attached run keeps its first parent.
        started_by = second_parent if meeting.event_type == "SUBFLOW_STARTED" else first_parent
        assert (info.parent_flow_id, info.parent_run_id) == ("reused", started_by)


async def test_no_existing_child_starts_under_every_policy(engine_config: EngineConfig) -> None:
    async with running_engine(flows(), engine_config) as eng:
        for policy in SubFlowReusePolicy:
            await start_parent(eng, f"fresh-{policy}", policy=policy)
        await settle(eng)
        for policy in SubFlowReusePolicy:
            [seen] = await parent_saw(eng, f"fresh-{policy}")
            assert seen["status"] == "COMPLETED"
            kinds = [e.event_type for e in await events(eng, f"fresh-{policy}")]
            assert kinds.count("SUBFLOW_STARTED") == 1 and "SUBFLOW_ATTACHED" not in kinds


async def test_a_restarted_subflow_starts_from_the_original_hard_delete_value(
    engine_config: EngineConfig,
) -> None:
    child = child_id("secret")
    async with running_engine(flows(), engine_config) as eng:
        await start_parent(eng, "secret", outcome="hold", secret="s1", policy=ALWAYS)
        await settle(eng)
        await eng.stop_flow("secret", StopType.TERMINATE)
        # The child run deletes its hard-delete value, then completes.
        await eng.invoke_rpc("forget_secret", child)
        await eng.publish_to_channel(child, ChildFlow.release, "go")
        await settle(eng)
        first = await eng.wait_for_flow(child)
        assert first.completions[0].output == {"tag": "c0", "secret": None}
        # The parent's Flow ID runs again and restarts the child with the same initial value:
        # the seed says the restarted SubFlow reads it as absent, since an earlier run deleted it.
        await start_parent(eng, "secret", secret="s1", policy=ALWAYS)
        await settle(eng)
        [seen] = await parent_saw(eng, "secret")
        assert seen["runId"] != first.run_id
        assert seen["outputs"] == [{"tag": "c0", "secret": None}]
        # A first start stores it as any start does.
        await start_parent(eng, "other", secret="s2")
        await settle(eng)
        assert (await parent_saw(eng, "other"))[0]["outputs"] == [{"tag": "c0", "secret": "s2"}]


# -- what a Step may ask of SubFlows --------------------------------------------------------


class Unregistered(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Noop())


class Noop(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class NoStartStep(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.empty()


class Misuse(Step[str]):
    def get_step_options(self) -> StepOptions:
        return ONCE

    def wait_for(self, context: Context, input: str) -> Wait:
        if input == "unregistered":
            return Wait.until(SubFlow.run(Unregistered, 1))
        if input == "no start step":
            return Wait.until(SubFlow.run(NoStartStep))
        if input == "bad input":
            return Wait.until(SubFlow.run(ChildFlow, {"tag": 5}))
        return Wait.until(
            SubFlow.run(
                ChildFlow, ChildInput(tag="x"), SubFlowOptions(initial_attributes={"nope": 1})
            )
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete()


class MisuseFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Misuse())


class IndexMisuse(Step[None]):
    def get_step_options(self) -> StepOptions:
        return ONCE

    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(SubFlow.run(ChildFlow, ChildInput(tag="x")))

    def execute(self, context: Context, input: None) -> StepDecision:
        SubFlow.get_condition_results(context, 1)
        return graceful_complete()


class IndexMisuseFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(IndexMisuse())


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unregistered", "runs Flow type Unregistered, which is not registered"),
        ("no start step", "runs Flow type NoStartStep, which has no start Step"),
        ("bad input", "cannot start: input"),
        ("unknown attribute", "cannot start: initialAttributes"),
    ],
)
async def test_a_subflow_that_cannot_start_fails_the_step_with_a_clear_error(
    engine_config: EngineConfig, case: str, message: str
) -> None:
    async with running_engine([MisuseFlow(), NoStartStep(), ChildFlow()], engine_config) as eng:
        await eng.start_flow(MisuseFlow, "misuse", case)
        await settle(eng)
        result = await eng.wait_for_flow("misuse")
        assert result.status == "FAILED"
        assert result.error_type == "InvalidStepResultError"
        assert message in (result.error_message or "")
        assert "SubFlow at index 0 of Misuse.wait_for" in (result.error_message or "")
        assert (await eng.search_flows("ParentFlowId = 'misuse'")).flows == []


async def test_reading_a_subflow_index_the_wait_has_not_is_an_error(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([IndexMisuseFlow(), ChildFlow()], engine_config) as eng:
        await eng.start_flow(IndexMisuseFlow, "index")
        await settle(eng)
        result = await eng.wait_for_flow("index")
        assert (result.status, result.error_type) == ("FAILED", "DefinitionError")
        assert "has no SubFlow at index 1 (its SubFlows are 0 to 0)" in (result.error_message or "")


def test_subflow_run_takes_flows_and_options_only() -> None:
    with pytest.raises(DefinitionError, match="takes a Flow or Flow class"):
        SubFlow.run("ChildFlow")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="takes SubFlowOptions"):
        SubFlow.run(ChildFlow, None, {"reuse_policy": "ATTACH"})  # type: ignore[arg-type]
    condition = SubFlow.run(ChildFlow(), ChildInput(tag="x"))
    assert condition.flow_type == "ChildFlow" and condition.options.reuse_policy == RESTART
    assert Wait.any_of(Timer.by_duration(MINUTE), condition).subflows() == [condition]


async def test_parentflowid_compares_with_strings(engine_config: EngineConfig) -> None:
    async with running_engine(flows(), engine_config) as eng:
        with pytest.raises(InvalidArgumentError, match="ParentFlowId compares with"):
            await eng.search_flows("ParentFlowId = 5")


# -- ready at once: Channels are chosen before SubFlows --------------------------------------


class Gate(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.go.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Pick)


class Pick(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        child = SubFlow.run(
            ChildFlow, ChildInput(tag="ranked"), SubFlowOptions(reuse_policy=ATTACH)
        )
        return Wait.any_of(child, self.flow.extra.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete(
            {
                "consumed": list(self.flow.extra.results(context)),
                "left": self.flow.extra.size(context),
                "child": str(SubFlow.get_condition_results(context).status),
            }
        )


class RankedFlow(Flow[None]):
    go = Channel("go", str)
    extra = Channel("extra", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Gate()).other_steps(Pick())


async def test_a_channel_ready_with_a_closed_child_wins_and_consumes(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([RankedFlow(), ChildFlow()], engine_config) as eng:
        first = await eng.start_flow(RankedFlow, "ranked")
        await eng.publish_to_channel("ranked", RankedFlow.go, "now")
        await settle(eng)
        # The child closes after the wait began: it wins alone, nothing is consumed.
        result = await eng.wait_for_flow("ranked")
        assert result.completions[0].output == {"consumed": [], "left": 0, "child": "COMPLETED"}
        # The Flow ID runs again: its Pick-1 meets the completed child (ATTACH: its result,
        # ready as the wait begins) while a message already waits in "extra". Channels are
        # chosen before SubFlows, so the message is consumed.
        options = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE)
        second = await eng.start_flow(RankedFlow, "ranked", None, options)
        assert second.run_id != first.run_id
        await eng.publish_to_channel("ranked", RankedFlow.extra, "first")
        await eng.publish_to_channel("ranked", RankedFlow.go, "now")
        await settle(eng)
        result = await eng.wait_for_flow("ranked")
        assert result.run_id == second.run_id
        assert result.completions[0].output == {
            "consumed": ["first"],
            "left": 0,
            "child": "COMPLETED",
        }
        assert len(await runs_of(eng, "SubFlow:ranked-Pick-1-0")) == 1
