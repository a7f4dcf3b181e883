"""A Step's decision that moves its Flow on, committed on PostgreSQL as one call.

The common Step decision (``go_to`` and the like) closes its execution and creates the next
ones, nothing more. Committed as a unit it costs a BEGIN, the run's lock with the attempt's
check, the next Steps' numbers, their rows, the deferred writes and a COMMIT. Here it is one call of
``dexlite_move_step`` (``functions/dexlite_move_step.sql``), its own transaction, which writes
only if the run is open and the attempt is still current (pending, at this attempt, under this
claim, read once the run is locked):

- the run's next commit number (as ``rows.lock_run_at_attempt`` takes it);
- the next executions, numbered from the run's per-type counters and claimed by this process
  (as ``rows.insert_steps`` creates them);
- the deciding execution's close and its ``STEP_CLOSED`` event.

Only decisions with next Steps and no other effect (no Attribute write, Channel operation or
cancellation), which cannot close the run, qualify (:func:`step_move`); every other commit is
a unit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine._ids import step_id_prefix
from engine._outcomes import OutcomeKind
from engine._storage.apply import step_closed_details
from engine._storage.records import (
    Args,
    CommitResult,
    QueuedStep,
    RunChange,
    StagedEffects,
    StepClose,
    StepState,
)

SQL = (
    "SELECT dexlite_move_step($1, $2, $3::int4, $4::int8, $5::varchar[], $6::text[], "
    "$7::varchar[], $8::int4[], $9::int8[], $10::int4[], $11::int4[], $12::varchar[], "
    "$13::int8, $14, $15, $16, $17::bool, $18, $19, $20, $21)"
)


def closed_state(decision: StepClose) -> StepState:
    """The state a decision leaves its execution in."""
    return StepState.FAILED if decision.kind == OutcomeKind.FAILED else StepState.COMPLETED


@dataclass(frozen=True)
class StepMove:
    """One Step decision that moves its Flow on, ready to run as one statement."""

    run_id: str
    decision: StepClose
    attempt: int
    fence: int
    next_steps: tuple[QueuedStep, ...]
    history_details: str
    now: int
    #: What the commit changed, as the unit would have answered it (its next Steps get their
    #: IDs when it commits).
    result: CommitResult

    def statement(self, claimant: str) -> tuple[str, Args]:
        """The statement and its arguments, to run outside a transaction (it is its own),
        queuing the next Steps for ``claimant``."""
        # Each new execution's place among those of its type (1, 2, ...), and how many of its
        # type there are: the statement numbers them on from the run's counter of the type.
        counts: dict[str, int] = {}
        numbers = []
        for step in self.next_steps:
            counts[step.step_type] = counts.get(step.step_type, 0) + 1
            numbers.append(counts[step.step_type])
        decision = self.decision
        args = (
            self.run_id,
            decision.step_id,
            self.attempt,
            self.fence,
            [s.step_type for s in self.next_steps],
            [s.input for s in self.next_steps],
            [s.phase.value for s in self.next_steps],
            [s.attempt for s in self.next_steps],
            [s.due_at for s in self.next_steps],
            numbers,
            [counts[s.step_type] for s in self.next_steps],
            [step_id_prefix(self.run_id, s.step_type) for s in self.next_steps],
            self.now,
            claimant,
            closed_state(decision).value,
            decision.phase.value,
            decision.is_completion,
            decision.output,
            decision.error_type,
            decision.error_message,
            self.history_details,
        )
        return SQL, args

    def wrote(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Read the statement's answer: False, having changed nothing, when the run was not
        open or the attempt no longer current."""
        ids = rows[0][0]
        if ids is None:
            return False
        for step, step_id in zip(self.next_steps, ids, strict=True):
            step.id, step.numbered, step.fence = step_id, True, 1
        return True


def step_move(
    *,
    flow_id: str,
    flow_type: str,
    run_id: str,
    attempt: int,
    fence: int,
    effects: StagedEffects,
    now: int,
) -> StepMove | None:
    """Return the decision's commit as one statement, or None when it does more than close
    its execution and create the next ones (or may close the run): those commit as a unit."""
    decision = effects.decision
    if not isinstance(decision, StepClose) or not effects.next_steps:
        return None
    if decision.kind == OutcomeKind.FORCE_COMPLETE:
        return None  # it closes the run
    if not effects.decision_only():
        return None
    if any(s.id or s.run_id != run_id for s in effects.next_steps):
        return None  # numbered already, or of another run: the unit knows what to do
    change = RunChange(
        flow_id=flow_id,
        flow_type=flow_type,
        run_id=run_id,
        queued_steps=effects.next_steps,
        ended_step_ids=(decision.step_id,),
    )
    return StepMove(
        run_id=run_id,
        decision=decision,
        attempt=attempt,
        fence=fence,
        next_steps=effects.next_steps,
        history_details=json.dumps(
            step_closed_details(decision, effects, ()), separators=(",", ":"), default=str
        ),
        now=now,
        result=CommitResult((change,)),
    )
