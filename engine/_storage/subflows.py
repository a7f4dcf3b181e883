"""Row-level pieces of SubFlows: who started a child run, and what a parent learns of it.

Like ``rows``, these run inside the transaction of the unit that calls them and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select

from engine._enums import RunStatus
from engine._ids import execution_id
from engine._storage import tables as t
from engine._storage.records import QueuedStep
from engine._storage.rows import LockedRun

_links = t.subflow_links
_INSERT_LINK = insert(_links)
_STATES = select(
    t.runs.c.run_id,
    t.runs.c.flow_id,
    t.runs.c.status,
    t.runs.c.error_type,
    t.runs.c.error_message,
).where(t.runs.c.run_id.in_(bindparam("ids", expanding=True)))
_se = t.step_executions
_COMPLETIONS = (
    select(_se.c.run_id, _se.c.step_type, _se.c.id, _se.c.output)
    .where(_se.c.run_id.in_(bindparam("ids", expanding=True)), _se.c.is_completion.is_(True))
    .order_by(_se.c.closed_at, _se.c.id)
)


def link(
    conn: Connection, child_run_id: str, parent: LockedRun, step: QueuedStep, index: int
) -> None:
    """Record that the parent Step's SubFlow condition ``index`` started ``child_run_id``."""
    conn.execute(
        _INSERT_LINK,
        {
            "child_run_id": child_run_id,
            "parent_flow_id": parent.flow_id,
            "parent_run_id": parent.run_id,
            "parent_step_execution_id": step.execution_id,
            "condition_index": index,
        },
    )


def statuses(conn: Connection, run_ids: Iterable[str]) -> dict[str, RunStatus]:
    """Return the status of each of ``run_ids``."""
    ids = list(run_ids)
    if not ids:
        return {}
    return {row.run_id: RunStatus(row.status) for row in conn.execute(_STATES, {"ids": ids})}


def results(conn: Connection, run_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Return each child run's result as JSON data: IDs, status, completions and error."""
    ids = list(run_ids)
    if not ids:
        return {}
    found = {
        row.run_id: {
            "flowId": row.flow_id,
            "runId": row.run_id,
            "status": str(row.status),
            "completions": [],
            "errorType": row.error_type,
            "errorMessage": row.error_message,
        }
        for row in conn.execute(_STATES, {"ids": ids})
    }
    for row in conn.execute(_COMPLETIONS, {"ids": ids}):
        found[row.run_id]["completions"].append(
            {
                "stepType": row.step_type,
                "stepExecutionId": execution_id(row.id),
                "output": None if row.output is None else json.loads(row.output),
            }
        )
    return found
