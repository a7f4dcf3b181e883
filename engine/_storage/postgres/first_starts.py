"""The start of a Flow ID never used before, committed on PostgreSQL as one statement.

Committed as a unit, a start costs a BEGIN, the Flow ID's lock, the run, the start Step and its
counter, the deferred writes and a COMMIT: eight round trips. Most starts name a new Flow ID,
and those need no decision at all (no latest run, so no ID reuse policy to apply): here the same
rows are one statement, its own transaction, written only if the Flow ID's row could be created:

- the Flow ID's row pointing at the new run (``ON CONFLICT DO NOTHING``: a used ID writes
  nothing, and the caller commits the start as a unit, which applies the reuse policy);
- the run, at commit 1 (as ``rows.insert_run`` writes it);
- the start Step, numbered 1 of its type and claimed by this process (as ``rows.insert_steps``);
- the ``FLOW_STARTED`` event.

A start with initial Attributes commits as a unit (its writes go through the index and change
log code); so does every start on SQLite, whose writer runs statements in this process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine._enums import HistoryEventType, RunStatus
from engine._ids import step_id
from engine._storage.records import Args, CommitResult, Phase, RunChange, StartOutcome, StartRequest

SQL = """
WITH f AS (
    INSERT INTO flows (flow_id, flow_type, latest_run_id)
    VALUES ($1::varchar, $2::varchar, $3::varchar)
    ON CONFLICT (flow_id) DO NOTHING
    RETURNING flow_id
), r AS (
    INSERT INTO runs (run_id, flow_id, flow_type, status, input, request_id, started_at,
        closed_at, timeout_at, error_type, error_message, commit_seq, change_log)
    SELECT $3::varchar, $1::varchar, $2::varchar, $4::varchar, $5::text, $6::varchar,
        $7::int8, NULL, $8::int8, NULL, NULL, 1, $9::bool
    FROM f
    RETURNING CASE WHEN change_log THEN 1 ELSE 0 END AS seq
), c AS (
    INSERT INTO step_counters (run_id, step_type, count)
    SELECT $3::varchar, $10::varchar, 1 FROM r WHERE $10::varchar IS NOT NULL
), s AS (
    INSERT INTO step_executions (id, run_id, step_type, input, state, phase, attempt, due_at,
        created_at, is_completion, created_commit, execute_commit, claimed_by, fence)
    SELECT $15::varchar, $3::varchar, $10::varchar, $5::text,
        'PENDING', $11::varchar, 1, NULL, $7::int8, false, r.seq,
        CASE WHEN $11::varchar = 'EXECUTE' THEN r.seq END, $12::varchar, 1
    FROM r WHERE $10::varchar IS NOT NULL
), h AS (
    INSERT INTO history (run_id, event_type, at, details, commit_seq)
    SELECT $3::varchar, $13::varchar, $7::int8, $14::text, r.seq FROM r
)
SELECT (SELECT count(*) FROM r)
"""


@dataclass(frozen=True)
class FirstStart:
    """A start that may run as one statement, if its Flow ID turns out to be new."""

    request: StartRequest
    now: int
    #: What the commit changed, as the unit would have answered it.
    result: CommitResult

    def statement(self, claimant: str) -> tuple[str, Args]:
        """The statement and its arguments, to run outside a transaction (it is its own),
        queuing the start Step for ``claimant``."""
        request = self.request
        step = request.start_step
        details = {
            "flowType": request.flow_type,
            "requestId": request.request_id,
            "input": json.loads(request.input),
            "initialAttributes": [],
        }
        args = (
            request.flow_id,
            request.flow_type,
            request.run_id,
            RunStatus.RUNNING.value,
            request.input,
            request.request_id,
            self.now,
            request.timeout_at,
            request.change_log,
            None if step is None else step.step_type,
            None if step is None else step.phase.value,
            claimant,
            HistoryEventType.FLOW_STARTED.value,
            json.dumps(details, separators=(",", ":"), default=str),
            None if step is None else step_id(request.run_id, step.step_type, 1),
        )
        return SQL, args

    def wrote(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Read the statement's answer: False, having written nothing, when the Flow ID was
        already used."""
        request = self.request
        step = request.start_step
        (started,) = rows[0]
        if not started:
            return False
        if step is not None:
            step.id, step.numbered, step.fence = step_id(request.run_id, step.step_type, 1), True, 1
        return True


def first_start(request: StartRequest, now: int) -> FirstStart | None:
    """Return ``request`` as one statement, or None when it must commit as a unit (it writes
    initial Attributes, a Schedule starts it, or its start Step is not a plain first
    execution: a delayed start's is due later)."""
    step = request.start_step
    if request.writes or request.schedule_id is not None:
        return None
    if step is not None and (step.id or step.attempt != 1 or step.due_at is not None):
        return None
    if step is not None and step.phase not in (Phase.EXECUTE, Phase.WAIT_FOR):
        return None
    change = RunChange(
        flow_id=request.flow_id,
        flow_type=request.flow_type,
        run_id=request.run_id,
        writes=(),
        queued_steps=() if step is None else (step,),
        started=True,
        timeout_at=request.timeout_at,
    )
    return FirstStart(request, now, CommitResult((change,), StartOutcome(request.run_id, True)))
