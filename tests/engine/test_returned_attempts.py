"""An attempt handed back because the runtime failed (not its handler) keeps its locks while
it waits to run again, as retries do (seed 002: returned and retry attempts keep them)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from engine import (
    Attribute,
    Channel,
    Context,
    EngineConfig,
    Flow,
    ManualClock,
    RPCLockConflictError,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine


def _versions() -> tuple[Flow[Any], Flow[Any]]:
    """The same Flow type twice: v1 stores text under ``count``, v2 declares it an int (a
    deploy that changed a type without migrating the value: v2 cannot decode it)."""

    class Work(Step[None]):
        def get_step_options(self) -> StepOptions:
            return StepOptions(execute_lock_attributes=(self.flow.count.lock(),))

        def wait_for(self, context: Context, input: None) -> Wait:
            return Wait.until(self.flow.go.for_one())

        def execute(self, context: Context, input: None) -> StepDecision:
            return graceful_complete(None)

    class Ledger(Flow[None]):  # v1
        count = Attribute("count", str)
        go = Channel("go", str)

        def get_steps(self) -> StepList[None]:
            return StepList.start_step(Work())

    v1 = Ledger()

    class Ledger(Flow[None]):  # type: ignore[no-redef]  # v2, the same Flow type
        count = Attribute("count", int)
        go = Channel("go", str)

        def get_steps(self) -> StepList[None]:
            return StepList.start_step(Work())

        @rpc(lock_attributes=(count.lock(),))
        def reset(self, context: Context) -> RPCResult[None]:
            self.count.set(context, 0)
            return RPCResult(None)

    return v1, Ledger()


async def test_a_runtime_failure_hands_the_attempt_back_with_its_locks_held(
    engine_config: EngineConfig,
) -> None:
    v1, v2 = _versions()
    config = dataclasses.replace(engine_config, clock=ManualClock(), retention=None)
    async with running_engine([v1], config) as eng:
        options = StartFlowOptions(initial_attributes={"count": "not a number"})
        await eng.start_flow("Ledger", "l", options=options)
        await settle(eng)  # the Step waits on its Channel
    async with running_engine([v2], config) as eng:
        await eng.publish_to_channel("l", "go", "now")
        await settle(eng)  # execute took the lock, then failed to decode its snapshot
        with pytest.raises(RPCLockConflictError, match="locked by a Step"):
            await eng.invoke_rpc("reset", "l")
