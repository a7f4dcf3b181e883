"""Commit units under concurrent transactions on PostgreSQL (READ COMMITTED, real row locks).

Each unit locks its run (a start, the Flow ID's row) before it checks anything, so two units on
one Flow from two connections serialize: the second sees what the first committed. Without
those locks the second start would die on a unique-key violation, and two last Steps closing at
once would each see the other still active and leave the run open forever.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine import FlowAlreadyStartedError, IdReusePolicy
from engine._ids import new_id
from engine._outcomes import OutcomeKind
from engine._storage import sqlalchemy_internals as pg_direct
from engine._storage import tables as t
from engine._storage import units
from engine._storage.postgres.first_starts import first_start
from engine._storage.postgres.step_ends import StepEnd, step_end
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


def queue_step(request: StartRequest, step: QueuedStep) -> Any:
    """The unit of an RPC on ``request``'s run that queues ``step``."""
    return units.commit_rpc(
        flow_id=request.flow_id,
        run_id=request.run_id,
        rpc_name="add",
        effects=StagedEffects(next_steps=(step,)),
        now=NOW,
    )


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
        await a.run_sync(units.start_run(first, NOW))  # holds the new Flow ID's row
        racing = asyncio.ensure_future(run_unit(b, units.start_run(second, NOW)))
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
        await run_unit(conn, units.start_run(request, NOW))
        await run_unit(conn, queue_step(request, two))

    def close(step: QueuedStep) -> Any:
        decision = StepClose(
            step.id, step.step_type, 1, OutcomeKind.GRACEFUL_COMPLETE, output=f'"{step.id}"'
        )
        return units.commit_step(
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


# -- the same decisions as one statement or one call (first_starts, step_ends) -----------------


def new_start(flow_id: str) -> StartRequest:
    """A start with one Step, unnumbered as a start's Step is until its commit numbers it."""
    request, _ = start_request(flow_id, steps=1)
    assert request.start_step is not None
    return replace(request, start_step=replace(request.start_step, id=""))


def first_start_of(request: StartRequest) -> Any:
    """The unit running ``request`` as one statement (as this process: its Steps' claimant)."""
    first = first_start(request, NOW)
    assert first is not None

    return statement_unit(first)


def end_of(step: QueuedStep, kind: OutcomeKind = OutcomeKind.GRACEFUL_COMPLETE) -> StepEnd:
    failed = kind in (OutcomeKind.FAILED, OutcomeKind.FORCE_FAIL)
    decision = StepClose(
        step.id,
        step.step_type,
        1,
        kind,
        output=None if failed else f'"{step.id}"',
        error_type="Boom" if failed else None,
        error_message="it broke" if failed else None,
    )
    found = step_end(
        flow_id=step.flow_id,
        flow_type=step.flow_type,
        run_id=step.run_id,
        attempt=1,
        fence=0,
        effects=StagedEffects(decision=decision),
        now=NOW,
    )
    assert found is not None
    return found


def statement_unit(one: Any) -> Any:
    """A unit running ``one`` (a ``step_ends``, ``step_moves`` or ``first_starts`` commit) on
    a SQLAlchemy Connection, as this process: its Steps' claimant."""

    def unit(conn: Connection) -> bool:
        wrote: bool = one.wrote(pg_direct.fetch(conn, *one.statement("this-process")))
        return wrote

    return unit


async def run_statement(conn: AsyncConnection, unit: Any) -> Any:
    async with conn.begin():
        return await conn.run_sync(unit)


async def history_of(engine: AsyncEngine, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    async with engine.connect() as conn:
        found = await conn.execute(
            select(t.history.c.event_type, t.history.c.details)
            .where(t.history.c.run_id == run_id)
            .order_by(t.history.c.id)
        )
        return [(kind, json.loads(details)) for kind, details in found]


async def test_a_first_start_as_one_statement_writes_what_the_unit_writes(
    pg_engine: AsyncEngine,
) -> None:
    as_unit, as_statement = new_start("by-unit"), new_start("by-statement")
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(as_unit, NOW))
        assert await run_statement(conn, first_start_of(as_statement)) is True
    assert as_statement.start_step is not None
    assert as_statement.start_step.id == f"{as_statement.run_id}:S0-1"
    steps = t.step_executions
    async with pg_engine.connect() as conn:
        found = (
            await conn.execute(
                select(steps.c.run_id, steps.c.step_type, steps.c.state, steps.c.phase).order_by(
                    steps.c.step_type, steps.c.run_id
                )
            )
        ).all()
        counters = (await conn.execute(select(t.step_counters.c.count))).scalars().all()
        pointers = dict(
            (await conn.execute(select(t.flows.c.flow_id, t.flows.c.latest_run_id))).all()
        )
    assert sorted(found) == sorted(
        (run, "S0", "PENDING", "EXECUTE") for run in (as_unit.run_id, as_statement.run_id)
    )
    assert counters == [1, 1]
    assert pointers == {"by-unit": as_unit.run_id, "by-statement": as_statement.run_id}
    assert await history_of(pg_engine, as_statement.run_id) == await history_of(
        pg_engine, as_unit.run_id
    )


async def test_two_first_starts_at_once_give_one_run_and_the_loser_writes_nothing(
    pg_engine: AsyncEngine,
) -> None:
    first, second = new_start("race"), new_start("race")
    async with pg_engine.connect() as a, pg_engine.connect() as b:
        pid = await backend_pid(b)
        transaction = await a.begin()
        assert await a.run_sync(first_start_of(first)) is True  # holds the new Flow ID's row
        racing = asyncio.ensure_future(run_statement(b, first_start_of(second)))
        await blocked_on_a_lock(pg_engine, pid)
        await transaction.commit()
        # The loser wrote nothing: its caller commits the start as a unit, which applies the
        # ID reuse policy (see first_starts).
        assert await racing is False
    async with pg_engine.connect() as conn:
        runs = (await conn.execute(select(t.runs.c.run_id))).scalars().all()
        steps = (await conn.execute(select(t.step_executions.c.run_id))).scalars().all()
    assert runs == [first.run_id]
    assert steps == [first.run_id]


async def test_the_last_two_steps_ending_at_once_in_one_call_each_close_the_run(
    pg_engine: AsyncEngine,
) -> None:
    request, (one, two) = start_request("pair", steps=2)
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(request, NOW))
        await run_unit(conn, queue_step(request, two))
    first, second = end_of(one), end_of(two)
    async with pg_engine.connect() as a, pg_engine.connect() as b:
        pid = await backend_pid(b)
        transaction = await a.begin()
        assert await a.run_sync(statement_unit(first)) is True  # holds the run
        racing = asyncio.ensure_future(run_statement(b, statement_unit(second)))
        await blocked_on_a_lock(pg_engine, pid)
        await transaction.commit()
        assert await racing is True
    # The first saw the second Step still pending; the second, after the lock, saw none.
    assert first.result.changes[0].closed_status is None
    assert second.result.changes[0].closed_status == "COMPLETED"
    kinds = [kind for kind, _ in await history_of(pg_engine, request.run_id)]
    assert kinds[-3:] == ["STEP_CLOSED", "STEP_CLOSED", "FLOW_CLOSED"]


async def test_a_last_step_ending_while_a_commit_queues_a_step_leaves_the_run_open(
    pg_engine: AsyncEngine,
) -> None:
    # The race one SQL statement would lose: it reads as of its start, before the RPC's new
    # Step committed. The function reads after taking the run's lock.
    request, (one, two) = start_request("late-step", steps=2)
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(request, NOW))
    ending = end_of(one)
    rpc = queue_step(request, two)
    async with pg_engine.connect() as a, pg_engine.connect() as b:
        pid = await backend_pid(b)
        transaction = await a.begin()
        await a.run_sync(rpc)  # queues the second Step, holding the run
        racing = asyncio.ensure_future(run_statement(b, statement_unit(ending)))
        await blocked_on_a_lock(pg_engine, pid)
        await transaction.commit()
        assert await racing is True
    assert ending.result.changes[0].closed_status is None
    assert ending.result.changes[0].ended_step_ids == (one.id,)
    async with pg_engine.connect() as conn:
        status = (await conn.execute(select(t.runs.c.status))).scalar_one()
    assert status == "RUNNING"


async def test_a_failing_last_step_in_one_call_fails_the_run_and_cancels_the_rest(
    pg_engine: AsyncEngine,
) -> None:
    request, (one, two) = start_request("failing", steps=2)
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(request, NOW))
        await run_unit(conn, queue_step(request, two))
        ending = end_of(one, OutcomeKind.FORCE_FAIL)
        assert await run_statement(conn, statement_unit(ending)) is True
        # A second call for the same attempt is stale: it writes nothing.
        again = end_of(one, OutcomeKind.FORCE_FAIL)
        assert await run_statement(conn, statement_unit(again)) is False
    change = ending.result.changes[0]
    assert change.closed_status == "FAILED"
    assert change.ended_step_ids == (one.id, two.id)
    events = await history_of(pg_engine, request.run_id)
    assert events[-2][0] == "STEP_CLOSED"
    assert events[-1] == (
        "FLOW_CLOSED",
        {"status": "FAILED", "errorType": "Boom", "errorMessage": "it broke"},
    )
    steps = t.step_executions
    async with pg_engine.connect() as conn:
        states = dict((await conn.execute(select(steps.c.id, steps.c.state))).all())
        run = (await conn.execute(select(t.runs.c.status, t.runs.c.error_type))).one()
    assert states == {one.id: "COMPLETED", two.id: "CANCELED"}
    assert tuple(run) == ("FAILED", "Boom")
