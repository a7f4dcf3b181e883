"""Commit units: each function here returns a ``unit(conn)`` that runs inside one transaction.

Every unit first locks the run it changes (a start locks the Flow ID's row), then checks its
preconditions under that lock, then applies its effects through ``effects.apply_effects``. So
units on one run serialize even when several connections write at once, and a check is never
made on state another transaction is about to change.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from sqlalchemy import Connection, delete, select

from engine._enums import HistoryEventType, RunStatus
from engine._ids import execution_id, state_key, to_rfc3339
from engine._storage import channel_messages, durable_waits, rows, start_units
from engine._storage import tables as t
from engine._storage.apply import apply_effects, complete_if_met
from engine._storage.journal import JOURNAL, Journal
from engine._storage.records import (
    ChannelDeletion,
    ChannelPublication,
    CommitResult,
    EnterExecute,
    EnterWait,
    QueuedStep,
    RunChange,
    RunClose,
    StagedEffects,
    StartRequest,
    StepClose,
)
from engine._storage.rows import LockedRun
from engine.errors import ChannelMessageNotFoundError, FlowNotActiveOrNotFoundError

Unit = Callable[[Connection], CommitResult]
T = TypeVar("T")


def journaled(
    unit: Callable[[Connection], T], *, external: bool = False
) -> Callable[[Connection], T]:
    """Wrap ``unit`` so that it runs with a journal of its own, written when it ends.

    A unit may run twice (replayed after its batch rolled back): each run starts afresh.
    """

    def run(conn: Connection) -> T:
        # Held here: after a lost connection, Connection.info raises instead of answering,
        # and would hide the error that lost it.
        info = conn.info
        log = info[JOURNAL] = Journal(external=external)
        try:
            result = unit(conn)
            log.flush(conn)
            return result
        finally:
            info.pop(JOURNAL, None)

    return run


class StaleAttemptError(Exception):
    """The Step attempt was canceled, retried or its run closed before it could commit."""


def _open_run(conn: Connection, run_id: str) -> LockedRun | None:
    run = rows.lock_run(conn, run_id)
    return run if run is not None and run.is_running else None


def _current_attempt(
    conn: Connection, run_id: str, step_id: str, attempt: int, fence: int
) -> LockedRun:
    run = rows.lock_run_at_attempt(conn, run_id, step_id, attempt, fence)
    if run is None:
        raise StaleAttemptError(step_id)
    return run


# -- starts -----------------------------------------------------------------------------------


def start_run(request: StartRequest, now: int) -> Unit:
    """Create a run with its initial Attributes and start Step, honouring ID reuse."""

    def unit(conn: Connection) -> CommitResult:
        outcome, changes = start_units.insert_run(conn, request, now)
        return CommitResult(tuple(changes), outcome)

    return journaled(unit)


# -- handlers' effects ------------------------------------------------------------------------


def commit_rpc(
    *, flow_id: str, run_id: str, rpc_name: str, effects: StagedEffects, now: int
) -> Unit:
    """Commit an RPC's effects to its open run."""

    def unit(conn: Connection) -> CommitResult:
        run = _open_run(conn, run_id)
        if run is None:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} is not active; RPC {rpc_name} has durable effects and needs an "
                "active run",
                flow_id=flow_id,
                operation="invokeRpc",
            )
        changes = apply_effects(conn, run, effects, now)
        event = rpc_committed_details(rpc_name, effects, changes[0].ended_step_ids)
        rows.add_history(conn, run_id, [(HistoryEventType.RPC_COMMITTED, event)], now)
        return CommitResult(tuple(changes))

    return journaled(unit, external=True)


def rpc_committed_details(
    rpc_name: str, effects: StagedEffects, canceled: tuple[str, ...]
) -> dict[str, Any]:
    """Return the details of an RPC's ``RPC_COMMITTED`` history event."""
    return {
        "rpc": rpc_name,
        "attributes": rows.written_keys(effects.writes),
        "canceledSteps": [execution_id(i) for i in canceled],
        "nextSteps": [s.step_type for s in effects.next_steps],
    }


def commit_step(
    *, run_id: str, attempt: int, effects: StagedEffects, now: int, fence: int = 0
) -> Unit:
    """Commit a Step attempt's result (a decision, a final failure or a wait_for's end), made
    under the claim ``fence``."""
    decision = effects.decision
    assert isinstance(decision, StepClose | EnterExecute | EnterWait)

    def unit(conn: Connection) -> CommitResult:
        run = _current_attempt(conn, run_id, decision.step_id, attempt, fence)
        return CommitResult(tuple(apply_effects(conn, run, effects, now)))

    return journaled(unit)


def retry_step(
    *,
    step: QueuedStep,
    attempt: int,
    error_type: str,
    error_message: str,
    now: int,
    traceback: str | None = None,
) -> Unit:
    """Record a failed attempt (with its bounded ``traceback``) and schedule ``step``, its
    next one (still under the failed attempt's claim, ``step.fence``); its writes are
    discarded."""

    def unit(conn: Connection) -> CommitResult:
        run = _current_attempt(conn, step.run_id, step.id, attempt, step.fence)
        rows.requeue_step(conn, step)
        event = {
            "stepExecutionId": step.execution_id,
            "attempt": attempt,
            "errorType": error_type,
            "errorMessage": error_message,
            "retryAt": to_rfc3339(step.due_at),
            "traceback": traceback,
        }
        rows.add_history(conn, run.run_id, [(HistoryEventType.STEP_ATTEMPT_FAILED, event)], now)
        return CommitResult(
            (RunChange(run.flow_id, run.flow_type, run.run_id, queued_steps=(step,)),)
        )

    return journaled(unit)


def stop_run(
    *,
    flow_id: str,
    run_id: str | None,
    close: RunClose,
    now: int,
    only_if_running: bool = False,
    effects: StagedEffects | None = None,
) -> Unit:
    """Close the latest (or given) run of ``flow_id``, after applying ``effects`` (a timeout
    handler's writes and Channel work) in the same transaction; the unit's value is the run
    ID, or None when ``only_if_running`` and the run is no longer open."""
    staged = replace(effects or StagedEffects(), decision=close)

    def unit(conn: Connection) -> CommitResult:
        if run_id is None:
            run: LockedRun | None = rows.lock_latest_run(conn, flow_id)
        else:
            run = rows.lock_run(conn, run_id)
            if run is not None and run.flow_id != flow_id:
                run = None
        if run is None or not run.is_running:
            if only_if_running:
                return CommitResult()
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} has no active run", flow_id=flow_id, operation="stopFlow"
            )
        return CommitResult(tuple(apply_effects(conn, run, staged, now)), run.run_id)

    return journaled(unit)


def set_attributes(
    *, flow_id: str, run_id: str, effects: StagedEffects, now: int, closed_erase: bool
) -> Unit:
    """Apply a client's Attribute writes to an open run, or erase hard-delete rows of a closed
    one."""

    def unit(conn: Connection) -> CommitResult:
        run = rows.lock_run(conn, run_id)
        if run is None or (not run.is_running and not closed_erase):
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} run {run_id} is not active",
                flow_id=flow_id,
                operation="setAttributes",
            )
        changes = apply_effects(conn, run, effects, now)
        event = {"attributes": rows.written_keys(effects.writes), "erase": closed_erase}
        rows.add_history(conn, run_id, [(HistoryEventType.ATTRIBUTES_SET, event)], now)
        return CommitResult(tuple(changes))

    return journaled(unit, external=True)


# -- Channels ---------------------------------------------------------------------------------


def complete_wait(*, step: QueuedStep, now: int) -> Unit:
    """Complete a Step execution's wait on Channel conditions if it is met now.

    Readiness is decided here, from the queues under the run's lock: the winning conditions'
    messages are consumed and the execution moves to ``execute`` in this one transaction. The
    unit's value is True when the wait completed, False when it is not met (nothing changes),
    None when the execution no longer waits.
    """

    def unit(conn: Connection) -> CommitResult:
        run = _open_run(conn, step.run_id)
        text = None if run is None else durable_waits.waiting_spec(conn, step.id)
        if run is None or text is None:
            return CommitResult(value=None)
        execute = complete_if_met(conn, run, step, json.loads(text), now)
        if execute is None:
            return CommitResult(value=False)
        change = RunChange(run.flow_id, run.flow_type, run.run_id, queued_steps=(execute,))
        return CommitResult((change,), True)

    return journaled(unit)


def publish_message(
    *, flow_id: str, run_id: str, publication: ChannelPublication, now: int
) -> Unit:
    """Publish one message to an open run from outside it; the unit's value is its ID."""

    def unit(conn: Connection) -> CommitResult:
        run = _open_run(conn, run_id)
        if run is None:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} has no active run", flow_id=flow_id, operation="publishToChannel"
            )
        changes = apply_effects(conn, run, StagedEffects(channel_publications=(publication,)), now)
        return CommitResult(tuple(changes), changes[0].message_ids[0])

    return journaled(unit, external=True)


def delete_message(*, flow_id: str, run_id: str, deletion: ChannelDeletion, now: int) -> Unit:
    """Delete one pending message of an open run from outside it (strict: a message that is
    no longer pending is CHANNEL_MESSAGE_NOT_FOUND)."""

    def unit(conn: Connection) -> CommitResult:
        run = _open_run(conn, run_id)
        if run is None:
            raise FlowNotActiveOrNotFoundError(
                f"Flow {flow_id} has no active run",
                flow_id=flow_id,
                operation="deleteChannelMessage",
            )
        if not channel_messages.pending_ids(conn, run.run_id, [deletion.message_id]):
            # Said here, not by the RPC check: this call deleted nothing and had nothing else.
            raise ChannelMessageNotFoundError(
                f"message {deletion.message_id} of Channel "
                f"{state_key(deletion.channel, deletion.instance)} is not pending (consumed or "
                "deleted already, or never published)",
                flow_id=flow_id,
                field="messageId",
            )
        effects = StagedEffects(channel_deletions=(deletion,), strict_deletions=True)
        return CommitResult(tuple(apply_effects(conn, run, effects, now)))

    return journaled(unit, external=True)


# -- retention --------------------------------------------------------------------------------


def purge_closed_runs(*, before: int, limit: int) -> Unit:
    """Delete up to ``limit`` runs closed before ``before`` with every row they own.

    A Flow whose latest run goes is removed too; the unit's value is (purged run IDs, removed
    Flow IDs) so the caller can delete the removed Flows' hard-delete values.
    """

    def unit(conn: Connection) -> CommitResult:
        runs = t.runs
        ids: list[str] = list(
            conn.execute(
                select(runs.c.run_id)
                .where(runs.c.status != RunStatus.RUNNING, runs.c.closed_at < before)
                .order_by(runs.c.closed_at)
                .limit(limit)
            ).scalars()
        )
        if not ids:
            return CommitResult(value=([], []))
        for table in (
            t.attributes,
            t.step_waits,
            t.step_counters,
            t.channel_messages,
            t.step_executions,
            t.history,
            t.change_log,
            t.search_values,
            t.search_keywords,
            t.search_texts,
        ):
            conn.execute(delete(table).where(table.c.run_id.in_(ids)))
        links = t.subflow_links  # a purged child's; a purged parent's children keep its name
        conn.execute(delete(links).where(links.c.child_run_id.in_(ids)))
        gone: list[str] = list(
            conn.execute(
                select(t.flows.c.flow_id).where(t.flows.c.latest_run_id.in_(ids))
            ).scalars()
        )
        if gone:
            conn.execute(delete(t.flows).where(t.flows.c.flow_id.in_(gone)))
        conn.execute(delete(runs).where(runs.c.run_id.in_(ids)))
        return CommitResult(value=(ids, gone))

    return unit
