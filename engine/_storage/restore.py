"""The new run of a time travel, from the state right after a commit of the run it leaves.

Pieces of ``travel``'s unit: they run inside its transaction. The new run gets copies of the
source run's history and change log up to the commit, its Attribute values (with their search
values), its pending Channel messages under their IDs, and its Step executions as they were
then: closed ones closed, pending ones pending again at attempt 1 in their phase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, insert, literal, select

from engine._ids import execution_id
from engine._storage import past
from engine._storage import tables as t
from engine._storage.indexes import apply_index_writes
from engine._storage.records import AttributeWrite, IndexWrite, Phase, QueuedStep, StepState
from engine._storage.unit_statements import CLAIMANT, _upsert_attributes

#: ``indexer(name, instance, json)``: the search value a restored write sets, if indexed.
Indexer = Callable[[str, str, str | None], IndexWrite | None]


def copy_history(conn: Connection, old: str, new: str, commit: int) -> None:
    """Copy the source run's events up to ``commit`` (same order, times and details)."""
    h = t.history
    source = (
        select(literal(new), h.c.event_type, h.c.at, h.c.details, h.c.commit_seq)
        .where(h.c.run_id == old, h.c.commit_seq <= commit)
        .order_by(h.c.id)
    )
    conn.execute(
        insert(h).from_select(["run_id", "event_type", "at", "details", "commit_seq"], source)
    )


def copy_log(conn: Connection, old: str, new: str, commit: int) -> None:
    """Copy the source run's change log up to ``commit``."""
    lg = t.change_log
    names = ["commit_seq", "pos", "kind", "name", "instance", "message_id", "value", "at"]
    source = select(literal(new), *[lg.c[n] for n in names], lg.c.external).where(
        lg.c.run_id == old, lg.c.commit_seq <= commit
    )
    conn.execute(insert(lg).from_select(["run_id", *names, "external"], source))


def restore_values(
    conn: Connection, old: str, new: str, commit: int, indexer: Indexer, now: int
) -> list[AttributeWrite]:
    """Set the new run's Attributes to the values right after ``commit`` (and their search
    values, in the order they were written)."""
    found = past.values_at(conn, old, commit)
    writes = [
        AttributeWrite(v.name, v.instance, v.value, index=indexer(v.name, v.instance, v.value))
        for v in found
    ]
    if writes:
        _upsert_attributes(conn).many(
            conn,
            [
                {
                    "run_id": new,
                    "name": w.name,
                    "instance": w.instance,
                    "value": w.value,
                    "blob": False,
                    "updated_at": now,
                }
                for w in writes
            ],
        )
        apply_index_writes(conn, new, writes)
    return writes


def restore_messages(conn: Connection, old: str, new: str, commit: int) -> set[tuple[str, str]]:
    """Give the new run the messages pending right after ``commit`` (same IDs, same order)."""
    found = past.messages_at(conn, old, commit)
    if found:
        conn.execute(
            insert(t.channel_messages),
            [
                {
                    "message_id": m.message_id,
                    "run_id": new,
                    "channel": m.channel,
                    "instance": m.instance,
                    "value": m.value,
                    "published_at": m.published_at,
                }
                for m in found
            ],
        )
    return {(m.channel, m.instance) for m in found}


def restore_steps(
    conn: Connection,
    old: str,
    new: str,
    commit: int,
    *,
    flow_id: str,
    flow_type: str,
    execute_now: str | None,
) -> list[QueuedStep]:
    """Give the new run the Step executions of the moment: closed ones as they closed, pending
    ones pending again (attempt 1, due now) in their phase; return the pending ones."""
    claimant = conn.info.get(CLAIMANT)
    step_rows: list[dict[str, Any]] = []
    waits: list[dict[str, Any]] = []
    queued: list[QueuedStep] = []
    counts: dict[str, int] = {}
    for found in past.steps_at(conn, old, commit):
        row = found.row
        execution = execution_id(row.id)
        step_id = f"{new}:{execution}"
        counts[row.step_type] = counts.get(row.step_type, 0) + 1
        copied = {c.name: row._mapping[c.name] for c in t.step_executions.columns}
        copied.update(id=step_id, run_id=new, claimed_by=None, fence=0, held_locks=None)
        if found.closed:
            step_rows.append(copied)
            continue
        phase = Phase.EXECUTE if execution == execute_now else found.phase
        execute_commit = row.execute_commit if found.phase == Phase.EXECUTE else None
        if execution == execute_now:
            execute_commit = row.created_commit
        copied.update(
            state=StepState.PENDING,
            phase=phase,
            attempt=1,
            due_at=None,
            closed_at=None,
            closed_commit=None,
            execute_commit=execute_commit,
            is_completion=False,
            output=None,
            error_type=None,
            error_message=None,
        )
        step = QueuedStep(
            id=step_id,
            run_id=new,
            flow_id=flow_id,
            flow_type=flow_type,
            step_type=row.step_type,
            input=row.input,
            phase=phase,
            consumed=found.consumed if phase == Phase.EXECUTE else None,
        )
        if claimant is not None:
            copied["claimed_by"], copied["fence"] = claimant, 1
            step.fence = 1
        step_rows.append(copied)
        if step.consumed is not None:
            waits.append(
                {
                    "step_id": step_id,
                    "run_id": new,
                    "spec": found.spec or "{}",
                    "consumed": step.consumed,
                }
            )
        queued.append(step)
    if step_rows:
        conn.execute(insert(t.step_executions), step_rows)
    if waits:
        conn.execute(insert(t.step_waits), waits)
    if counts:
        conn.execute(
            insert(t.step_counters),
            [{"run_id": new, "step_type": k, "count": n} for k, n in sorted(counts.items())],
        )
    return queued
