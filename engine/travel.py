"""Time travel: take a Flow back to an earlier point of its latest run and let it run again.

A point names one commit of the run. The new run starts from the whole run state right after
it (Attributes, pending Channel messages, pending Step executions in their phase, the Step
counters), then applies again what came from outside afterwards unless told not to. See
``Engine.time_travel``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.step import Step


class StepMethod(enum.StrEnum):
    """Which method of a Step execution a point comes before."""

    #: Before its wait_for: the commit that queued the execution.
    WAIT_FOR = "WAIT_FOR"
    #: Before its execute: the commit that moved it there (its wait's result kept).
    EXECUTE = "EXECUTE"


class TravelPointKind(enum.StrEnum):
    """The five ways to name a point of a run."""

    BEGINNING = "BEGINNING"
    EVENT = "EVENT"
    TIME = "TIME"
    STEP_TYPE = "STEP_TYPE"
    STEP_EXECUTION = "STEP_EXECUTION"


@dataclass(frozen=True)
class TravelPoint:
    """One commit of a run, named by one of the constructors:

    - :meth:`beginning`: the run's first commit (its start; a traveled run's original start);
    - :meth:`event`: the commit that wrote history event ``event_id`` (numbered from 1);
    - :meth:`time`: the last commit at or before an instant;
    - :meth:`step_type`: before the wait_for of that Step type's first execution in the run;
    - :meth:`step_execution`: before the wait_for of one execution, or (``StepMethod.EXECUTE``)
      before its execute, keeping what its wait consumed, the SubFlow results and fired Timers.

    Where a traveled run holds the same point twice (its copied events and the travel's
    commit), the earlier one is meant.
    """

    kind: TravelPointKind
    event_id: int | None = None
    at: datetime | None = None
    step_type_name: str | None = None
    step_execution_id: str | None = None
    method: StepMethod = StepMethod.WAIT_FOR

    @classmethod
    def beginning(cls) -> TravelPoint:
        """Return the run's first commit."""
        return cls(TravelPointKind.BEGINNING)

    @classmethod
    def event(cls, event_id: int) -> TravelPoint:
        """Return the commit that wrote history event ``event_id`` of the run."""
        return cls(TravelPointKind.EVENT, event_id=event_id)

    @classmethod
    def time(cls, at: datetime) -> TravelPoint:
        """Return the run's last commit at or before ``at`` (a timezone-aware instant)."""
        return cls(TravelPointKind.TIME, at=at)

    @classmethod
    def step_type(cls, step: type[Step[Any]] | Step[Any] | str) -> TravelPoint:
        """Return the point before the wait_for of ``step``'s first execution in the run."""
        if isinstance(step, str):
            name = step
        elif isinstance(step, Step):
            name = type(step).__name__
        else:
            name = step.__name__
        return cls(TravelPointKind.STEP_TYPE, step_type_name=name)

    @classmethod
    def step_execution(
        cls, step_execution_id: str, method: StepMethod | str = StepMethod.WAIT_FOR
    ) -> TravelPoint:
        """Return the point before ``method`` of one Step execution (``<StepType>-<n>``)."""
        return cls(
            TravelPointKind.STEP_EXECUTION,
            step_execution_id=step_execution_id,
            method=StepMethod(method),
        )


@dataclass(frozen=True)
class TimeTravelOptions:
    """One travel: the run (the Flow ID's latest), the point, and what to do after it.

    ``skip_writes_reapply`` leaves out what RPCs and clients wrote, published and deleted
    after the point (by default it is applied again, in commit order, in the travel's commit).
    ``fork_to_flow_id`` creates the new run under that Flow ID instead, leaving the original
    untouched.
    """

    run_id: str
    to: TravelPoint = field(default_factory=TravelPoint.beginning)
    reason: str = ""
    skip_writes_reapply: bool = False
    fork_to_flow_id: str | None = None


@dataclass(frozen=True)
class TimeTravelResult:
    """The new run (under the fork's Flow ID for a fork) and the run it came from."""

    flow_id: str
    run_id: str
    previous_run_id: str


@dataclass(frozen=True)
class FlowRunRef:
    """A run of a Flow."""

    flow_id: str
    run_id: str


@dataclass(frozen=True)
class TimeTravelFailure:
    """A run a bulk travel could not take back, with the error's code and detail."""

    flow_id: str
    run_id: str
    code: str
    detail: str


@dataclass(frozen=True)
class BulkTimeTravelResult:
    """What a travel by query matched, traveled and could not travel (a dry run travels
    nothing)."""

    dry_run: bool
    matched: list[FlowRunRef]
    traveled: list[TimeTravelResult]
    failed: list[TimeTravelFailure]
