"""SkipTimer: an operator fires now the Timers a pending Step execution waits on.

A Wait on Timers alone is stored as its execute phase due when they fire: the skip makes it
due now. A Wait with other conditions keeps its Timers in its condition tree: the skip moves
each Timer not yet fired to now, and the wait completes in the same commit if that meets it.
Either way the run's history records the skip (TIMERS_SKIPPED).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, select

from engine._enums import HistoryEventType
from engine._storage import durable_waits, reads, rows
from engine._storage import tables as t
from engine._storage.apply import complete_if_met
from engine._storage.records import (
    CommitResult,
    Phase,
    QueuedStep,
    RunChange,
    StepState,
    WaitingStep,
)
from engine._storage.units import journaled
from engine.errors import FlowNotActiveOrNotFoundError, FlowNotFoundError, InvalidArgumentError


def skip_timers(*, flow_id: str, run_id: str | None, step_execution_id: str, now: int) -> Any:
    """Fire the Timers of a pending execution's wait now; the unit's value is how many."""

    def unit(conn: Connection) -> CommitResult:
        run = rows.lock_latest_run(conn, flow_id) if run_id is None else rows.lock_run(conn, run_id)
        if run is None or run.flow_id != flow_id:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="skipTimers"
            )
        if not run.is_running:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} has no active run", flow_id=flow_id, operation="skipTimers"
            )
        step = _pending(conn, f"{run.run_id}:{step_execution_id}")
        if step is None:
            raise InvalidArgumentError(
                f"Step execution {step_execution_id} is not pending in run {run.run_id}",
                field="stepExecutionId",
            )
        change = RunChange(run.flow_id, run.flow_type, run.run_id)
        if step.phase == Phase.WAITING:
            fired = _fire_wait(conn, run, step, now, change)
        elif step.phase == Phase.EXECUTE and step.attempt == 1 and (step.due_at or 0) > now:
            # A Wait on Timers alone: its execute phase is due when they fire.
            due = replace(step, due_at=now)
            rows.requeue_step(conn, due)
            change.queued_steps = (due,)
            fired = 1
        else:
            fired = 0
        if not fired:
            raise InvalidArgumentError(
                f"Step execution {step_execution_id} waits on no Timer that has not fired",
                field="stepExecutionId",
            )
        event = {"stepType": step.step_type, "stepExecutionId": step_execution_id, "fired": fired}
        rows.add_history(conn, run.run_id, [(HistoryEventType.TIMERS_SKIPPED, event)], now)
        return CommitResult((change,), fired)

    return journaled(unit)


def _pending(conn: Connection, step_id: str) -> QueuedStep | None:
    se = t.step_executions
    row = conn.execute(select(se.c.state, se.c.fence).where(se.c.id == step_id)).first()
    if row is None or row.state != StepState.PENDING:
        return None
    [step] = reads.claimed_steps(conn, {step_id: row.fence})
    return step


def _fire_wait(
    conn: Connection, run: rows.LockedRun, step: QueuedStep, now: int, change: RunChange
) -> int:
    text = durable_waits.waiting_spec(conn, step.id)
    if text is None:
        return 0
    spec = json.loads(text)
    fired = 0

    def walk(node: dict[str, Any]) -> None:
        nonlocal fired
        if "timer" in node and spec["startedAt"] + node["timer"] > now:
            node["timer"] = now - spec["startedAt"]
            fired += 1
        for child in node.get("conditions", ()):
            walk(child)

    walk(spec["root"])
    if not fired:
        return 0
    durable_waits.update_wait(conn, step, json.dumps(spec, separators=(",", ":")))
    execute = complete_if_met(conn, run, step, spec, now)
    if execute is not None:
        change.queued_steps = (execute,)
    else:
        change.waiting = (WaitingStep(step, spec),)  # watched again, its Timers fired
    return fired
