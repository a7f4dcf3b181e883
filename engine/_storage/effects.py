"""The one place that knows the order in which a handler's effects commit.

Seed 002: Attribute writes, then best-effort Channel deletions, then Channel publications; an
RPC's cancellations follow its publications and precede its next Steps; the Step decision comes
last. All of it commits together, or none of it does.
"""

from __future__ import annotations

from sqlalchemy import Connection

from engine._outcomes import OutcomeKind
from engine._storage import rows
from engine._storage.records import (
    ChannelDeletion,
    ChannelPublication,
    EnterExecute,
    RunChange,
    RunClose,
    RunStatus,
    StagedEffects,
    StepClose,
    StepState,
)
from engine._storage.rows import LockedRun


def apply_effects(conn: Connection, run: LockedRun, effects: StagedEffects, now: int) -> RunChange:
    """Apply ``effects`` to a locked, open run in the seed's order; return what changed.

    The caller checked its preconditions after locking the run (the run is open, a Step
    attempt is still current). The decision's own history event is written here; a unit
    without a decision (an RPC, a client write) records its event itself.
    """
    decision = effects.decision
    deciding_step = decision.step_id if isinstance(decision, StepClose | EnterExecute) else None
    rows.apply_writes(conn, run.run_id, effects.writes, now)
    _delete_channel_messages(conn, run, effects.channel_deletions)
    _publish_channel_messages(conn, run, effects.channel_publications)
    canceled: tuple[str, ...] = ()
    if effects.cancel_step_types:
        keep = () if deciding_step is None else (deciding_step,)
        canceled = rows.cancel_steps(
            conn, run.run_id, now, step_types=effects.cancel_step_types, keep=keep
        )
    rows.insert_steps(conn, effects.next_steps, now)
    rows.add_history(conn, run.run_id, effects.history, now)
    ended = list(canceled)
    queued = list(effects.next_steps)
    closed: RunStatus | None = None
    if isinstance(decision, StepClose):
        ended.append(decision.step_id)
        closed, closed_steps = _close_step(conn, run, effects, decision, canceled, now)
        ended.extend(closed_steps)
    elif isinstance(decision, EnterExecute):
        rows.requeue_step(conn, decision.step)
        queued.append(decision.step)
        event = {
            "stepType": decision.step.step_type,
            "stepExecutionId": decision.step.id,
            "dueAt": decision.step.due_at,
            "attributes": rows.written_keys(effects.writes),
        }
        rows.add_history(conn, run.run_id, [("STEP_WAITING", event)], now)
    elif isinstance(decision, RunClose):
        closed = decision.status
        ended.extend(
            rows.close_run(
                conn,
                run.run_id,
                decision.status,
                now,
                error_type=decision.error_type,
                error_message=decision.error_message,
            )
        )
    return RunChange(
        flow_id=run.flow_id,
        flow_type=run.flow_type,
        run_id=run.run_id,
        writes=effects.writes,
        queued_steps=tuple(queued),
        ended_step_ids=tuple(ended),
        closed_status=closed,
    )


def _close_step(
    conn: Connection,
    run: LockedRun,
    effects: StagedEffects,
    decision: StepClose,
    canceled: tuple[str, ...],
    now: int,
) -> tuple[RunStatus | None, tuple[str, ...]]:
    """Close the deciding Step execution, then the run when the decision ends it."""
    failed = decision.kind == OutcomeKind.FAILED
    rows.close_step(
        conn,
        decision.step_id,
        StepState.FAILED if failed else StepState.COMPLETED,
        now,
        is_completion=decision.is_completion,
        output=decision.output,
        error_type=decision.error_type,
        error_message=decision.error_message,
    )
    event = {
        "stepType": decision.step_type,
        "stepExecutionId": decision.step_id,
        "attempt": decision.attempt,
        "decision": decision.kind,
        "errorType": decision.error_type,
        "errorMessage": decision.error_message,
        "nextSteps": [s.step_type for s in effects.next_steps],
        "canceledSteps": list(canceled),
        "attributes": rows.written_keys(effects.writes),
    }
    rows.add_history(conn, run.run_id, [("STEP_CLOSED", event)], now)
    closed: RunStatus | None = None
    if decision.kind == OutcomeKind.FORCE_COMPLETE:
        closed = RunStatus.COMPLETED
    elif decision.kind in (OutcomeKind.FORCE_FAIL, OutcomeKind.FAILED) and not effects.next_steps:
        closed = RunStatus.FAILED
    elif not effects.next_steps and rows.run_is_done(conn, run.run_id):
        closed = RunStatus.COMPLETED
    if closed is None:
        return None, ()
    is_failure = closed == RunStatus.FAILED
    return closed, rows.close_run(
        conn,
        run.run_id,
        closed,
        now,
        error_type=decision.error_type if is_failure else None,
        error_message=decision.error_message if is_failure else None,
    )


def _delete_channel_messages(
    conn: Connection, run: LockedRun, deletions: tuple[ChannelDeletion, ...]
) -> None:
    # Channels are declared and staged once their issue lands; until then nothing stages these.
    if deletions:
        raise NotImplementedError("Channel message deletion arrives with Channels")


def _publish_channel_messages(
    conn: Connection, run: LockedRun, publications: tuple[ChannelPublication, ...]
) -> None:
    if publications:
        raise NotImplementedError("Channel publication arrives with Channels")
