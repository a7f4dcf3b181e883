"""The engine's load, read in two statements: open runs by Flow type, and the pending Steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, case, func, select

from engine._enums import RunStatus
from engine._storage import tables as t
from engine._storage.reads import Reader
from engine._storage.records import Phase, StepState


@dataclass(frozen=True)
class LoadCounts:
    """Counts of open runs and pending Step executions at one instant (microseconds)."""

    open_runs: dict[str, int]
    steps_pending: int
    steps_due: int
    oldest_due_at: int | None
    timers_scheduled: int


async def load_counts(database: Reader, now: int) -> LoadCounts:
    """Return the open runs by Flow type and the state of the pending Step executions.

    A Step execution is due when it runs next at ``now`` or earlier (its ``due_at``, or its
    creation when it has none) and is not waiting for conditions; a timer is anything due
    later: a delayed Step, a retry, or an open run's Flow timeout.
    """
    runs, steps = t.runs, t.step_executions
    when = func.coalesce(steps.c.due_at, steps.c.created_at)
    due = and_(steps.c.phase != Phase.WAITING.value, when <= now)
    steps_query = select(
        func.count(),
        func.coalesce(func.sum(case((due, 1), else_=0)), 0),
        func.min(case((due, when), else_=None)),
        func.coalesce(func.sum(case((steps.c.due_at > now, 1), else_=0)), 0),
    ).where(steps.c.state == StepState.PENDING.value)
    running = runs.c.status == RunStatus.RUNNING.value
    runs_query = (
        select(runs.c.flow_type, func.count(), func.count(runs.c.timeout_at))
        .where(running)
        .group_by(runs.c.flow_type)
    )

    def read(conn: Connection) -> tuple[list[tuple[str, int, int]], tuple[int, int, Any, int]]:
        run_rows = [(str(r[0]), int(r[1]), int(r[2])) for r in conn.execute(runs_query)]
        row = conn.execute(steps_query).one()
        return run_rows, (int(row[0]), int(row[1]), row[2], int(row[3]))

    run_rows, (pending, due_now, oldest, timers) = await database.scan(read)
    return LoadCounts(
        open_runs={flow_type: count for flow_type, count, _ in run_rows},
        steps_pending=pending,
        steps_due=due_now,
        oldest_due_at=None if oldest is None else int(oldest),
        timers_scheduled=timers + sum(armed for _, _, armed in run_rows),
    )
