"""Step execution IDs are deterministic within a run: ``<StepType>-<n>``, n counting that Step
type's executions from 1, as in Dex; a new run of the Flow ID counts from 1 again."""

from __future__ import annotations

from engine import (
    Context,
    EngineConfig,
    Flow,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Stream,
    go_to,
    go_to_many,
    graceful_complete,
)
from engine.testing import settle
from tests.conftest import running_engine


class Ping(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        self.flow.trace.write(context, f"{context.step_execution_id} got {input}")
        if input >= 2:
            return go_to_many(StepMovement.of(Pong, input), StepMovement.of(Pong, input + 1))
        return go_to(Pong, input)


class Pong(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        if input < 2:
            return go_to(Ping, input + 1)
        return graceful_complete(context.step_execution_id)


class PingPongFlow(Flow[int]):
    trace = Stream("trace", str)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Ping()).other_steps(Pong())


async def test_execution_ids_count_each_step_type_within_the_run(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([PingPongFlow()], engine_config) as eng:
        await eng.start_flow(PingPongFlow, "pp", 1)
        await settle(eng)
        result = await eng.wait_for_flow("pp")
        history = (await eng.get_flow_history("pp")).events
        page = await eng.list_stream_messages("pp", PingPongFlow.trace, 10)
        # The same Flow ID run again counts from 1 again.
        await eng.start_flow(PingPongFlow, "pp", 5)
        await settle(eng)
        again = await eng.wait_for_flow("pp")
    closed = [e.details["stepExecutionId"] for e in history if e.event_type == "STEP_CLOSED"]
    # Pong-2 and Pong-3 run side by side, so they may close in either order.
    assert closed[:3] == ["Ping-1", "Pong-1", "Ping-2"]
    assert sorted(closed[3:]) == ["Pong-2", "Pong-3"]
    assert sorted(c.step_execution_id for c in result.completions) == ["Pong-2", "Pong-3"]
    assert sorted(c.output for c in result.completions) == ["Pong-2", "Pong-3"]
    messages = [(m.source, m.value) for m in reversed(page.messages)]
    assert messages == [("#Ping-1", "Ping-1 got 1"), ("#Ping-2", "Ping-2 got 2")]
    assert sorted(c.step_execution_id for c in again.completions) == ["Pong-1", "Pong-2"]
    assert again.run_id != result.run_id
