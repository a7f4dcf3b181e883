"""listPendingSteps: what a run's open Step executions do next, and what they wait on."""

from __future__ import annotations

import json

from engine._ids import execution_id, moment, state_key
from engine._runtime.ports import Database
from engine._storage import durable_waits, reads
from engine._storage.records import Phase
from engine.errors import FlowNotFoundError
from engine.results import PendingStep, PendingSteps


async def pending_steps(database: Database, flow_id: str, run_id: str | None) -> PendingSteps:
    """Return the pending Step executions of the run (the latest by default), oldest first."""
    run = await reads.load_run(database, flow_id, run_id)
    if run is None:
        raise FlowNotFoundError(
            f"Flow {flow_id} was not found", flow_id=flow_id, operation="listPendingSteps"
        )
    rows = await reads.pending_steps(database, run.run_id)
    return PendingSteps(flow_id, run.run_id, [_pending(*row) for row in rows])


def _pending(
    row_id: str,
    step_type: str,
    phase: str,
    attempt: int,
    created_at: int,
    due_at: int | None,
    spec_json: str | None,
) -> PendingStep:
    timers: list[int] = []
    channels: list[str] = []
    children: list[str] = []
    if phase == Phase.WAITING and spec_json is not None:
        spec = json.loads(spec_json)
        timers = durable_waits.deadlines(spec)
        channels = sorted(state_key(*queue) for queue in durable_waits.queues(spec))
        children = [node["flowId"] for node in durable_waits.subflows(spec) if node.get("flowId")]
    elif phase == Phase.EXECUTE and attempt == 1 and due_at is not None:
        timers = [due_at]  # a Wait on Timers alone: its execute is due when they fire
    return PendingStep(
        step_execution_id=execution_id(row_id),
        step_type=step_type,
        phase=phase,
        attempt=attempt,
        created_at=moment(created_at),
        due_at=None if due_at is None else moment(due_at),
        timers=[moment(when) for when in timers],
        channels=channels,
        sub_flows=children,
    )
