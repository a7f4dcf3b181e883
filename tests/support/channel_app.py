"""An app factory serving a Flow that waits on a Channel, for tests that kill a server."""

from __future__ import annotations

from datetime import timedelta

from fastapi import FastAPI

from app.main import create_app
from engine import (
    Attribute,
    Channel,
    Context,
    Flow,
    Registry,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    graceful_complete,
)


class AwaitOrder(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.any_of(Timer.by_duration(timedelta(hours=1)), self.flow.orders.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        taken = list(self.flow.orders.results(context))
        self.flow.taken.set(context, taken)
        return graceful_complete(taken)


class OrderDeskFlow(Flow[None]):
    orders = Channel("orders", str)
    taken = Attribute("taken", list[str])

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(AwaitOrder())


def registry() -> Registry:
    """Return the Registry the test server serves."""
    return Registry([OrderDeskFlow()])


def create() -> FastAPI:
    """Return the app serving OrderDeskFlow (used as `uvicorn --factory`)."""
    return create_app(registry=registry())
