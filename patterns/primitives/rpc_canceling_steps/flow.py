"""ReportFlow: GenerateReport writes a report section by section; ``stop_report`` cancels it.

The RPC decides from its snapshot whether there is anything left to stop, but the Steps to
cancel are chosen when it commits. GenerateReport can commit the finished report in between,
and then the cancellation finds nothing. So the RPC does not decide the outcome: it starts
FinishReportStop, which reads the committed status. If the report made it, the Stop came too
late and DeliverReport completes the Flow; otherwise FinishReportStop records the stop.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    Context,
    Flow,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Stream,
    dead_end,
    go_to,
    graceful_complete,
    rpc,
)

REPORT_GENERATING = "generating"
REPORT_READY = "ready"
REPORT_STOPPED = "stopped"

DEFAULT_SECTIONS = 5
DEFAULT_SECTION_SECONDS = 1.0
DEFAULT_DELIVERY_SECONDS = 1.0
MAX_SECTIONS = 50
MAX_SECONDS = 10.0


class ReportInput(BaseModel):
    """How long the simulated work takes: per report section, and for the delivery."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    sections: int = Field(default=DEFAULT_SECTIONS, ge=1, le=MAX_SECTIONS)
    section_seconds: float = Field(default=DEFAULT_SECTION_SECONDS, ge=0, le=MAX_SECONDS)
    delivery_seconds: float = Field(default=DEFAULT_DELIVERY_SECONDS, ge=0, le=MAX_SECONDS)


def section_text(section: int) -> str:
    """Return the text of report section ``section``."""
    return f"Section {section}"


class GenerateReport(Step[ReportInput]):
    """Write the report section by section, reporting each one on the progress Stream."""

    async def execute(self, context: Context, input: ReportInput) -> StepDecision:
        """Write every section, then mark the report READY and hand it to DeliverReport."""
        sections: list[str] = []
        for section in range(1, input.sections + 1):
            # A Stop cancels this task, so the await raises CancelledError.
            await asyncio.sleep(input.section_seconds)
            sections.append(section_text(section))
            self.flow.report_progress.write(context, section)
        # Staged writes commit with the decision, so a canceled attempt leaves no report.
        self.flow.report.set(context, sections)
        self.flow.report_status.set(context, REPORT_READY)
        # Completing here would close the Flow, and a Stop that read its snapshot before this
        # commit would then fail. Delivery keeps the Flow running, so that Stop commits and its
        # FinishReportStop sees READY.
        return go_to(DeliverReport, input)


class DeliverReport(Step[ReportInput]):
    """Deliver the finished report (simulated) and complete with it."""

    async def execute(self, context: Context, input: ReportInput) -> StepDecision:
        """Take ``delivery_seconds``, then complete the Flow with the report's sections."""
        await asyncio.sleep(input.delivery_seconds)
        return graceful_complete(self.flow.report.get(context))


class FinishReportStop(Step[None]):
    """Record a Stop, unless the report committed before the cancellation."""

    def execute(self, context: Context, input: None) -> StepDecision:
        """Dead-end when the report is READY (DeliverReport completes); else record STOPPED."""
        # The report can commit after stop_report read its snapshot.
        if self.flow.report_status.get(context) == REPORT_READY:
            return dead_end()
        self.flow.report_status.set(context, REPORT_STOPPED)
        return graceful_complete(REPORT_STOPPED)


class ReportFlow(Flow[ReportInput]):
    """A report that a ``stop_report`` RPC can stop while it is being written."""

    report_status: Attribute[str] = Attribute("report-status", str)
    report: Attribute[list[str]] = Attribute("report", list[str])
    report_progress: Stream[int] = Stream("report-progress", int)

    def get_steps(self) -> StepList[ReportInput]:
        """Start with GenerateReport; DeliverReport and FinishReportStop are reached later."""
        return StepList.start_step(GenerateReport()).other_steps(
            DeliverReport(), FinishReportStop()
        )

    @rpc(timeout=timedelta(seconds=30))
    def stop_report(self, context: Context, input: None) -> RPCResult[bool]:
        """Stop a report still being written: False when it is already ready or stopped."""
        if self.report_status.get(context) in (REPORT_READY, REPORT_STOPPED):
            return RPCResult(False)
        return RPCResult(
            True,
            next_steps=(StepMovement.of(FinishReportStop, None),),
        ).with_canceling_steps(GenerateReport)
