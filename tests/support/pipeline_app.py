"""An app factory serving a three-Step Flow, for tests that kill a server mid-run.

Served with ``PIPELINE_HOLD=1`` in its environment, the server completes only the Flows whose
input is a multiple of 4 and holds every other one inside a Step (First, Second or Third, by
``held_in``) until the process dies, so a test can SIGKILL it at a known point. Served without
it, every Flow runs straight through. Each decision commits the Step's name to ``stage``, an
indexed Attribute, so a search tells which decisions have committed.
"""

from __future__ import annotations

import asyncio
import os
import threading

from fastapi import FastAPI

from app.main import create_app
from engine import (
    Attribute,
    AttributeIndex,
    Context,
    Flow,
    IndexType,
    Registry,
    Step,
    StepDecision,
    StepList,
    go_to,
)
from engine import graceful_complete as complete

HOLD_ENV = "PIPELINE_HOLD"
STEPS = ("First", "Second", "Third")


def held_in(input: int) -> str | None:
    """Return the Step a holding server keeps the Flow of ``input`` in (None: it completes)."""
    return None if input % 4 == 0 else STEPS[input % 4 - 1]


def _passed(step: Step[int], context: Context) -> None:
    flow = step.flow
    assert isinstance(flow, PipelineFlow)
    name = type(step).__name__
    flow.trail.set(context, [*(flow.trail.get(context) or []), name])
    flow.stage.set(context, name)


class First(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        if self.flow.hold and held_in(input) == "First":
            await asyncio.Event().wait()  # never set: held until the process is killed
        _passed(self, context)
        return go_to(Second, input)


class Second(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        if self.flow.hold and held_in(input) == "Second":
            threading.Event().wait()  # never set: this worker thread dies with the process
        _passed(self, context)
        return go_to(Third, input)


class Third(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        if self.flow.hold and held_in(input) == "Third":
            await asyncio.Event().wait()  # never set: held until the process is killed
        _passed(self, context)
        return complete(input * 10)


class PipelineFlow(Flow[int]):
    trail = Attribute("trail", list[str])
    stage = Attribute("stage", str, index=AttributeIndex(IndexType.KEYWORD, "keyword1"))
    #: Whether this server holds Flows mid-Step (see the module docstring).
    hold = False

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(First()).other_steps(Second(), Third())


def registry() -> Registry:
    """Return the Registry of PipelineFlow (``DEXLITE_REGISTRY`` for ``dexlite serve``)."""
    flow = PipelineFlow()
    flow.hold = os.environ.get(HOLD_ENV) == "1"
    return Registry([flow])


def create() -> FastAPI:
    """Return the app serving PipelineFlow (used as `uvicorn --factory`)."""
    return create_app(registry=registry())
