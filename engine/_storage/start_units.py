"""Starting runs inside a unit's transaction: a start of its own, or a parent's SubFlow.

The Flow ID's row and its latest run are locked before anything is decided, so two starts of
one Flow ID serialize; a new Flow ID is claimed with an insert that cannot collide.
"""

from __future__ import annotations

import json
from dataclasses import replace

from sqlalchemy import Connection

from engine._enums import HistoryEventType, IdReusePolicy, RunStatus, SubFlowReusePolicy
from engine._storage import rows, subflows
from engine._storage.records import QueuedStep, RunChange, StartOutcome, StartRequest, SubFlowStart
from engine._storage.rows import LockedRun
from engine.errors import FlowAlreadyStartedError

#: How a SubFlow start met its child: a new run, or an existing run it attached to.
STARTED, ATTACHED = HistoryEventType.SUBFLOW_STARTED, HistoryEventType.SUBFLOW_ATTACHED


def insert_run(
    conn: Connection, request: StartRequest, now: int
) -> tuple[StartOutcome, list[RunChange]]:
    """Start ``request`` inside the caller's transaction (a start, or a parent Step's commit).

    Returns the outcome and the runs it changed: the new run, and the run it terminated under
    TERMINATE_IF_RUNNING. Raises FlowAlreadyStartedError when the ID reuse policy refuses.
    """
    for _ in range(2):  # a second round only after losing the race to create a new Flow ID
        latest = rows.lock_latest_run(conn, request.flow_id)
        changes: list[RunChange] = []
        if latest is not None:
            same_request = (
                request.request_id is not None and latest.request_id == request.request_id
            )
            if same_request and request.ignore_already_started:
                return StartOutcome(latest.run_id, False), []
            changes.extend(_make_room(conn, request, latest, now))
        # The run goes in first: flows.latest_run_id refers to it.
        rows.insert_run(conn, request, now)
        if latest is None:
            if not rows.claim_flow_id(conn, request):
                # Another start created this Flow ID first: undo ours and decide again, now
                # under the lock of its row.
                rows.delete_run(conn, request.run_id)
                continue
        else:
            rows.point_flow_at(conn, request)
        rows.apply_writes(conn, request.run_id, request.writes, now)
        start_steps = () if request.start_step is None else (request.start_step,)
        rows.insert_steps(conn, start_steps, now)
        event = {
            "flowType": request.flow_type,
            "requestId": request.request_id,
            # The run's input, as stored (explorers show it; bytes keep their marker).
            "input": json.loads(request.input),
            "initialAttributes": rows.written_keys(request.writes),
        }
        rows.add_history(conn, request.run_id, [(HistoryEventType.FLOW_STARTED, event)], now)
        changes.append(
            RunChange(
                flow_id=request.flow_id,
                flow_type=request.flow_type,
                run_id=request.run_id,
                writes=request.writes,
                queued_steps=start_steps,
                started=True,
                timeout_at=request.timeout_at,
            )
        )
        return StartOutcome(request.run_id, True), changes
    raise AssertionError("a Flow ID row exists after losing the race to create it")


def _make_room(
    conn: Connection, request: StartRequest, latest: rows.LatestRun, now: int
) -> list[RunChange]:
    """Apply the ID reuse policy to the Flow ID's latest run: refuse, or terminate it."""
    policy = request.id_reuse_policy
    if latest.is_running:
        if policy != IdReusePolicy.TERMINATE_IF_RUNNING:
            raise FlowAlreadyStartedError(
                f"Flow {request.flow_id} is already running (run {latest.run_id})",
                flow_id=request.flow_id,
                run_id=latest.run_id,
            )
        return [terminate(conn, latest, "a new start (TERMINATE_IF_RUNNING)", now)]
    if policy == IdReusePolicy.REJECT_DUPLICATE or (
        policy == IdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY and latest.status == RunStatus.COMPLETED
    ):
        raise FlowAlreadyStartedError(
            f"Flow ID {request.flow_id} was used by run {latest.run_id} ({latest.status}) and "
            f"the ID reuse policy {policy} refuses a new run",
            flow_id=request.flow_id,
            run_id=latest.run_id,
        )
    return []


def terminate(conn: Connection, run: LockedRun, why: str, now: int) -> RunChange:
    """Close a running run as TERMINATED, canceling its Steps."""
    canceled = rows.close_run(
        conn, run.run_id, RunStatus.TERMINATED, now, error_message=f"terminated by {why}"
    )
    return RunChange(
        run.flow_id,
        run.flow_type,
        run.run_id,
        ended_step_ids=canceled,
        closed_status=RunStatus.TERMINATED,
    )


def start_subflow(
    conn: Connection, parent: LockedRun, step: QueuedStep, start: SubFlowStart, now: int
) -> tuple[str, str, list[RunChange]]:
    """Start the child of a parent Step's SubFlow condition, or attach to its existing run.

    A matching Request ID (a retried start of the same parent run) always attaches. Otherwise
    the reuse policy decides, by the existing run's status (see SubFlowReusePolicy). Returns
    (child run ID, STARTED or ATTACHED, the runs the start changed).
    """
    request = start.request
    latest = rows.lock_latest_run(conn, request.flow_id)
    mode = IdReusePolicy.ALLOW_DUPLICATE
    if latest is not None:
        if latest.request_id == request.request_id:
            return latest.run_id, ATTACHED, []
        policy = start.policy
        if latest.is_running:
            if policy != SubFlowReusePolicy.ALWAYS_RESTART:
                return latest.run_id, ATTACHED, []
            mode = IdReusePolicy.TERMINATE_IF_RUNNING
        elif policy == SubFlowReusePolicy.ATTACH or (
            policy == SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
            and latest.status == RunStatus.COMPLETED
        ):
            return latest.run_id, ATTACHED, []
    outcome, changes = insert_run(conn, replace(request, id_reuse_policy=mode), now)
    subflows.link(conn, outcome.run_id, parent, step, start.index)
    return outcome.run_id, STARTED, changes
