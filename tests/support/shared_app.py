"""Flows for the tests that run two server processes on one PostgreSQL database.

``HoldFlow``'s Step takes the ``counter`` lock and holds it until the gate file the Flow's
input names exists (so a test decides when it ends, even after its process was killed); its
decision adds one to ``counter``, so the Attribute counts the decisions that committed, and
moves on to a Step that holds no lock and keeps the run open.
``OrderDeskFlow`` waits on a Channel; ``SpawnFlow`` waits for a ``GatedChild`` SubFlow.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from fastapi import FastAPI

from app.main import create_app
from engine import (
    Attribute,
    Channel,
    Context,
    Flow,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    SubFlow,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)

GATE_POLL_SECONDS = 0.05


class Hold(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.counter.lock(),))

    async def execute(self, context: Context, input: str) -> StepDecision:
        # The app waits for the test's gate file: a file, so that it outlives this process
        # (no event can cross from the test into a server it has killed and replaced).
        while not await asyncio.to_thread(Path(input).exists):  # noqa: ASYNC110
            await asyncio.sleep(GATE_POLL_SECONDS)
        self.flow.counter.set(context, (self.flow.counter.get(context) or 0) + 1)
        return go_to(Rest, input)


class Rest(Step[str]):
    """Keeps the run open, holding nothing, until a message on ``done``."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(self.flow.done.for_one())

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(None)


class HoldFlow(Flow[str]):
    counter = Attribute("counter", int)
    done = Channel("done", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Hold()).other_steps(Rest())

    @rpc(lock_attributes=(counter.lock(),))
    def bump(self, context: Context, input: int) -> RPCResult[int]:
        value = (self.counter.get(context) or 0) + input
        self.counter.set(context, value)
        return RPCResult(value)


class AwaitOrder(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.any_of(Timer.by_duration(timedelta(hours=1)), self.flow.orders.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete(list(self.flow.orders.results(context)))


class OrderDeskFlow(Flow[None]):
    orders = Channel("orders", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(AwaitOrder())


class Gated(Step[str]):
    async def execute(self, context: Context, input: str) -> StepDecision:
        while not await asyncio.to_thread(Path(input).exists):  # noqa: ASYNC110 (see Hold)
            await asyncio.sleep(GATE_POLL_SECONDS)
        return graceful_complete(f"done after {input}")


class GatedChild(Flow[str]):
    """Completes once the gate file its input names exists."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Gated())


class Spawn(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(SubFlow.run(GatedChild, input))

    def execute(self, context: Context, input: str) -> StepDecision:
        child = SubFlow.get_condition_results(context, 0)
        return graceful_complete([str(child.status), [c.output for c in child.completions]])


class SpawnFlow(Flow[str]):
    """Starts one GatedChild and completes with its status and outputs."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Spawn())


def registry() -> Registry:
    """Return the Registry both test servers serve."""
    return Registry([HoldFlow(), OrderDeskFlow(), SpawnFlow(), GatedChild()])


def create() -> FastAPI:
    """Return the app (``uvicorn --factory tests.support.shared_app:create``)."""
    return create_app(registry=registry())
