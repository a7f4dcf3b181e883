"""A Step's decision that moves its Flow on, committed on PostgreSQL as one statement.

The common Step decision (``go_to`` and the like) closes its execution and creates the next
ones, nothing more. Committed as a unit it costs a BEGIN, the run's lock with the attempt's
check, the next Steps' numbers, their rows, the tail and a COMMIT. Here the same changes are
one statement, its own transaction, and write only if the run is open and the attempt is still
current (pending, at this attempt, under this claim: the row is locked ``FOR UPDATE``, so it is
checked as last committed; each row is found by its primary key, the rest a filter, as
``statements.filter_only`` says why):

- the run's next commit number (as ``rows.lock_run_at_attempt`` takes it);
- the next executions, numbered from the run's per-type counters and claimed by this process
  (as ``rows.insert_steps`` creates them);
- the deciding execution's close and its ``STEP_CLOSED`` event.

Only decisions with next Steps and no other effect (no Attribute write, Channel operation,
cancellation or history of their own), which cannot close the run, qualify
(:func:`step_move`); every other commit is a unit as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine._enums import HistoryEventType
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

SQL = """
WITH r AS (
    UPDATE runs SET commit_seq = commit_seq + CASE WHEN change_log THEN 1 ELSE 0 END
    WHERE run_id = $1::varchar AND (status = 'RUNNING') IS TRUE
    RETURNING CASE WHEN change_log THEN commit_seq ELSE 0 END AS seq
), a AS (
    SELECT id FROM step_executions
    WHERE id = $2::varchar
        AND (state = 'PENDING' AND attempt = $3::int4 AND fence = $4::int8) IS TRUE
    FOR UPDATE
), g AS MATERIALIZED (
    SELECT r.seq FROM r, a
), v AS MATERIALIZED (
    SELECT * FROM unnest(
        $5::varchar[], $6::text[], $7::varchar[], $8::int4[], $9::int8[], $10::int4[],
        $11::int4[], $22::varchar[]) WITH ORDINALITY AS v(t, inp, ph, att, due, nth, k, pre, ord)
), c AS (
    INSERT INTO step_counters (run_id, step_type, count)
    SELECT $1::varchar, x.t, x.k FROM g, (SELECT DISTINCT t, k FROM v) AS x
    ON CONFLICT (run_id, step_type) DO UPDATE SET count = step_counters.count + excluded.count
    RETURNING step_type, count
), ids AS MATERIALIZED (
    SELECT v.ord, v.pre || (c.count - v.k + v.nth)::text AS id
    FROM v JOIN c ON c.step_type = v.t
), s AS (
    INSERT INTO step_executions (id, run_id, step_type, input, state, phase, attempt, due_at,
        created_at, is_completion, created_commit, execute_commit, claimed_by, fence)
    SELECT ids.id, $1::varchar, v.t, v.inp, 'PENDING', v.ph, v.att, v.due, $12::int8, false,
        g.seq, CASE WHEN v.ph = 'EXECUTE' THEN g.seq END, $13::varchar, 1
    FROM g, v JOIN ids ON ids.ord = v.ord
), d AS (
    UPDATE step_executions AS se
    SET state = $14::varchar, phase = $15::varchar, closed_at = $12::int8,
        closed_commit = g.seq, due_at = NULL, is_completion = $16::bool, output = $17::text,
        error_type = $18::varchar, error_message = $19::text
    FROM g WHERE se.id = $2::varchar
), h AS (
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    SELECT $1::varchar, $20::varchar, $12::int8, $21::text, g.seq FROM g
)
SELECT (SELECT count(*) FROM g), (SELECT array_agg(id ORDER BY ord) FROM ids)
"""


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
            self.now,
            claimant,
            closed_state(decision).value,
            decision.phase.value,
            decision.is_completion,
            decision.output,
            decision.error_type,
            decision.error_message,
            HistoryEventType.STEP_CLOSED.value,
            self.history_details,
            [step_id_prefix(self.run_id, s.step_type) for s in self.next_steps],
        )
        return SQL, args

    def wrote(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Read the statement's answer: False, having changed nothing, when the run was not
        open or the attempt no longer current."""
        done, ids = rows[0]
        if not done:
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
