"""The one-call commits find their rows by primary key, whatever plan PostgreSQL makes.

A run looked up by ID and tested for its status could be found through an index that leads
with the status, and a Step execution through one that leads with its state; PostgreSQL's
generic plans, made once while the tables are small, chose those about as often as the
primary key, and then read every running run (or pending Step) per commit. Here the plans of
every statement a Step move, a Step end and a relayed RPC's commit run, nested ones included,
are read back from ``auto_explain`` on an empty database with generic plans forced: none may
look a row up through those indexes.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from engine._outcomes import OutcomeKind
from engine._storage import units
from engine._storage.postgres.step_ends import step_end
from engine._storage.postgres.step_moves import step_move
from engine._storage.records import Phase, QueuedStep, StagedEffects, StepClose
from tests.postgres.test_commit_units import (
    NOW,
    run_statement,
    run_unit,
    start_request,
    statement_unit,
)

#: Indexes that hold every running run or pending Step under one key.
BROAD_INDEXES = ("ix_runs_status", "ix_runs_timeout", "ix_steps_claimable")
_EXPLAIN_EVERYTHING = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_nested_statements = on",
    "SET plan_cache_mode = force_generic_plan",
    "SET client_min_messages = log",
)


async def explaining(conn: AsyncConnection) -> list[str]:
    """Have the server send ``conn`` the plan of every statement it runs from now on; return
    the list they are collected in."""
    plans: list[str] = []
    raw = (await conn.get_raw_connection()).driver_connection
    raw.add_log_listener(lambda _conn, message: plans.append(message.message))
    for setting in _EXPLAIN_EVERYTHING:
        await conn.execute(text(setting))
    await conn.commit()
    plans.clear()
    return plans


def broad_lookups(plans: list[str]) -> list[str]:
    """The plans that scan one of the broad indexes."""
    return [p for p in plans if any(f"using {index} " in p for index in BROAD_INDEXES)]


async def test_a_step_move_a_step_end_and_a_kept_rpc_commit_use_primary_keys(
    pg_engine: AsyncEngine,
) -> None:
    request, (first,) = start_request("plans", steps=1)
    async with pg_engine.connect() as conn:
        await run_unit(conn, units.start_run(request, NOW))
        plans = await explaining(conn)

        # A relayed RPC's commit: no lock rows taken, so none must be held; the run is open.
        seq = await conn.execute(
            text("SELECT dexlite_keep_rpc_locks(:flow, 'holder', 0, :run)"),
            {"flow": request.flow_id, "run": request.run_id},
        )
        assert seq.scalar_one() == 2  # the run's second commit: its start was the first
        await conn.commit()

        # The first Step moves the Flow on to a second...
        second = QueuedStep("", request.run_id, request.flow_id, "F", "S1", "null", Phase.EXECUTE)
        decision = StepClose(first.id, first.step_type, 1, OutcomeKind.GRACEFUL_COMPLETE)
        move = step_move(
            flow_id=request.flow_id,
            flow_type="F",
            run_id=request.run_id,
            attempt=1,
            fence=0,
            effects=StagedEffects(decision=decision, next_steps=(second,)),
            now=NOW,
        )
        assert move is not None
        assert await run_statement(conn, statement_unit(move)) is True
        # ...which ends the run.
        assert second.id and second.fence == 1  # numbered and claimed by the move
        end = step_end(
            flow_id=request.flow_id,
            flow_type="F",
            run_id=request.run_id,
            attempt=1,
            fence=second.fence,
            effects=StagedEffects(
                decision=replace(decision, step_id=second.id, step_type="S1", output='"x"')
            ),
            now=NOW,
        )
        assert end is not None
        assert await run_statement(conn, statement_unit(end)) is True
        assert end.result.changes[0].closed_status == "COMPLETED"

    statements = " ".join(plans)
    for nested in ("FROM runs", "FROM step_executions", "UPDATE runs", "UPDATE step_executions"):
        assert nested in statements, f"no plan of a statement with {nested!r}"
    assert broad_lookups(plans) == []
