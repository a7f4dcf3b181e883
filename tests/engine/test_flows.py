"""Flows and Steps: decisions, completions, initial Attributes, ID reuse, stop, timeouts,
retries, waits and recovery after a restart."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeMap,
    Context,
    Engine,
    EngineConfig,
    FailedPreconditionError,
    Flow,
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowTimeoutHandlerOptions,
    IdReusePolicy,
    InvalidArgumentError,
    ManualClock,
    Registry,
    RetryPolicy,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    StopType,
    Timer,
    Wait,
    dead_end,
    force_complete,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.backends import postgres_only, sqlite_only
from tests.support.flow_clients import ServeFlows


def manual(config: EngineConfig) -> tuple[EngineConfig, ManualClock]:
    """A config on a ManualClock; no retention, whose hourly check would be a deadline too."""
    clock = ManualClock()
    return dataclasses.replace(config, clock=clock, retention=None), clock


# -- a three-Step Flow, mixing sync and async handlers ---------------------------------------


class Fetch(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        self.flow.trail.set(context, [f"fetch:{input}"])
        return go_to(Transform, input.upper())


class Transform(Step[str]):
    async def execute(self, context: Context, input: str) -> StepDecision:
        trail = self.flow.trail.get(context) or []
        self.flow.trail.set(context, [*trail, f"transform:{input}"])
        return go_to(Store, {"value": input, "length": len(input)})


class Store(Step[dict[str, Any]]):
    def execute(self, context: Context, input: dict[str, Any]) -> StepDecision:
        trail = self.flow.trail.get(context) or []
        return graceful_complete({"stored": input["value"], "trail": [*trail, "store"]})


class PipelineFlow(Flow[str]):
    trail = Attribute("trail", list[str])

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Fetch()).other_steps(Transform(), Store())


async def test_flow_runs_its_steps_to_completion_and_reports_the_completion(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([PipelineFlow()]) as flows:
        started = await flows.start_flow(PipelineFlow, "p-1", "abc")
        assert started.started is True
        result = await flows.wait_for_flow("p-1", wait_seconds=10)
    assert result.status == "COMPLETED"
    assert result.run_id == started.run_id
    assert [c.step_type for c in result.completions] == ["Store"]
    assert result.completions[0].output == {
        "stored": "ABC",
        "trail": ["fetch:abc", "transform:ABC", "store"],
    }
    assert result.error_type is None


async def test_flow_input_is_validated_against_the_start_step_input(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([PipelineFlow()]) as flows:
        with pytest.raises(InvalidArgumentError, match="input"):
            await flows.start_flow(PipelineFlow, "p-bad", {"not": "a string"})
        with pytest.raises(FlowNotFoundError):
            await flows.describe_flow("p-bad")


# -- initial Attributes ----------------------------------------------------------------------


class ReadInitial(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete({"greeting": self.flow.greeting.get(context)})


class InitialFlow(Flow[None]):
    greeting = Attribute("greeting", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(ReadInitial())


async def test_initial_attributes_commit_with_the_start_and_the_first_step_sees_them(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([InitialFlow()]) as flows:
        await flows.start_flow(
            InitialFlow, "i-1", None, StartFlowOptions(initial_attributes={"greeting": "hello"})
        )
        result = await flows.wait_for_flow("i-1", wait_seconds=10)
    assert result.completions[0].output == {"greeting": "hello"}


async def test_initial_attributes_with_unknown_names_or_wrong_types_are_rejected(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([InitialFlow()]) as flows:
        with pytest.raises(InvalidArgumentError, match="no Attribute or AttributeMap named"):
            await flows.start_flow(
                InitialFlow, "i-2", None, StartFlowOptions(initial_attributes={"nope": 1})
            )
        with pytest.raises(InvalidArgumentError, match="greeting"):
            await flows.start_flow(
                InitialFlow, "i-2", None, StartFlowOptions(initial_attributes={"greeting": 5})
            )
        with pytest.raises(FlowNotFoundError):
            await flows.describe_flow("i-2")


# -- decisions -------------------------------------------------------------------------------


class Split(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Branch, "left"), StepMovement.of(Branch, "right"))


class Branch(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        # The right branch finishes a minute after the left one, on the engine's clock.
        if input == "right":
            return Wait.until(Timer.by_duration(timedelta(minutes=1)))
        return Wait.skip_immediately()

    async def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class ParallelFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Split()).other_steps(Branch())


async def test_go_to_many_runs_branches_and_the_flow_completes_after_the_last_one(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([ParallelFlow()], config) as eng:
        await eng.start_flow(ParallelFlow, "par", None)
        await settle(eng)
        # The left branch has completed; the run stays open for the right one.
        halfway = await eng.wait_for_flow("par")
        assert (halfway.status, [c.output for c in halfway.completions]) == ("RUNNING", ["left"])
        await clock.advance_when_idle()
        result = await eng.wait_for_flow("par")
    assert result.status == "COMPLETED"
    assert [c.output for c in result.completions] == ["left", "right"]


class Racer(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Slow, None), StepMovement.of(Decider, None))


class Slow(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        await asyncio.Event().wait()  # never set: only a cancellation ends this attempt
        return graceful_complete("slow")


class Decider(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        mode = self.flow.mode.get(context)
        if mode == "fail":
            return force_fail("gave up", error_type="GaveUp")
        if mode == "dead":
            return dead_end()
        return force_complete("decided")


class RaceFlow(Flow[None]):
    mode = Attribute("mode", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Racer()).other_steps(Slow(), Decider())


async def test_force_complete_completes_now_and_cancels_the_other_active_steps(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([RaceFlow()]) as flows:
        await flows.start_flow(RaceFlow, "race", None)
        result = await flows.wait_for_flow("race", wait_seconds=10)
        history = await flows.get_flow_history("race")
    assert result.status == "COMPLETED"
    assert [(c.step_type, c.output) for c in result.completions] == [("Decider", "decided")]
    closed = [e for e in history.events if e.event_type == "FLOW_CLOSED"]
    assert closed[0].details["status"] == "COMPLETED"


async def test_force_fail_fails_the_flow_with_the_error(serve_flows: ServeFlows) -> None:
    async with serve_flows([RaceFlow()]) as flows:
        await flows.start_flow(
            RaceFlow, "race-f", None, StartFlowOptions(initial_attributes={"mode": "fail"})
        )
        result = await flows.wait_for_flow("race-f", wait_seconds=10)
    assert (result.status, result.error_type, result.error_message) == (
        "FAILED",
        "GaveUp",
        "gave up",
    )
    assert result.completions == []


class OnlyDeadEnd(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return dead_end()


class DeadEndFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(OnlyDeadEnd())


async def test_dead_end_without_completions_leaves_the_flow_running(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([DeadEndFlow()], engine_config) as eng:
        await eng.start_flow(DeadEndFlow, "dead", None)
        await settle(eng)
        history = await eng.get_flow_history("dead")
        result = await eng.wait_for_flow("dead", wait_seconds=0)
    assert result.status == "RUNNING"
    assert [e.details.get("decision") for e in history.events if e.event_type == "STEP_CLOSED"] == [
        "DEAD_END"
    ]


class ReturnsGarbage(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return "not a decision"  # type: ignore[return-value]


class GarbageFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(ReturnsGarbage())


async def test_a_step_returning_no_decision_fails_the_flow_with_invalid_step_result(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([GarbageFlow()]) as flows:
        await flows.start_flow(GarbageFlow, "garbage", None)
        result = await flows.wait_for_flow("garbage", wait_seconds=10)
    assert (result.status, result.error_type) == ("FAILED", "InvalidStepResultError")


# -- ID reuse and request IDs ----------------------------------------------------------------


class Park(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        await asyncio.Event().wait()  # never set: the run stays open until stopped or closed
        return graceful_complete(None)


class ParkedFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Park())


class Quick(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        if self.flow.fail.get(context):
            raise RuntimeError("asked to fail")
        return graceful_complete("ok")


class QuickFlow(Flow[None]):
    fail = Attribute("fail", bool)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Quick())


async def test_starting_a_running_flow_id_raises_flow_already_started(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([ParkedFlow()]) as flows:
        first = await flows.start_flow(ParkedFlow, "dup", None)
        with pytest.raises(FlowAlreadyStartedError) as info:
            await flows.start_flow(ParkedFlow, "dup", None)
        assert info.value.run_id == first.run_id


async def test_same_request_id_with_ignore_already_started_returns_the_running_run(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([ParkedFlow()]) as flows:
        options = StartFlowOptions(request_id="req-1", ignore_already_started=True)
        first = await flows.start_flow(ParkedFlow, "idem", None, options)
        again = await flows.start_flow(ParkedFlow, "idem", None, options)
        assert (again.run_id, again.started) == (first.run_id, False)
        with pytest.raises(FlowAlreadyStartedError):
            await flows.start_flow(
                ParkedFlow,
                "idem",
                None,
                StartFlowOptions(request_id="req-2", ignore_already_started=True),
            )
        with pytest.raises(FlowAlreadyStartedError):
            await flows.start_flow(ParkedFlow, "idem", None, StartFlowOptions(request_id="req-1"))


async def test_allow_duplicate_starts_a_new_run_after_the_previous_one_closed(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([QuickFlow()]) as flows:
        first = await flows.start_flow(QuickFlow, "reuse", None)
        await flows.wait_for_flow("reuse", wait_seconds=10)
        second = await flows.start_flow(QuickFlow, "reuse", None)
        assert second.started and second.run_id != first.run_id
        assert (await flows.describe_flow("reuse")).run_id == second.run_id
        assert (await flows.describe_flow("reuse", first.run_id)).status == "COMPLETED"


async def test_reject_duplicate_refuses_any_second_run(serve_flows: ServeFlows) -> None:
    async with serve_flows([QuickFlow()]) as flows:
        await flows.start_flow(QuickFlow, "rej", None)
        await flows.wait_for_flow("rej", wait_seconds=10)
        with pytest.raises(FlowAlreadyStartedError, match="REJECT_DUPLICATE"):
            await flows.start_flow(
                QuickFlow,
                "rej",
                None,
                StartFlowOptions(id_reuse_policy=IdReusePolicy.REJECT_DUPLICATE),
            )


async def test_allow_duplicate_failed_only_restarts_only_after_a_failure(
    serve_flows: ServeFlows,
) -> None:
    policy = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY)
    async with serve_flows([QuickFlow()]) as flows:
        await flows.start_flow(QuickFlow, "ok-run", None)
        await flows.wait_for_flow("ok-run", wait_seconds=10)
        with pytest.raises(FlowAlreadyStartedError):
            await flows.start_flow(QuickFlow, "ok-run", None, policy)
        await flows.start_flow(
            QuickFlow, "bad-run", None, StartFlowOptions(initial_attributes={"fail": True})
        )
        assert (await flows.wait_for_flow("bad-run", wait_seconds=10)).status == "FAILED"
        assert (await flows.start_flow(QuickFlow, "bad-run", None, policy)).started


async def test_terminate_if_running_terminates_the_open_run_and_starts_a_new_one(
    serve_flows: ServeFlows,
) -> None:
    policy = StartFlowOptions(id_reuse_policy=IdReusePolicy.TERMINATE_IF_RUNNING)
    async with serve_flows([ParkedFlow()]) as flows:
        first = await flows.start_flow(ParkedFlow, "term", None)
        second = await flows.start_flow(ParkedFlow, "term", None, policy)
        assert second.started and second.run_id != first.run_id
        old = await flows.wait_for_flow("term", first.run_id, wait_seconds=5)
        assert old.status == "TERMINATED"
        assert (await flows.describe_flow("term")).status == "RUNNING"


# -- stop and timeouts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_type", "status"),
    [(StopType.CANCEL, "CANCELED"), (StopType.TERMINATE, "TERMINATED"), (StopType.FAIL, "FAILED")],
)
async def test_stop_closes_the_run_with_the_matching_status(
    serve_flows: ServeFlows, stop_type: StopType, status: str
) -> None:
    async with serve_flows([ParkedFlow()]) as flows:
        await flows.start_flow(ParkedFlow, "stop-me", None)
        await flows.stop_flow("stop-me", stop_type, "because")
        result = await flows.wait_for_flow("stop-me", wait_seconds=5)
        assert result.status == status
        assert result.error_message == "because"
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.stop_flow("stop-me")
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.stop_flow("never-started")


class Doze(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(days=1)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("woke")


class DozingFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Doze())


async def test_a_flow_timeout_closes_the_run_as_timed_out(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([DozingFlow()], config) as eng:
        await eng.start_flow(
            DozingFlow, "slowpoke", None, StartFlowOptions(timeout=timedelta(minutes=5))
        )
        await clock.advance_when_idle(299)
        assert (await eng.wait_for_flow("slowpoke")).status == "RUNNING"
        await clock.advance_when_idle(2)
        result = await eng.wait_for_flow("slowpoke")
    assert result.status == "TIMED_OUT"
    assert result.completions == []  # the Step's one-day Timer never fired


# -- retries, failure route, waits -----------------------------------------------------------


class Flaky(Step[None]):
    attempts: list[int] = []

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_retry=RetryPolicy(max_attempts=3, initial_interval=timedelta(seconds=10))
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        Flaky.attempts.append(context.attempt)
        if context.attempt < 3:
            raise ConnectionError(f"attempt {context.attempt} failed")
        return graceful_complete(context.attempt)


class FlakyFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Flaky())


async def test_failed_attempts_are_retried_with_backoff_on_the_engine_clock(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    Flaky.attempts = []
    async with running_engine([FlakyFlow()], config) as eng:
        await eng.start_flow(FlakyFlow, "flaky", None)
        await settle(eng)
        assert Flaky.attempts == [1]
        await clock.advance_when_idle(9)
        assert Flaky.attempts == [1]  # the first retry waits 10 s
        await clock.advance_when_idle(1)
        assert Flaky.attempts == [1, 2]
        await clock.advance_when_idle(19)
        assert Flaky.attempts == [1, 2]  # backoff doubles: the second retry waits 20 s
        await clock.advance_when_idle(1)
        result = await eng.wait_for_flow("flaky")
    assert Flaky.attempts == [1, 2, 3]
    assert (result.status, result.completions[0].output) == ("COMPLETED", 3)


class Breaks(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(failure_step=Recover)

    def execute(self, context: Context, input: None) -> StepDecision:
        raise ValueError("broken")


class Recover(Step[dict[str, Any]]):
    def execute(self, context: Context, input: dict[str, Any]) -> StepDecision:
        return graceful_complete({"recovered": input["errorType"], "from": input["stepType"]})


class FailureRouteFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Breaks()).other_steps(Recover())


async def test_a_step_failure_without_retries_left_takes_the_failure_route(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([FailureRouteFlow()]) as flows:
        await flows.start_flow(FailureRouteFlow, "route", None)
        result = await flows.wait_for_flow("route", wait_seconds=10)
    assert result.status == "COMPLETED"
    assert result.completions[0].output == {"recovered": "ValueError", "from": "Breaks"}


async def test_a_step_failure_without_a_failure_route_fails_the_flow(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([QuickFlow()]) as flows:
        await flows.start_flow(
            QuickFlow, "fails", None, StartFlowOptions(initial_attributes={"fail": True})
        )
        result = await flows.wait_for_flow("fails", wait_seconds=10)
    assert (result.status, result.error_type, result.error_message) == (
        "FAILED",
        "RuntimeError",
        "asked to fail",
    )


class Sleepy(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(hours=1)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("woke")


class Eager(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.skip_immediately()

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Sleepy, None)


class WaitFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Eager()).other_steps(Sleepy())


async def test_wait_for_skip_runs_execute_at_once_and_a_timer_waits_on_the_clock(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    started_at = clock.now()
    async with running_engine([WaitFlow()], config) as eng:
        await eng.start_flow(WaitFlow, "waits", None)
        await settle(eng)
        assert (await eng.wait_for_flow("waits", wait_seconds=0)).status == "RUNNING"
        waiting = await eng.get_flow_history("waits")
        await clock.advance_when_idle(3600)
        result = await eng.wait_for_flow("waits", wait_seconds=0)
    assert (result.status, [c.output for c in result.completions]) == ("COMPLETED", ["woke"])
    timer = [e.details for e in waiting.events if e.event_type == "STEP_WAITING"]
    # The wait began at the clock's start (nothing advanced it yet) and lasts one hour; the
    # history says when it ends as an RFC 3339 time, as it says every time.
    assert started_at == 1_800_000_000  # 2027-01-15T08:00:00Z
    assert [(d["stepType"], d["dueAt"]) for d in timer] == [("Sleepy", "2027-01-15T09:00:00Z")]


# -- recovery --------------------------------------------------------------------------------


class Resumable(Step[None]):
    runs: list[str] = []
    hang = True
    entered = asyncio.Event()

    async def execute(self, context: Context, input: None) -> StepDecision:
        Resumable.runs.append(context.step_execution_id or "")
        Resumable.entered.set()
        if Resumable.hang:
            await asyncio.Event().wait()  # never set: the engine's close cancels it
        return graceful_complete("resumed")


class ResumableFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Resumable())


async def test_a_restarted_engine_resumes_running_flows_from_the_same_database(
    engine_config: EngineConfig,
) -> None:
    Resumable.runs, Resumable.hang, Resumable.entered = [], True, asyncio.Event()
    async with running_engine([ResumableFlow()], engine_config) as eng:
        await eng.start_flow(ResumableFlow, "resume", None)
        await asyncio.wait_for(Resumable.entered.wait(), 10)
    Resumable.hang = False
    async with running_engine([ResumableFlow()], engine_config) as eng:
        assert eng.recovered_steps == 1
        result = await eng.wait_for_flow("resume", wait_seconds=10)
    assert result.status == "COMPLETED"
    assert len(Resumable.runs) == 2 and Resumable.runs[0] == Resumable.runs[1]


class Cleanup(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        await asyncio.Event().wait()  # never set: only the Flow timeout ends this run
        return graceful_complete(None)


class CleansUpFlow(Flow[None]):
    status = Attribute("status", str)
    notes = AttributeMap("notes", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Cleanup())

    def get_timeout_handler_options(self) -> FlowTimeoutHandlerOptions:
        return FlowTimeoutHandlerOptions(load_attribute_map_instances=(self.notes.load("why"),))

    async def handle_timeout(self, context: Context) -> None:
        self.status.set(context, f"timed out while {self.notes.get(context, 'why')}")


async def test_handle_timeout_writes_commit_with_the_timed_out_close(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([CleansUpFlow()], config) as eng:
        await eng.start_flow(
            CleansUpFlow,
            "cleanup",
            None,
            StartFlowOptions(
                timeout=timedelta(seconds=30), initial_attributes={"notes/why": "waiting"}
            ),
        )
        clock.advance(31)
        result = await eng.wait_for_flow("cleanup", wait_seconds=5)
        values = (await eng.get_attributes("cleanup", ["status"])).values
    assert result.status == "TIMED_OUT"
    assert values == {"status": "timed out while waiting"}


@sqlite_only("the claim on the database file")
async def test_a_second_engine_on_the_same_sqlite_file_is_refused(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([QuickFlow()], engine_config):
        second = Engine(Registry([QuickFlow()]), engine_config)
        with pytest.raises(FailedPreconditionError, match="already served by process"):
            await second.start()
    # Once the first has closed, the file is free again.
    async with running_engine([QuickFlow()], engine_config) as eng:
        await eng.start_flow(QuickFlow, "after", None)
        assert (await eng.wait_for_flow("after", wait_seconds=5)).status == "COMPLETED"


@postgres_only("several engines serve one database")
async def test_two_engines_on_one_postgres_database_serve_it_together(
    engine_config: EngineConfig,
) -> None:
    async with (
        running_engine([ParkedFlow()], engine_config) as first,
        running_engine([ParkedFlow()], engine_config) as second,
    ):
        started = await first.start_flow(ParkedFlow, "shared", None)
        waiting = asyncio.create_task(second.wait_for_flow("shared", wait_seconds=30))
        with pytest.raises(FlowAlreadyStartedError):
            await second.start_flow(ParkedFlow, "shared", None)
        await first.stop_flow("shared", "CANCEL", "done")
        # The other engine's waiter wakes on a commit it did not make.
        result = await waiting
    assert (result.status, result.run_id) == ("CANCELED", started.run_id)
