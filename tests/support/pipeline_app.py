"""An app factory serving a three-Step Flow, for tests that kill a server mid-run."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI

from app.main import create_app
from engine import Attribute, Context, Flow, Registry, Step, StepDecision, StepList, go_to
from engine import graceful_complete as complete


class First(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        await asyncio.sleep(0.1)
        self.flow.trail.set(context, ["First"])
        return go_to(Second, input)


class Second(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        self.flow.trail.set(context, [*(self.flow.trail.get(context) or []), "Second"])
        return go_to(Third, input)


class Third(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        # A third of the Flows finish at once, the rest later: a kill lands between them.
        await asyncio.sleep(0.5 * (input % 3))
        self.flow.trail.set(context, [*(self.flow.trail.get(context) or []), "Third"])
        return complete(input * 10)


class PipelineFlow(Flow[int]):
    trail = Attribute("trail", list[str])

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(First()).other_steps(Second(), Third())


def create() -> FastAPI:
    """Return the app serving PipelineFlow (used as `uvicorn --factory`)."""
    return create_app(registry=Registry([PipelineFlow()]))
