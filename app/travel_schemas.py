"""Wire schemas of time travel: camelCase bodies and responses of its two operations."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

import engine
from app.schemas import Lax, Request, Wire

MAX_REASON_LENGTH = 1000


class TravelPointBody(Request):
    """A point of the run: BEGINNING, EVENT (``eventId``), TIME (``at``), STEP_TYPE
    (``stepType``) or STEP_EXECUTION (``stepExecutionId`` and ``method``)."""

    kind: Lax[engine.TravelPointKind]
    event_id: int | None = Field(
        None, ge=1, le=2**63 - 1, description="EVENT: a history event number."
    )
    at: Lax[datetime] | None = Field(
        None, description="TIME: an instant with a time zone; the last commit at or before it."
    )
    step_type: str | None = Field(
        None, min_length=1, max_length=256, description="STEP_TYPE: before its first execution."
    )
    step_execution_id: str | None = Field(
        None,
        min_length=1,
        max_length=512,
        description="STEP_EXECUTION: the execution (<StepType>-<n>).",
    )
    method: Lax[engine.StepMethod] = Field(
        engine.StepMethod.WAIT_FOR,
        description="STEP_EXECUTION: before its WAIT_FOR, or before its EXECUTE (its wait's "
        "result kept).",
    )

    def to_point(self) -> engine.TravelPoint:
        """Return the engine's point, refusing one whose kind lacks its field."""
        kind = engine.TravelPointKind(self.kind)
        needed = {
            engine.TravelPointKind.EVENT: ("eventId", self.event_id),
            engine.TravelPointKind.TIME: ("at", self.at),
            engine.TravelPointKind.STEP_TYPE: ("stepType", self.step_type),
            engine.TravelPointKind.STEP_EXECUTION: ("stepExecutionId", self.step_execution_id),
        }.get(kind)
        if needed is not None and needed[1] is None:
            raise engine.InvalidArgumentError(
                f"to.{needed[0]} is required when to.kind is {kind}", field=f"to.{needed[0]}"
            )
        return engine.TravelPoint(
            kind,
            event_id=self.event_id,
            at=self.at,
            step_type_name=self.step_type,
            step_execution_id=self.step_execution_id,
            method=engine.StepMethod(self.method),
        )


class TimeTravelBody(Request):
    """Take a Flow's latest run back to a point, or fork it to another Flow ID."""

    run_id: str = Field(
        min_length=1, max_length=256, description="The Flow's latest run (open or closed)."
    )
    to: TravelPointBody
    reason: str = Field("", max_length=MAX_REASON_LENGTH)
    skip_writes_reapply: bool = Field(
        False,
        description="Leave out what RPCs and clients wrote, published and deleted after the "
        "point (by default applied again, in commit order).",
    )
    fork_to_flow_id: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Create the new run under this Flow ID (no running run there) and leave "
        "the original untouched.",
    )


class TimeTravelResponse(Wire):
    """The new run, and the run it came from."""

    flow_id: str
    run_id: str
    previous_run_id: str

    @classmethod
    def of(cls, result: engine.TimeTravelResult) -> TimeTravelResponse:
        """Return the wire form of an engine TimeTravelResult."""
        return cls(
            flow_id=result.flow_id, run_id=result.run_id, previous_run_id=result.previous_run_id
        )


class TimeTravelFlowsBody(Request):
    """Travel every latest run a SearchFlows query matches, each in its own commit."""

    query: str = Field(
        min_length=1,
        description="A SearchFlows query, e.g. FlowType = 'OrderFlow' AND Status = 'FAILED'.",
    )
    to: TravelPointBody = Field(description="BEGINNING or STEP_TYPE.")
    reason: str = Field("", max_length=MAX_REASON_LENGTH)
    skip_writes_reapply: bool = False
    dry_run: bool = Field(False, description="List what would travel; change nothing.")
    limit: int = Field(100, ge=1, le=1000, description="At most this many runs (1 to 1000).")


class FlowRunResponse(Wire):
    """A run of a Flow."""

    flow_id: str
    run_id: str


class TimeTravelFailureResponse(Wire):
    """A run that could not travel: the Problem code and detail it met."""

    flow_id: str
    run_id: str
    code: str
    detail: str


class TimeTravelFlowsResponse(Wire):
    """What the query matched, what traveled and what could not."""

    dry_run: bool
    matched: list[FlowRunResponse]
    traveled: list[TimeTravelResponse]
    failed: list[TimeTravelFailureResponse]

    @classmethod
    def of(cls, result: engine.BulkTimeTravelResult) -> TimeTravelFlowsResponse:
        """Return the wire form of an engine BulkTimeTravelResult."""
        return cls(
            dry_run=result.dry_run,
            matched=[FlowRunResponse(flow_id=m.flow_id, run_id=m.run_id) for m in result.matched],
            traveled=[TimeTravelResponse.of(t) for t in result.traveled],
            failed=[
                TimeTravelFailureResponse(
                    flow_id=f.flow_id, run_id=f.run_id, code=f.code, detail=f.detail
                )
                for f in result.failed
            ],
        )
