"""The differential tests see every step of every PostgreSQL fast path: take one out and the
fast path no longer writes what its plain unit writes.

Each mutation replaces one step of a function (its file's text, installed on the fast
database for the test) or of a statement (its module's text) by a no-op, and runs a fixed
case through the same check as ``test_commit_differential``: the check passes on the fast
path as it is and fails on the mutant (a difference of rows or answer, or a constraint the
plain unit keeps, broken).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from engine._ids import new_id
from engine._outcomes import OutcomeKind
from engine._storage.postgres import deferred_flush, first_starts
from engine._storage.records import AttributeWrite, LoadPlan, Phase, QueuedStep, StepClose
from tests.postgres.test_commit_differential import (
    FUNCTIONS,
    Databases,
    RPCCase,
    StartCase,
    StepCase,
    TailCase,
    TakeCase,
    World,
    check_kept_rpc_writes,
    check_rpc_writes,
    check_start,
    check_step,
    check_tail,
    check_take,
    databases,
)

__all__ = ["databases"]  # the fixture, used by name


# -- the comparison sees every step of every fast path -------------------------------------------


def fixed_world(*, others: tuple[str, ...] = (), completed: bool = False) -> World:
    """An open run that keeps its change log, with an Attribute and a map instance set."""
    return World(
        flow_id=f"flow-{uuid.uuid4()}",
        run_id=new_id(),
        change_log=True,
        others=others,
        values=(("n", "", "1"), ("m", "i1", '"x"')),
        completed_one=completed,
        open=True,
    )


def start_case() -> StartCase:
    world = fixed_world()
    request = replace(world, run_id=new_id()).request()
    return StartCase(world, False, request)


def step_case(
    kind: OutcomeKind = OutcomeKind.GO_TO,
    *,
    moves: int = 1,
    others: tuple[str, ...] = (),
    completed: bool = False,
    fence: int = 1,
) -> StepCase:
    world = fixed_world(others=others, completed=completed)
    decision = StepClose(
        world.step,
        "A",
        1,
        kind,
        output='"done"' if kind.is_completion else None,
        error_type="Boom" if kind == OutcomeKind.FAILED else None,
        error_message="it broke" if kind == OutcomeKind.FAILED else None,
    )
    steps = tuple(
        QueuedStep("", world.run_id, world.flow_id, "F", "A", f'"{n}"', Phase.EXECUTE)
        for n in range(moves)
    )
    return StepCase(world, decision, steps, fence)


def rpc_case(*, left: int = 2, waiter: bool = False, closed: bool = False) -> RPCCase:
    world = replace(fixed_world(), open=not closed)
    writes = (
        AttributeWrite("n", "", "2"),
        AttributeWrite("m", "i1", None),
        AttributeWrite("m", "i2", '"y"'),
    )
    return RPCCase(world, writes, ("m", "n"), left, waiter)


def take_case(*, held: tuple[str, ...] = ()) -> TakeCase:
    plan = LoadPlan(names=None, whole_maps=("m",), instances=(("h", "i1"),))
    return TakeCase(fixed_world(), True, ("n",), held, plan)


def tail_case() -> TailCase:
    step = step_case(OutcomeKind.GO_TO, moves=0)
    return TailCase(step, (AttributeWrite("n", "", "3"),), True)


@contextlib.asynccontextmanager
async def function_changed(
    engine: AsyncEngine, name: str, old: str, new: str
) -> AsyncIterator[None]:
    """Install function ``name`` with ``old`` replaced by ``new``, then put it back."""
    text = (FUNCTIONS / f"{name}.sql").read_text()
    assert text.count(old) == 1, old
    async with engine.begin() as conn:
        await conn.exec_driver_sql(text.replace(old, new))
    try:
        yield
    finally:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(text)


@contextlib.contextmanager
def statement_changed(module: Any, name: str, old: str, new: str) -> Iterator[None]:
    """Make ``module.name``, a statement's text, have ``old`` replaced by ``new`` a while."""
    text = getattr(module, name)
    assert text.count(old) == 1, old
    setattr(module, name, text.replace(old, new))
    try:
        yield
    finally:
        setattr(module, name, text)


@dataclass(frozen=True)
class Mutation:
    """One step of a fast path taken out: ``old`` replaced by ``new`` in a function's file
    (``function``) or in a module's statement (``module.name``)."""

    check: Callable[[Databases, Any], Any]
    case: Callable[[], Any]
    old: str
    new: str
    function: str = ""
    module: Any = None
    name: str = "SQL"


MOVE, END = "dexlite_move_step", "dexlite_end_step"
WRITES, KEEP, TAKE = (
    "dexlite_commit_rpc_writes",
    "dexlite_keep_rpc_locks",
    "dexlite_take_rpc_locks_and_load",
)
NUMBER = (
    'UPDATE runs SET commit_seq = commit_seq + 1 WHERE run_id = p_run COLLATE "C"\n'
    "        RETURNING commit_seq INTO seq;"
)

MUTATIONS = {
    # A new Flow ID's start.
    "start: the Flow ID's row": Mutation(
        check_start,
        start_case,
        (
            "INSERT INTO flows (flow_id, flow_type, latest_run_id)\n"
            "    VALUES ($1::varchar, $2::varchar, $3::varchar)\n"
            "    ON CONFLICT (flow_id) DO NOTHING\n"
            "    RETURNING flow_id"
        ),
        "SELECT $1::varchar AS flow_id",
        module=first_starts,
    ),
    "start: the counter": Mutation(
        check_start,
        start_case,
        "SELECT $3::varchar, $10::varchar, 1 FROM r WHERE",
        "SELECT $3::varchar, $10::varchar, 1 FROM r WHERE false AND",
        module=first_starts,
    ),
    "start: the start Step": Mutation(
        check_start,
        start_case,
        "FROM r WHERE $10::varchar IS NOT NULL\n), h",
        "FROM r WHERE false\n), h",
        module=first_starts,
    ),
    "start: the history": Mutation(
        check_start,
        start_case,
        "$14::text, r.seq FROM r",
        "$14::text, r.seq FROM r WHERE false",
        module=first_starts,
    ),
    # A Step's move.
    # (The move's check that the run is open stands in for the attempt's: a run's close
    # cancels its pending executions, so no mutation of it alone can show.)
    "move: the attempt's check": Mutation(
        check_step,
        lambda: step_case(fence=2),
        "\n        OR step_fence <> p_fence THEN",
        " THEN",
        function=MOVE,
    ),
    "move: the commit number": Mutation(check_step, step_case, NUMBER, "seq := 0;", function=MOVE),
    "move: the counters": Mutation(
        check_step,
        step_case,
        "SET count = step_counters.count + excluded.count",
        "SET count = excluded.count",
        function=MOVE,
    ),
    "move: the new executions": Mutation(
        check_step,
        step_case,
        "        FROM n\n    )",
        "        FROM n WHERE false\n    )",
        function=MOVE,
    ),
    "move: the close": Mutation(
        check_step,
        step_case,
        "SET state = p_state, phase = p_phase,",
        "SET phase = p_phase,",
        function=MOVE,
    ),
    "move: the history": Mutation(
        check_step,
        step_case,
        (
            "INSERT INTO history (run_id, event_type, at, details, commit_seq)\n"
            "    VALUES (p_run, 'STEP_CLOSED', p_now, p_details, seq);"
        ),
        "PERFORM 1;",
        function=MOVE,
    ),
    # A Step's end.
    "end: the attempt's check": Mutation(
        lambda d, c: check_step(d, c),
        lambda: step_case(OutcomeKind.GRACEFUL_COMPLETE, moves=0, fence=2),
        "\n        OR step_fence <> p_fence THEN",
        " THEN",
        function=END,
    ),
    "end: the commit number": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.DEAD_END, moves=0, others=("B",)),
        NUMBER,
        "seq := 0;",
        function=END,
    ),
    "end: the close": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.DEAD_END, moves=0, others=("B",)),
        "SET state = p_state, phase = p_phase,",
        "SET phase = p_phase,",
        function=END,
    ),
    "end: the history": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.DEAD_END, moves=0, others=("B",)),
        "VALUES (p_run, 'STEP_CLOSED', p_now, p_step_details, seq);",
        "SELECT p_run, 'STEP_CLOSED', p_now, p_step_details, seq WHERE false;",
        function=END,
    ),
    "end: the completion": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.GRACEFUL_COMPLETE, moves=0),
        "IF pending = 0 AND completions > 0 THEN",
        "IF false THEN",
        function=END,
    ),
    "end: the cancellations": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.FORCE_COMPLETE, moves=0, others=("B",)),
        "WHERE run_id = p_run COLLATE \"C\" AND state = 'PENDING'\n                RETURNING id",
        "WHERE false\n                RETURNING id",
        function=END,
    ),
    "end: the run's close": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.FAILED, moves=0),
        "SET status = p_closes, closed_at = p_now,",
        "SET closed_at = p_now,",
        function=END,
    ),
    "end: the run's history": Mutation(
        check_step,
        lambda: step_case(OutcomeKind.FAILED, moves=0),
        "VALUES (p_run, 'FLOW_CLOSED', p_now,\n                p_flow_details, seq);",
        "SELECT p_run, 'FLOW_CLOSED', p_now, p_flow_details, seq WHERE false;",
        function=END,
    ),
    # A locked RPC's writes.
    "writes: the waiting Step": Mutation(
        check_rpc_writes,
        lambda: rpc_case(waiter=True),
        'IF EXISTS (SELECT 1 FROM lock_waiters WHERE flow_id = flow COLLATE "C") THEN',
        "IF false THEN",
        function=WRITES,
    ),
    "writes: the lock rows": Mutation(
        check_rpc_writes,
        rpc_case,
        (
            "DELETE FROM attribute_locks\n"
            '        WHERE flow_id = flow COLLATE "C" AND owner = holder COLLATE "C";'
        ),
        "DELETE FROM attribute_locks WHERE false;",
        function=WRITES,
    ),
    "writes: the run first": Mutation(
        check_rpc_writes,
        lambda: rpc_case(left=1, closed=True),
        "            ) THEN\n                RETURN ARRAY[dropped, -1];",
        "            ) OR true THEN\n                RETURN ARRAY[dropped, -1];",
        function=WRITES,
    ),
    "writes: the commit number": Mutation(
        check_rpc_writes,
        rpc_case,
        (
            "UPDATE runs SET commit_seq = commit_seq + CASE WHEN change_log THEN 1 ELSE 0 END\n"
            "        WHERE run_id = run AND (status = 'RUNNING') IS TRUE\n"
            "        RETURNING"
        ),
        (
            "UPDATE runs SET commit_seq = commit_seq\n"
            "        WHERE run_id = run AND (status = 'RUNNING') IS TRUE\n"
            "        RETURNING"
        ),
        function=WRITES,
    ),
    "writes: the values": Mutation(
        check_rpc_writes,
        rpc_case,
        "IF cardinality(put_names) > 0 THEN",
        "IF false THEN",
        function=WRITES,
    ),
    "writes: the deletes": Mutation(
        check_rpc_writes,
        rpc_case,
        "IF cardinality(gone_names) > 0 THEN",
        "IF false THEN",
        function=WRITES,
    ),
    "writes: the history": Mutation(
        check_rpc_writes,
        rpc_case,
        "    VALUES (run, event, now_at, details, seq);",
        "    SELECT run, event, now_at, details, seq WHERE false;",
        function=WRITES,
    ),
    "writes: the change log": Mutation(
        check_rpc_writes,
        rpc_case,
        "IF logged AND cardinality(log_names) > 0 THEN",
        "IF false THEN",
        function=WRITES,
    ),
    # A relay's kept commit.
    "kept: the rows' check": Mutation(
        check_kept_rpc_writes,
        lambda: rpc_case(left=1),
        "IF held <> taken THEN",
        "IF false THEN",
        function=KEEP,
    ),
    "kept: the run first": Mutation(
        check_kept_rpc_writes,
        lambda: rpc_case(left=1, closed=True),
        "        IF NOT EXISTS (\n",
        "        IF false AND NOT EXISTS (\n",
        function=KEEP,
    ),
    "kept: the commit number": Mutation(
        check_kept_rpc_writes,
        rpc_case,
        "UPDATE runs SET commit_seq = commit_seq + CASE WHEN change_log THEN 1 ELSE 0 END",
        "UPDATE runs SET commit_seq = commit_seq",
        function=KEEP,
    ),
    # An RPC's lock take and read.
    "take: a held key": Mutation(
        check_take,
        lambda: take_case(held=("n",)),
        "IF taken < cardinality(keys) THEN",
        "IF false THEN",
        function=TAKE,
    ),
    "take: the rows": Mutation(
        check_take,
        take_case,
        "    ON CONFLICT (flow_id, lock_key) DO NOTHING;",
        (
            "    ON CONFLICT (flow_id, lock_key) DO NOTHING RETURNING 1 INTO taken;\n"
            '    DELETE FROM attribute_locks WHERE owner = holder COLLATE "C";'
        ),
        function=TAKE,
    ),
    "take: the run": Mutation(
        check_take,
        take_case,
        "FROM (SELECT 1) AS taken_row LEFT JOIN runs AS r ON r.run_id = target;",
        "FROM (SELECT 1) AS taken_row LEFT JOIN runs AS r ON false;",
        function=TAKE,
    ),
    "take: the singletons": Mutation(
        check_take,
        take_case,
        "IF all_names OR cardinality(names) > 0 THEN",
        "IF false THEN",
        function=TAKE,
    ),
    "take: the whole maps": Mutation(
        check_take, take_case, "IF cardinality(maps) > 0 THEN", "IF false THEN", function=TAKE
    ),
    # A unit's deferred writes.
    "deferred flush: the history": Mutation(
        check_tail,
        tail_case,
        "    ORDER BY n\n), c AS",
        "    WHERE false\n), c AS",
        module=deferred_flush,
        name="FLUSH",
    ),
    "deferred flush: the change log": Mutation(
        check_tail,
        tail_case,
        "$14::int8[], $15::bool[])\n",
        "$14::int8[], $15::bool[]) WHERE false\n",
        module=deferred_flush,
        name="FLUSH",
    ),
    "deferred flush: the lock drop": Mutation(
        check_tail,
        tail_case,
        "ELSE dexlite_drop_rpc_locks($16, $17) END",
        "ELSE length($17::text) * 0 END",
        module=deferred_flush,
        name="FLUSH",
    ),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS.values()), ids=list(MUTATIONS))
async def test_taking_out_any_step_of_a_fast_path_makes_it_differ(
    databases: Databases, mutation: Mutation
) -> None:
    case = mutation.case()
    await mutation.check(databases, case)  # as it is, the fast path writes what the unit does
    case = mutation.case()
    if mutation.function:
        changed: Any = function_changed(
            databases.fast, mutation.function, mutation.old, mutation.new
        )
    else:
        changed = contextlib.nullcontext()
    with (
        statement_changed(mutation.module, mutation.name, mutation.old, mutation.new)
        if mutation.module
        else contextlib.nullcontext()
    ):
        async with changed:
            # A constraint the plain unit keeps, broken, is a difference too.
            with pytest.raises((AssertionError, IntegrityError)):
                await mutation.check(databases, case)
