"""DigestFlow: what a Schedule starts each time, one Step that sends a digest and completes.

The Schedule ``primitive-schedule`` (created by the example's start route) starts a
DigestFlow every few seconds under the Flow ID ``primitive-schedule-<time>``; each run finds
its Schedule through the search field ``ScheduleId``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import Context, Flow, Step, StepDecision, StepList, graceful_complete


class DigestInput(BaseModel):
    """The digest each run sends."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    topic: str = Field(default="news", min_length=1, max_length=100)


class SendDigest(Step[DigestInput]):
    """Send the digest and complete."""

    def execute(self, context: Context, input: DigestInput) -> StepDecision:
        """Complete with what was sent."""
        return graceful_complete(f"digest of {input.topic} sent")


class DigestFlow(Flow[DigestInput]):
    """One Step: a scheduled action that finishes at once."""

    def get_steps(self) -> StepList[DigestInput]:
        """The one Step."""
        return StepList.start_step(SendDigest())
