"""A parent Flow fanning out to child Flows, for the SubFlow tests in-process and over HTTP.

A child completes at once, fails, or holds until a message reaches its ``release`` Channel,
so a test decides when (and whether) a child closes. The parent's only Step waits on its
children (all of them, or any of them and a Timer) and completes with what it saw of each.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

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
    SubFlow,
    SubFlowOptions,
    SubFlowReusePolicy,
    Timer,
    Wait,
    force_fail,
    graceful_complete,
    rpc,
)

Outcome = Literal["complete", "fail", "hold"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class ChildInput(_Model):
    tag: str
    outcome: Outcome = "complete"


class ChildWork(Step[ChildInput]):
    def wait_for(self, context: Context, input: ChildInput) -> Wait:
        if input.outcome == "hold":
            return Wait.until(self.flow.release.for_one())
        return Wait.skip_immediately()

    def execute(self, context: Context, input: ChildInput) -> StepDecision:
        if input.outcome == "fail":
            return force_fail(f"child {input.tag} failed", error_type="ChildFailed")
        return graceful_complete({"tag": input.tag, "secret": self.flow.secret.get(context)})


class ChildFlow(Flow[ChildInput]):
    """Completes with its tag (and its hard-delete secret), fails, or holds until released."""

    release = Channel("release", str)
    secret = Attribute("secret", str, hard_delete_on_null=True)

    def get_steps(self) -> StepList[ChildInput]:
        return StepList.start_step(ChildWork())

    @rpc
    def forget_secret(self, context: Context) -> None:
        self.secret.set(context, None)


class ParentInput(_Model):
    children: int = 1
    outcome: Outcome = "complete"
    policy: SubFlowReusePolicy = SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
    #: With a value, the wait is any_of(Timer of that many seconds, children...).
    race_timer_seconds: float | None = None
    secret: str | None = None
    child_timeout_seconds: float | None = None


class FanOut(Step[ParentInput]):
    def wait_for(self, context: Context, input: ParentInput) -> Wait:
        initial = {} if input.secret is None else {"secret": input.secret}
        timeout = (
            None
            if input.child_timeout_seconds is None
            else timedelta(seconds=input.child_timeout_seconds)
        )
        options = SubFlowOptions(
            reuse_policy=input.policy, initial_attributes=initial, timeout=timeout
        )
        children = [
            SubFlow.run(ChildFlow, ChildInput(tag=f"c{i}", outcome=input.outcome), options)
            for i in range(input.children)
        ]
        if input.race_timer_seconds is not None:
            timer = Timer.by_duration(timedelta(seconds=input.race_timer_seconds))
            return Wait.any_of(timer, *children)
        return Wait.all_of(*children)

    def execute(self, context: Context, input: ParentInput) -> StepDecision:
        seen = [seen_child(context, index) for index in range(input.children)]
        return graceful_complete(seen)


def seen_child(context: Context, index: int) -> dict[str, Any]:
    """What the parent's ``execute`` read of its SubFlow at ``index``."""
    result = SubFlow.get_condition_results(context, index)
    assert SubFlow.get_flow_id(context, index) == result.flow_id
    return {
        "flowId": result.flow_id,
        "runId": result.run_id,
        "status": str(result.status),
        "outputs": [c.output for c in result.completions],
        "errorType": result.error_type,
        "errorMessage": result.error_message,
    }


class ParentFlow(Flow[ParentInput]):
    """Starts ``children`` ChildFlows and completes with what it saw of each."""

    def get_steps(self) -> StepList[ParentInput]:
        return StepList.start_step(FanOut())


def flows() -> list[Flow[Any]]:
    """Return fresh instances of the parent and child Flows."""
    return [ParentFlow(), ChildFlow()]


def create() -> FastAPI:
    """Return the app serving ParentFlow and ChildFlow (used as `uvicorn --factory`)."""
    return create_app(registry=Registry(flows()))
