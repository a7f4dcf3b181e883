"""ProgressFlow: one async Step writes a progress message per section, then completes.

Stream messages are sent the moment the Step writes them, not with its result, so a reader
sees each section as it is done. They are best effort and live in the server's memory.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import Context, Flow, Step, StepDecision, StepList, Stream, graceful_complete

DEFAULT_SECTIONS = 5
DEFAULT_DELAY_SECONDS = 0.5
MAX_SECTIONS = 100
MAX_DELAY_SECONDS = 10.0


class ProgressInput(BaseModel):
    """How much work the Step simulates: ``sections`` sections, ``delay_seconds`` each."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    sections: int = Field(default=DEFAULT_SECTIONS, ge=1, le=MAX_SECTIONS)
    delay_seconds: float = Field(default=DEFAULT_DELAY_SECONDS, ge=0, le=MAX_DELAY_SECONDS)


def progress_text(section: int, sections: int) -> str:
    """Return the progress message written when ``section`` of ``sections`` is done."""
    return f"section {section} of {sections} done"


class WriteProgress(Step[ProgressInput]):
    """Work through the sections, writing one Stream message after each."""

    async def execute(self, context: Context, input: ProgressInput) -> StepDecision:
        """Write ``section N of M done`` per section, then complete with a summary."""
        for section in range(1, input.sections + 1):
            # The await stands for real work; it is also where a cancel would stop the Step.
            await asyncio.sleep(input.delay_seconds)
            # No await: the message goes out now, and stays even if the Step fails later.
            self.flow.progress.write(context, progress_text(section, input.sections))
        return graceful_complete(f"{input.sections} sections done")


class ProgressFlow(Flow[ProgressInput]):
    """A Flow whose only Step reports its progress on the ``progress`` Stream."""

    progress: Stream[str] = Stream("progress", str)

    def get_steps(self) -> StepList[ProgressInput]:
        """Start with WriteProgress."""
        return StepList.start_step(WriteProgress())
