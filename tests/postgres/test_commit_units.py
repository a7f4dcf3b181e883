"""Commit units under concurrent transactions on PostgreSQL (READ COMMITTED, real row locks).

Each unit locks its run (a start, the Flow ID's row) before it checks anything, so two units on
one Flow from two connections serialize: the second sees what the first committed. Without
those locks the second start would die on a unique-key violation, and two last Steps closing at
once would each see the other still active and leave the run open forever.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine import FlowAlreadyStartedError, IdReusePolicy
from engine._ids import new_id
from engine._outcomes import OutcomeKind
from engine._storage import commits
from engine._storage import tables as t
from engine._storage.records import (
    CommitResult,
    Phase,
    QueuedStep,
    StagedEffects,
    StartRequest,
    StepClose,
)
from tests.support.waiting import eventually

NOW = 1_800_000_000_000_000


def start_request(flow_id: str, *, steps: int = 0) -> tuple[StartRequest, list[QueuedStep]]:
    run_id = new_id()
    queued = [
        QueuedStep(new_id(), run_id, flow_id, "F", f"S{n}", "null", Phase.EXECUTE)
        for n in range(steps)
    ]
    request = StartRequest(
        flow_id=flow_id,
        flow_type="F",
        run_id=run_id,
        input="null",
        request_id=None,
        id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE,
        ignore_already_started=False,
        timeout_at=None,
        writes=(),
        start_step=queued[0] if queued else None,
    )
    return request, queued


async def backend_pid(conn: AsyncConnection) -> int:
    """Return the server process of ``conn`` (and end the transaction the query began)."""
    pid: int = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    await conn.rollback()
    return pid


async def blocked_on_a_lock(engine: AsyncEngine, pid: int) -> None:
    """Wait until the backend ``pid`` waits for a lock another transaction holds."""

    async def waiting() -> bool:
        async with engine.connect() as probe:
            kind = (
                await probe.execute(
                    text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"),
                    {"pid": pid},
                )
            ).scalar()
        return kind == "Lock"

    await eventually(waiting, what="the second transaction waiting for the first's lock")


async def run_unit(conn: AsyncConnection, unit: Any) -> CommitResult:
    async with conn.begin():
        result: CommitResult = await conn.run_sync(unit)
        return result


async def test_two_starts_of_a_new_flow_id_at_once_give_one_run_and_flow_already_started(
    pg_engine: AsyncEngine,
) -> None:
    first, _ = start_request("race")
    second, _ = start_request("race")
    async with pg_engine.connect() as a, pg_engine.connect() as b:
        pid = await backend_pid(b)
        transaction = await a.begin()
        await a.run_sync(commits.start_run(first, NOW))  # holds the new Flow ID's row
        racing = asyncio.ensure_future(run_unit(b, commits.start_run(second, NOW)))
        await blocked_on_a_lock(pg_engine, pid)
        await transaction.commit()
        with pytest.raises(FlowAlreadyStartedError) as refused:
            await racing
    assert refused.value.run_id == first.run_id
    async with pg_engine.connect() as conn:
        runs = (await conn.execute(select(t.runs.c.run_id))).scalars().all()
        latest = (await conn.execute(select(t.flows.c.latest_run_id))).scalars().all()
    assert runs == [first.run_id]
    assert latest == [first.run_id]


async def test_the_last_two_steps_closing_at_once_close_the_run(pg_engine: AsyncEngine) -> None:
    request, (one, two) = start_request("pair", steps=2)
    async with pg_engine.connect() as conn:
        await run_unit(conn, commits.start_run(request, NOW))
        await run_unit(
            conn,
            commits.commit_rpc(
                flow_id="pair",
                run_id=request.run_id,
                rpc_name="add",
                effects=StagedEffects(next_steps=(two,)),
                now=NOW,
            ),
        )

    def close(step: QueuedStep) -> Any:
        decision = StepClose(
            step.id, step.step_type, 1, OutcomeKind.GRACEFUL_COMPLETE, output=f'"{step.id}"'
        )
        return commits.commit_step(
            run_id=step.run_id, attempt=1, effects=StagedEffects(decision=decision), now=NOW
        )

    async with pg_engine.connect() as a, pg_engine.connect() as b:
        pid = await backend_pid(b)
        transaction = await a.begin()
        first = await a.run_sync(close(one))  # holds the run's row
        racing = asyncio.ensure_future(run_unit(b, close(two)))
        await blocked_on_a_lock(pg_engine, pid)
        await transaction.commit()
        second = await racing
    # The first saw the second Step still active; the second, after the lock, saw none.
    assert first.changes[0].closed_status is None
    assert second.changes[0].closed_status == "COMPLETED"
    async with pg_engine.connect() as conn:
        status = (await conn.execute(select(t.runs.c.status))).scalar_one()
    assert status == "COMPLETED"
