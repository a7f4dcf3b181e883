"""The one place that knows the order in which a handler's effects commit.

Dex's order: Attribute writes, then best-effort Channel deletions, then Channel publications; an
RPC's cancellations follow its publications and precede its next Steps; the Step decision comes
last. All of it commits together, or none of it does.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection

from engine._enums import HistoryEventType, RunStatus
from engine._ids import execution_id, new_ordered_id, state_key, to_rfc3339
from engine._outcomes import OutcomeKind
from engine._storage import channel_messages, durable_waits, rows, start_units, subflows
from engine._storage.records import (
    ChannelDeletion,
    ChannelPublication,
    EnterExecute,
    EnterWait,
    Phase,
    QueuedStep,
    RunChange,
    RunClose,
    StagedEffects,
    StepClose,
    StepState,
    WaitingStep,
)
from engine._storage.rows import LockedRun
from engine.errors import ChannelMessageNotFoundError


def apply_effects(
    conn: Connection, run: LockedRun, effects: StagedEffects, now: int
) -> list[RunChange]:
    """Apply ``effects`` to a locked, open run in Dex's order; return what changed.

    The run's own change comes first; SubFlows a wait starts add the runs they changed. The
    caller checked its preconditions after locking the run (the run is open, a Step attempt
    is still current). The decision's own history event is written here; a unit without a
    decision (an RPC, a client write) records its event itself.
    """
    decision = effects.decision
    deciding = isinstance(decision, StepClose | EnterExecute | EnterWait)
    deciding_step = decision.step_id if deciding else None  # type: ignore[union-attr]
    if effects.strict_deletions:
        _check_pending(conn, run, effects.channel_deletions)
    rows.apply_writes(conn, run.run_id, effects.writes, now)
    _delete_channel_messages(conn, run, effects.channel_deletions, now)
    publications = effects.channel_publications
    message_ids = _publish_channel_messages(conn, run, publications, now)
    canceled: tuple[str, ...] = ()
    if effects.cancel_step_types:
        keep = () if deciding_step is None else (deciding_step,)
        canceled = rows.cancel_steps(
            conn, run.run_id, now, step_types=effects.cancel_step_types, keep=keep
        )
    rows.insert_steps(conn, effects.next_steps, now)
    ended = list(canceled)
    queued = list(effects.next_steps)
    waiting: list[WaitingStep] = []
    others: list[RunChange] = []
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
            "stepExecutionId": decision.step.execution_id,
            "dueAt": to_rfc3339(decision.step.due_at),
            "attributes": rows.written_keys(effects.writes),
        }
        rows.add_history(conn, run.run_id, [(HistoryEventType.STEP_WAITING, event)], now)
    elif isinstance(decision, EnterWait):
        rows.requeue_step(conn, decision.step)
        event = {
            "stepType": decision.step.step_type,
            "stepExecutionId": decision.step.execution_id,
            "dueAt": None,
            "channels": sorted(state_key(*queue) for queue in durable_waits.queues(decision.spec)),
            "attributes": rows.written_keys(effects.writes),
        }
        rows.add_history(conn, run.run_id, [(HistoryEventType.STEP_WAITING, event)], now)
        others.extend(_start_subflows(conn, run, decision, now))
        durable_waits.start_wait(
            conn, decision.step, json.dumps(decision.spec, separators=(",", ":"))
        )
        # Messages already pending (or children already closed) may meet the wait at once:
        # it completes in this commit.
        execute = complete_if_met(conn, run, decision.step, decision.spec, now)
        if execute is not None:
            queued.append(execute)
        else:
            waiting.append(WaitingStep(decision.step, decision.spec))
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
    change = RunChange(
        flow_id=run.flow_id,
        flow_type=run.flow_type,
        run_id=run.run_id,
        writes=effects.writes,
        queued_steps=tuple(queued),
        ended_step_ids=tuple(ended),
        closed_status=closed,
        published=tuple(
            dict.fromkeys((p.channel, p.instance) for p in effects.channel_publications)
        ),
        message_ids=message_ids,
        waiting=tuple(waiting),
    )
    return [change, *others]


def _start_subflows(
    conn: Connection, run: LockedRun, decision: EnterWait, now: int
) -> list[RunChange]:
    """Start (or attach to) the wait's children and note each child run in the spec."""
    nodes = {node["subflow"]: node for node in durable_waits.subflows(decision.spec)}
    changes: list[RunChange] = []
    events = []
    for start in decision.subflows:
        child_run, action, started = start_units.start_subflow(conn, run, decision.step, start, now)
        node = nodes[start.index]
        node["runId"] = child_run
        changes.extend(started)
        event = {
            "stepType": decision.step.step_type,
            "stepExecutionId": decision.step.execution_id,
            "index": start.index,
            "flowType": start.request.flow_type,
            "flowId": start.request.flow_id,
            "runId": child_run,
        }
        events.append((action, event))
    rows.add_history(conn, run.run_id, events, now)
    return changes


def complete_if_met(
    conn: Connection, run: LockedRun, step: QueuedStep, spec: dict[str, Any], now: int
) -> QueuedStep | None:
    """Complete a waiting execution's wait if the queues, its children and the time meet it.

    The winning conditions' messages are consumed and the execution moves to ``execute``, all
    in the caller's transaction; returns that execute attempt, or None when the wait is not
    met. Children seen closed for the first time get a SUBFLOW_CLOSED event either way.
    """
    nodes = durable_waits.subflows(spec)
    states = subflows.statuses(conn, [n["runId"] for n in nodes if n.get("runId")])
    closed = {run_id for run_id, status in states.items() if status != RunStatus.RUNNING}
    events = []
    for node in nodes:
        if node.get("runId") in closed and not node.get("closedSeen"):
            node["closedSeen"] = True
            event = {
                "stepType": step.step_type,
                "stepExecutionId": step.execution_id,
                "index": node["subflow"],
                "flowId": node["flowId"],
                "runId": node["runId"],
                "status": str(states[node["runId"]]),
            }
            events.append((HistoryEventType.SUBFLOW_CLOSED, event))
    counts = channel_messages.queue_sizes(conn, run.run_id, durable_waits.queues(spec))
    taken = durable_waits.plan(spec, counts, closed, now)
    if taken is None:
        rows.add_history(conn, run.run_id, events, now)
        if events:
            durable_waits.update_wait(conn, step, json.dumps(spec, separators=(",", ":")))
        return None
    consumed: dict[str, list[Any]] = {}
    for (channel, instance), count in taken:
        messages = channel_messages.take_messages(conn, run.run_id, channel, instance, count)
        key = state_key(channel, instance)
        consumed.setdefault(key, []).extend(json.loads(value) for _, value in messages)
        event = {
            "stepType": step.step_type,
            "stepExecutionId": step.execution_id,
            "channel": key,
            "messageIds": [message_id for message_id, _ in messages],
        }
        events.append((HistoryEventType.CHANNEL_CONSUMED, event))
    children = subflows.results(conn, [n["runId"] for n in nodes if n.get("runId")])
    results = {str(n["subflow"]): children.get(n.get("runId", ""), _unstarted(n)) for n in nodes}
    text = json.dumps({"channels": consumed, "subflows": results}, separators=(",", ":"))
    execute = replace(
        step, phase=Phase.EXECUTE, attempt=1, due_at=None, consumed=text, returned=False
    )
    durable_waits.end_wait(conn, execute, text)
    rows.add_history(conn, run.run_id, events, now)
    return execute


def _unstarted(node: dict[str, Any]) -> dict[str, Any]:
    return {
        "flowId": node["flowId"],
        "runId": node.get("runId") or "",
        "status": str(RunStatus.RUNNING),
        "completions": [],
        "errorType": None,
        "errorMessage": None,
    }


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
    # Below, only a decision that may close the run reads the executions again (is the run
    # done? which are still pending?): any other's close goes with the unit's last writes.
    read_again = not effects.next_steps or decision.kind == OutcomeKind.FORCE_COMPLETE
    rows.close_step(
        conn,
        run.run_id,
        decision.step_id,
        StepState.FAILED if failed else StepState.COMPLETED,
        now,
        phase=decision.phase,
        is_completion=decision.is_completion,
        output=decision.output,
        error_type=decision.error_type,
        error_message=decision.error_message,
        read_again=read_again,
    )
    event = step_closed_details(decision, effects, canceled)
    rows.add_history(conn, run.run_id, [(HistoryEventType.STEP_CLOSED, event)], now)
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


def step_closed_details(
    decision: StepClose, effects: StagedEffects, canceled: tuple[str, ...]
) -> dict[str, Any]:
    """Return the details of a decision's ``STEP_CLOSED`` history event (a final failure's
    with its traceback)."""
    details = {
        "stepType": decision.step_type,
        "stepExecutionId": execution_id(decision.step_id),
        "attempt": decision.attempt,
        "decision": decision.kind,
        "errorType": decision.error_type,
        "errorMessage": decision.error_message,
        "nextSteps": [s.step_type for s in effects.next_steps],
        "canceledSteps": [execution_id(i) for i in canceled],
        "attributes": rows.written_keys(effects.writes),
    }
    if decision.traceback is not None:
        details["traceback"] = decision.traceback
    return details


def _check_pending(
    conn: Connection, run: LockedRun, deletions: tuple[ChannelDeletion, ...]
) -> None:
    """Raise ChannelMessageNotFoundError unless every deleted message is still pending."""
    pending = channel_messages.pending_ids(conn, run.run_id, [d.message_id for d in deletions])
    for deletion in deletions:
        if deletion.message_id not in pending:
            raise ChannelMessageNotFoundError(
                f"message {deletion.message_id} of Channel "
                f"{state_key(deletion.channel, deletion.instance)} is no longer pending; "
                "the transactional RPC committed nothing",
                flow_id=run.flow_id,
                field="messageId",
            )


def _delete_channel_messages(
    conn: Connection, run: LockedRun, deletions: tuple[ChannelDeletion, ...], now: int
) -> None:
    """Delete the messages still pending; a missing one is a no-op (checked before if strict)."""
    events = [
        (HistoryEventType.CHANNEL_MESSAGE_DELETED, {"channel": key, "messageId": d.message_id})
        for d in deletions
        if channel_messages.delete_message(conn, run.run_id, d.channel, d.instance, d.message_id)
        for key in (state_key(d.channel, d.instance),)
    ]
    rows.add_history(conn, run.run_id, events, now)


def _publish_channel_messages(
    conn: Connection, run: LockedRun, publications: tuple[ChannelPublication, ...], now: int
) -> tuple[str, ...]:
    """Append the publications, each with a UUIDv7 assigned now, in acceptance order; return
    their IDs."""
    if not publications:
        return ()
    messages = [(p.channel, p.instance, new_ordered_id(), p.value) for p in publications]
    channel_messages.insert_messages(conn, run.run_id, messages, now)
    events = [
        (
            HistoryEventType.CHANNEL_PUBLISHED,
            {"channel": state_key(channel, instance), "messageId": message_id},
        )
        for channel, instance, message_id, _value in messages
    ]
    rows.add_history(conn, run.run_id, events, now)
    return tuple(message_id for _, _, message_id, _ in messages)
