"""A Step's decision that may close its run, committed on PostgreSQL in one call.

A decision with no next Step (a Flow's last Step, a final failure, ``force_complete`` or
``force_fail``) closes its execution and then, maybe, the run: as COMPLETED when no Step is
pending and a completion was recorded (or at once for ``force_complete``), as FAILED for a
failure, canceling the Steps still pending. Committed as a unit that is eight round trips.
Here it is one call of ``dexlite_end_step`` (``functions/dexlite_end_step.sql``), which
does the same in the same order after locking the run, and writes nothing when the run is
not open or the attempt is no longer current.

Only decisions with no other effect (no Attribute write, Channel operation, cancellation or
history of their own) qualify (:func:`step_end`); every other commit is a unit as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine._enums import RunStatus
from engine._outcomes import OutcomeKind
from engine._storage.apply import step_closed_details
from engine._storage.postgres.step_moves import StepMove, closed_state, step_move
from engine._storage.records import (
    Args,
    CommitResult,
    QueuedStep,
    RunChange,
    StagedEffects,
    StepClose,
)

SQL = (
    "SELECT dexlite_end_step($1, $2, $3::int4, $4::int8, $5, $6, $7::bool, $8, $9, $10, "
    "$11::int8, $12, $13, $14, $15, $16)"
)

_FAILING = (OutcomeKind.FAILED, OutcomeKind.FORCE_FAIL)


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


@dataclass
class StepEnd:
    """One Step decision with no next Step, ready to run as one call."""

    run_id: str
    decision: StepClose
    attempt: int
    fence: int
    now: int
    step_details: str
    #: The status it closes the run with whatever else is pending (None: COMPLETED, only once
    #: no Step is pending and a completion was recorded).
    closes: RunStatus | None
    #: What the commit changed: before :meth:`run`, as if the run stays open (the notice is
    #: written from it, and the call amends it); after, what the call did.
    result: CommitResult
    _flow_details: str = field(default="")

    def __post_init__(self) -> None:
        failed = self.closes == RunStatus.FAILED
        decision = self.decision
        self._flow_details = _json(
            {
                "status": self.closes or RunStatus.COMPLETED,
                "errorType": decision.error_type if failed else None,
                "errorMessage": decision.error_message if failed else None,
            }
        )

    def statement(self, claimant: str) -> tuple[str, Args]:
        """The call and its arguments, to run outside a transaction (the call is its own;
        ``claimant`` is unused: it queues no Step)."""
        decision = self.decision
        args = (
            self.run_id,
            decision.step_id,
            self.attempt,
            self.fence,
            closed_state(decision).value,
            decision.phase.value,
            decision.is_completion,
            decision.output,
            decision.error_type,
            decision.error_message,
            self.now,
            None if self.closes is None else self.closes.value,
            self.step_details,
            self._flow_details,
            # The function's notice (its channel and payload): none. Notices go out once
            # the commit has ended (``engine._runtime.postgres.notify``).
            None,
            None,
        )
        return SQL, args

    def wrote(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Read the call's answer: False, having changed nothing, when the run was not open
        or the attempt not current."""
        answer = rows[0][0]
        if answer is None:
            return False
        closed, *canceled = answer
        change = self.result.changes[0]
        self.result = CommitResult(
            (
                RunChange(
                    flow_id=change.flow_id,
                    flow_type=change.flow_type,
                    run_id=change.run_id,
                    ended_step_ids=(self.decision.step_id, *canceled),
                    closed_status=RunStatus(closed) if closed else None,
                ),
            )
        )
        return True


def step_end(
    *,
    flow_id: str,
    flow_type: str,
    run_id: str,
    attempt: int,
    fence: int,
    effects: StagedEffects,
    now: int,
) -> StepEnd | None:
    """Return the decision's commit as one call, or None when it has next Steps or any other
    effect (those commit as a unit, or as a ``step_moves`` statement)."""
    decision = effects.decision
    if not isinstance(decision, StepClose) or effects.next_steps:
        return None
    if not effects.decision_only():
        return None
    closes: RunStatus | None = None
    if decision.kind == OutcomeKind.FORCE_COMPLETE:
        closes = RunStatus.COMPLETED
    elif decision.kind in _FAILING:
        closes = RunStatus.FAILED
    change = RunChange(
        flow_id=flow_id,
        flow_type=flow_type,
        run_id=run_id,
        ended_step_ids=(decision.step_id,),
    )
    return StepEnd(
        run_id=run_id,
        decision=decision,
        attempt=attempt,
        fence=fence,
        now=now,
        step_details=_json(step_closed_details(decision, effects, ())),
        closes=closes,
        result=CommitResult((change,)),
    )


def one_statement(step: QueuedStep, staged: StagedEffects, now: int) -> StepMove | StepEnd | None:
    """Return the decision of ``step``'s attempt as one statement where it qualifies
    (``step_moves``, then here); the database runs it so if it can."""
    where = {"flow_id": step.flow_id, "flow_type": step.flow_type, "run_id": step.run_id}
    move = step_move(**where, attempt=step.attempt, fence=step.fence, effects=staged, now=now)
    if move is not None:
        return move
    return step_end(**where, attempt=step.attempt, fence=step.fence, effects=staged, now=now)
