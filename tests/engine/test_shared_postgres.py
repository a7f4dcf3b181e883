"""Two engines on one PostgreSQL database (two "processes" in one test process): a takeover
fences off the superseded attempt, and commit notices wake waiters of the other engine."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from engine import (
    Attribute,
    Context,
    EngineConfig,
    Flow,
    MatchOperator,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    graceful_complete,
    rpc,
)
from engine.testing import settle, waiting_calls
from tests.conftest import running_engine
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

pytestmark = postgres_only("several engines share one PostgreSQL database")


@dataclasses.dataclass
class Attempts:
    """The Count attempts of one test, handed to the CountFlow of each of its engines."""

    #: The attempts (the engine they ran in, their Step execution ID), in the order they
    #: entered.
    entered: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: One gate per attempt, in the order the attempts entered.
    gates: list[asyncio.Event] = dataclasses.field(
        default_factory=lambda: [asyncio.Event(), asyncio.Event()]
    )


class Count(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.counter.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        attempts = self.flow.attempts
        attempts.entered.append((self.flow.engine, context.step_execution_id))
        await attempts.gates[len(attempts.entered) - 1].wait()
        self.flow.counter.set(context, (self.flow.counter.get(context) or 0) + 1)
        return graceful_complete(None)


class CountFlow(Flow[None]):
    counter = Attribute("counter", int)

    def __init__(self, attempts: Attempts, engine: str) -> None:
        self.attempts = attempts
        #: Which of the test's engines serves this instance.
        self.engine = engine

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Count())


class StatusFlow(Flow[None]):
    status = Attribute("status", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def set_status(self, context: Context, input: str) -> RPCResult[None]:
        self.status.set(context, input)
        return RPCResult(None)


async def _sql(url: str, statement: str, **params: str) -> list[Any]:
    db = create_async_engine(url)
    try:
        async with db.begin() as conn:
            result = await conn.execute(text(statement), params)
            return list(result.scalars()) if result.returns_rows else []
    finally:
        await db.dispose()


async def _claimant(url: str, flow_id: str) -> str:
    """Return the process whose claim runs ``flow_id``'s Step."""
    found = await _sql(
        url,
        "SELECT se.claimed_by FROM step_executions se JOIN runs r ON r.run_id = se.run_id "
        "WHERE r.flow_id = :f",
        f=flow_id,
    )
    return str(found[0])


async def _expire(url: str, process_id: str) -> None:
    """End the lease of ``process_id`` (as if it had died)."""
    await _sql(url, "UPDATE processes SET lease_expires_at = 0 WHERE process_id = :p", p=process_id)


async def test_a_taken_over_attempt_commits_once_and_the_superseded_one_is_refused(
    engine_config: EngineConfig,
) -> None:
    attempts = Attempts()
    # A lease far longer than the test: only the test's _expire ends one. With the suite's
    # short lease a busy machine can delay a renewal past it, and the first engine would then
    # take the Step back from the second (correctly, under a new claim).
    config = dataclasses.replace(engine_config, lease_seconds=300.0)
    async with (
        running_engine([CountFlow(attempts, "first")], config) as first,
        running_engine([CountFlow(attempts, "second")], config) as second,
    ):
        await first.start_flow(CountFlow, "fenced", None)  # first's commit claims the Step
        await eventually(lambda: len(attempts.entered) == 1, what="the first attempt to run")

        url = engine_config.database_url
        holder = await _claimant(url, "fenced")

        async def taken_over() -> bool:
            # The first engine renews its lease: end it until the other has taken the Step.
            await _expire(url, holder)
            return len(attempts.entered) == 2

        await eventually(taken_over, what="the other engine to take the Step over")
        attempts.gates[0].set()  # the superseded attempt returns first: its commit must be refused
        await settle(first)
        meanwhile = await second.describe_flow("fenced")
        attempts.gates[1].set()
        result = await second.wait_for_flow("fenced", wait_seconds=30)
        values = await first.get_attributes("fenced", ["counter"])
        history = (await second.get_flow_history("fenced")).events
    assert attempts.entered == [("first", "Count-1"), ("second", "Count-1")]
    assert await _claimant(url, "fenced") != holder
    assert meanwhile.status == "RUNNING"
    assert result.status == "COMPLETED"
    assert values.values == {"counter": 1}
    assert [e.event_type for e in history].count("STEP_CLOSED") == 1


async def test_a_match_waiter_wakes_on_a_commit_of_the_other_engine(
    engine_config: EngineConfig,
) -> None:
    async with (
        running_engine([StatusFlow()], engine_config) as first,
        running_engine([StatusFlow()], engine_config) as second,
    ):
        await first.start_flow(StatusFlow, "s", None)
        waiting = asyncio.create_task(
            second.wait_for_attribute_match("s", "status", MatchOperator.EQ, "go", wait_seconds=30)
        )
        # Registered (it reads the value right after): the commit is the other engine's.
        await eventually(
            lambda: waiting_calls(second).attribute_matches == 1, what="the match waiter"
        )
        await first.invoke_rpc("set_status", "s", "go")
        match = await waiting
    assert (match.matched, match.value) == (True, "go")
