"""Every PostgreSQL fast path writes exactly what its plain unit writes.

PostgreSQL runs some commit rules as one statement or function call: the start of a new Flow ID,
a Step decision that only moves on or only ends, a locked RPC's writes (and a relay's kept
commit of them), an RPC's lock take with its read, and a unit's deferred writes (flushed as one
statement). The plain unit (``engine/_storage/units.py``, through SQLAlchemy, each write at
once) is each rule's definition. Here hypothesis generates the state before and the commit; the
fast path runs on one database and the plain way on another, set up alike, and every row of
every table the example touched must be equal (history in its order), and so must the commit's
answer.

``test_fast_path_mutations`` removes each step of each fast path in turn and shows that the
comparison then fails: it is not blind to any of them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, insert, or_, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from engine._enums import IdReusePolicy, RunStatus
from engine._ids import new_id
from engine._outcomes import OutcomeKind
from engine._runtime.locks import RPC
from engine._runtime.postgres.lock_rows import clear_dead, holders_of, lock_flow, lost, release_all
from engine._storage import reads, units
from engine._storage import sqlalchemy_internals as pg_direct
from engine._storage import tables as t
from engine._storage.postgres import deferred_flush, rpc_writes
from engine._storage.postgres.first_starts import first_start
from engine._storage.postgres.rpc_loads import SQL as TAKE_AND_LOAD
from engine._storage.postgres.rpc_loads import loaded, take_and_load
from engine._storage.postgres.step_ends import step_end
from engine._storage.postgres.step_moves import step_move
from engine._storage.records import (
    AttributeWrite,
    CommitResult,
    LoadPlan,
    Phase,
    QueuedStep,
    RunClose,
    StagedEffects,
    StartRequest,
    StepClose,
)
from engine._storage.unit_statements import CLAIMANT
from engine._storage.units import StaleAttemptError
from engine.errors import EngineError
from tests.support.backends import fresh_database

NOW = 1_800_000_000_000_000
ME = "this-process"
FUNCTIONS = Path(__file__).resolve().parents[2] / "engine" / "_storage" / "postgres" / "functions"
TYPES = ("A", "B", "C")
#: Attribute names; "h" is a hard-delete Attribute's (stored elsewhere, never logged).
NAMES = ("n", "m", "h")

EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Databases:
    fast: AsyncEngine
    plain: AsyncEngine


@pytest.fixture
async def databases() -> AsyncIterator[Databases]:
    """Two new databases with dexlite's tables: one for the fast path, one for the plain."""
    async with fresh_database() as fast, fresh_database() as plain:
        yield Databases(fast, plain)


# -- running units and statements ----------------------------------------------------------------


def as_this_process(unit: Callable[[Connection], Any]) -> Callable[[Connection], Any]:
    """``unit`` as this process runs it: the Steps its commit queues are claimed for it."""

    def run(conn: Connection) -> Any:
        conn.info[CLAIMANT] = ME
        try:
            return unit(conn)
        finally:
            conn.info.pop(CLAIMANT, None)

    return run


#: The errors a relay's kept commit raises on purpose, as the engine reports them.
REFUSALS = {
    rpc_writes.KEPT_LOCKS_LOST: "RPCLockConflictError",
    rpc_writes.KEPT_RUN_NOT_OPEN: "FlowNotActiveOrNotFoundError",
}


async def run(engine: AsyncEngine, unit: Callable[[Connection], Any]) -> Any:
    """Run ``unit`` in a transaction of its own; the name of its error is its answer when it
    fails (nothing commits then)."""
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(as_this_process(unit))
    except (EngineError, StaleAttemptError) as exc:
        return type(exc).__name__
    except DBAPIError as exc:
        state = getattr(exc.orig, "sqlstate", None)
        if state in REFUSALS:
            return REFUSALS[state]
        raise


def statement(one: Any) -> Callable[[Connection], Any]:
    """A one-statement commit (``first_starts``, ``step_moves``, ``step_ends``) as a unit."""

    def unit(conn: Connection) -> bool:
        wrote: bool = one.wrote(pg_direct.fetch(conn, *one.statement(ME)))
        return wrote

    return unit


def raw(sql: str, args: Any) -> Callable[[Connection], Any]:
    def unit(conn: Connection) -> Any:
        return [tuple(row) for row in pg_direct.fetch(conn, sql, args)]

    return unit


async def rows(engine: AsyncEngine, flows: set[str], runs: set[str]) -> dict[str, list[Any]]:
    """Every row of every table that names one of ``flows`` or ``runs``, surrogate keys left
    out (rows in their insertion order where a surrogate key gives one)."""
    found: dict[str, list[Any]] = {}
    async with engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            tests = [
                table.c[name].in_(ids)
                for name, ids in (
                    ("flow_id", flows),
                    ("run_id", runs),
                    ("child_run_id", runs),
                    ("parent_run_id", runs),
                )
                if name in table.c
            ]
            if not tests:
                continue
            surrogate = [c for c in table.primary_key.columns if c.autoincrement is True]
            columns = [c for c in table.columns if c not in surrogate]
            query = select(*columns).where(or_(*tests)).order_by(*surrogate)
            got = [tuple(row) for row in (await conn.execute(query)).all()]
            found[table.name] = got if surrogate else sorted(got, key=repr)
    return found


# -- generated worlds ----------------------------------------------------------------------------


def texts(max_size: int) -> st.SearchStrategy[str]:
    """Text a caller may store: every character but NUL (PostgreSQL's text refuses it, and
    the engine's checks refuse it before storage)."""
    return st.text(
        st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=max_size
    )


def json_values() -> st.SearchStrategy[str]:
    scalars = st.one_of(st.integers(-(2**40), 2**40), st.booleans(), texts(5), st.none())
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=5).map(
        lambda v: json.dumps(v, separators=(",", ":"))
    )


@dataclass(frozen=True)
class World:
    """A run before the commit under test: its Flow ID, whether it keeps a change log, the
    Steps pending besides its start Step ``A-1``, its Attributes, and whether it is open."""

    flow_id: str
    run_id: str
    change_log: bool
    others: tuple[str, ...]
    values: tuple[tuple[str, str, str], ...]
    #: A pending Step closed with a completion before the commit (a run may complete).
    completed_one: bool
    open: bool

    @property
    def step(self) -> str:
        """The internal ID of the start Step, which the commits under test decide for."""
        return f"{self.run_id}:A-1"

    def ids(self) -> tuple[set[str], set[str]]:
        return {self.flow_id}, {self.run_id}

    def request(self, start_step: bool = True) -> StartRequest:
        step = QueuedStep("", self.run_id, self.flow_id, "F", "A", '"in"', Phase.EXECUTE)
        return StartRequest(
            flow_id=self.flow_id,
            flow_type="F",
            run_id=self.run_id,
            input='"in"',
            request_id=None,
            id_reuse_policy=IdReusePolicy.ALLOW_DUPLICATE,
            ignore_already_started=False,
            timeout_at=None,
            writes=(),
            start_step=step if start_step else None,
            change_log=self.change_log,
        )

    def units(self) -> list[Callable[[Connection], Any]]:
        """The commits that make the world, fresh each call (commits number their Steps)."""
        made = [units.start_run(self.request(), NOW)]
        queued = tuple(
            QueuedStep("", self.run_id, self.flow_id, "F", kind, '"q"', Phase.EXECUTE)
            for kind in (*self.others, *(["C"] if self.completed_one else []))
        )
        writes = tuple(AttributeWrite(n, i, v, hard_delete=n == "h") for n, i, v in self.values)
        if queued or writes:
            made.append(rpc_unit(self, StagedEffects(writes=writes, next_steps=queued)))
        if self.completed_one:
            last = len([k for k in (*self.others, "C") if k == "C"])
            close = StepClose(f"{self.run_id}:C-{last}", "C", 1, OutcomeKind.GRACEFUL_COMPLETE)
            made.append(
                units.commit_step(
                    run_id=self.run_id,
                    attempt=1,
                    effects=StagedEffects(decision=close),
                    now=NOW + 1,
                    fence=1,
                )
            )
        if not self.open:
            made.append(
                units.stop_run(
                    flow_id=self.flow_id,
                    run_id=self.run_id,
                    close=RunClose(RunStatus.TERMINATED),
                    now=NOW + 2,
                )
            )
        return made


def rpc_unit(
    world: World, effects: StagedEffects, now: int = NOW + 5
) -> Callable[[Connection], Any]:
    """The plain unit of an RPC ``r`` on the world's run, committed at ``now``."""
    return units.commit_rpc(
        flow_id=world.flow_id, run_id=world.run_id, rpc_name="r", effects=effects, now=now
    )


@st.composite
def worlds(draw: st.DrawFn, *, open_only: bool = False) -> World:
    return World(
        flow_id=f"flow-{uuid.uuid4()}",
        run_id=new_id(),
        change_log=draw(st.booleans()),
        others=tuple(draw(st.lists(st.sampled_from(TYPES), max_size=2))),
        values=tuple(
            draw(
                st.lists(
                    st.tuples(st.sampled_from(NAMES), st.sampled_from(("", "i1")), json_values()),
                    max_size=3,
                    unique_by=lambda v: v[:2],
                )
            )
        ),
        completed_one=draw(st.booleans()),
        open=True if open_only else draw(st.booleans(), label="open"),
    )


async def made(databases: Databases, world: World) -> None:
    """Make ``world`` in both databases, the same way."""
    for engine in (databases.fast, databases.plain):
        for unit in world.units():
            answer = await run(engine, unit)
            assert not isinstance(answer, str), answer


async def same_rows(databases: Databases, world: World, *more: str) -> dict[str, list[Any]]:
    flows, runs = world.ids()
    runs |= set(more)
    fast = await rows(databases.fast, flows, runs)
    assert fast == await rows(databases.plain, flows, runs)
    return fast


# -- starts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartCase:
    """A start, of a Flow ID new or (``used``) with a run already (the world's)."""

    world: World
    used: bool
    request: StartRequest


@st.composite
def start_cases(draw: st.DrawFn) -> StartCase:
    world = draw(worlds())
    request = replace(world, run_id=new_id(), change_log=draw(st.booleans())).request(
        draw(st.booleans())
    )
    request = replace(
        request,
        input=draw(json_values()),
        request_id=draw(st.none() | texts(4).filter(bool)),
        timeout_at=draw(st.none() | st.integers(NOW, NOW * 2)),
    )
    if request.start_step is not None:
        phase = draw(st.sampled_from((Phase.EXECUTE, Phase.WAIT_FOR)))
        step = replace(request.start_step, phase=phase, input=request.input)
        request = replace(request, start_step=step)
    return StartCase(world, draw(st.booleans()), request)


def copied(request: StartRequest) -> StartRequest:
    """A copy of ``request`` its commit may number (commits set their Steps' IDs)."""
    step = request.start_step
    return replace(request, start_step=None if step is None else replace(step))


async def check_start(databases: Databases, case: StartCase) -> None:
    if case.used:  # the Flow ID has a run: the statement writes nothing, the unit decides
        await made(databases, case.world)
    first = first_start(copied(case.request), NOW + 10)
    assert first is not None
    wrote = await run(databases.fast, statement(first))
    assert wrote is (not case.used)
    fast = (
        first.result
        if wrote
        else await run(databases.fast, units.start_run(copied(case.request), NOW + 10))
    )
    plain = await run(databases.plain, units.start_run(copied(case.request), NOW + 10))
    assert answer(fast) == answer(plain)
    await same_rows(databases, case.world, case.request.run_id)


@EXAMPLES
@given(case=start_cases())
async def test_a_first_start_writes_what_its_unit_writes(
    databases: Databases, case: StartCase
) -> None:
    await check_start(databases, case)


def answer(result: Any) -> Any:
    """What a commit answered, comparable across databases (its changes and value)."""
    if not isinstance(result, CommitResult):
        return result
    return (
        [
            (
                c.flow_id,
                c.run_id,
                [(s.id, s.step_type, s.phase, s.attempt, s.due_at) for s in c.queued_steps],
                sorted(c.ended_step_ids),
                c.closed_status,
                c.started,
            )
            for c in result.changes
        ],
        result.value,
    )


# -- Step decisions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepCase:
    """The result of the start Step's attempt ``attempt`` under the claim ``fence`` (the
    current attempt is 1 under fence 1): a decision, with next Steps or none."""

    world: World
    decision: StepClose
    next_steps: tuple[QueuedStep, ...]
    fence: int

    def effects(self) -> StagedEffects:
        moves = tuple(replace(s) for s in self.next_steps)
        return StagedEffects(next_steps=moves, decision=self.decision)


MOVE_KINDS = [k for k in OutcomeKind if k != OutcomeKind.FORCE_COMPLETE]


@st.composite
def step_cases(draw: st.DrawFn, *, moves: bool) -> StepCase:
    world = draw(worlds())
    kind = draw(st.sampled_from(MOVE_KINDS if moves else list(OutcomeKind)))
    failing = kind in (OutcomeKind.FAILED, OutcomeKind.FORCE_FAIL)
    decision = StepClose(
        world.step,
        "A",
        draw(st.sampled_from((1, 2))),
        kind,
        output=draw(json_values()) if kind.is_completion else None,
        error_type="Boom" if failing else None,
        error_message=draw(texts(6)) if failing else None,
        phase=draw(st.sampled_from((Phase.EXECUTE, Phase.WAIT_FOR))),
    )
    steps = draw(st.lists(queued_steps(world), min_size=1, max_size=3)) if moves else []
    return StepCase(world, decision, tuple(steps), draw(st.sampled_from((1, 2))))


def queued_steps(world: World) -> st.SearchStrategy[QueuedStep]:
    return st.builds(
        QueuedStep,
        st.just(""),
        st.just(world.run_id),
        st.just(world.flow_id),
        st.just("F"),
        st.sampled_from(TYPES),
        json_values(),
        st.sampled_from((Phase.EXECUTE, Phase.WAIT_FOR)),
        due_at=st.none() | st.integers(NOW, NOW * 2),
    )


async def check_step(databases: Databases, case: StepCase) -> None:
    """Commit the start Step's attempt result: as one statement (a move, or an end) on one
    database, as the plain unit on the other; compare."""
    await made(databases, case.world)
    where = {"flow_id": case.world.flow_id, "flow_type": "F", "run_id": case.world.run_id}
    attempt, effects, now = case.decision.attempt, case.effects(), NOW + 10
    fast = (
        step_move(**where, attempt=attempt, fence=case.fence, effects=effects, now=now)
        if case.next_steps
        else step_end(**where, attempt=attempt, fence=case.fence, effects=effects, now=now)
    )
    assert fast is not None
    wrote = await run(databases.fast, statement(fast))
    unit = units.commit_step(
        run_id=case.world.run_id, attempt=attempt, effects=case.effects(), now=now, fence=case.fence
    )
    plain = await run(databases.plain, unit)
    assert (wrote is True) == isinstance(plain, CommitResult), plain
    if wrote:
        assert answer(fast.result) == answer(plain)
    await same_rows(databases, case.world)


@EXAMPLES
@given(case=step_cases(moves=True))
async def test_a_step_move_writes_what_its_unit_writes(
    databases: Databases, case: StepCase
) -> None:
    await check_step(databases, case)


@EXAMPLES
@given(case=step_cases(moves=False))
async def test_a_step_end_writes_what_its_unit_writes(databases: Databases, case: StepCase) -> None:
    await check_step(databases, case)


# -- a locked RPC's writes -----------------------------------------------------------------------


@dataclass(frozen=True)
class RPCCase:
    """A locked RPC's writes, its lock rows before the commit (the keys it took, how many of
    its rows are left), and whether a Step waits on the Flow."""

    world: World
    writes: tuple[AttributeWrite, ...]
    keys: tuple[str, ...]
    left: int
    waiter: bool

    def effects(self) -> StagedEffects:
        return StagedEffects(writes=self.writes)

    def fast(self) -> rpc_writes.RPCWrites:
        found = rpc_writes.rpc_writes(
            flow_id=self.world.flow_id,
            flow_type="F",
            run_id=self.world.run_id,
            rpc_name="r",
            effects=self.effects(),
            now=NOW + 10,
        )
        assert found is not None
        return found


def attribute_writes() -> st.SearchStrategy[tuple[AttributeWrite, ...]]:
    one = st.builds(
        lambda name, instance, value, blob: AttributeWrite(
            name,
            instance,
            value,
            blob=blob and name == "h" and value is not None,
            hard_delete=name == "h",
        ),
        st.sampled_from(NAMES),
        st.sampled_from(("", "i1")),
        st.none() | json_values(),
        st.booleans(),
    )
    return st.lists(one, min_size=1, max_size=4).map(tuple)


@st.composite
def rpc_cases(draw: st.DrawFn, *, waiters: bool = True) -> RPCCase:
    keys = tuple(draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)))
    left = draw(st.integers(0, len(keys))) if draw(st.booleans()) else len(keys)
    waiter = draw(st.booleans()) if waiters else False
    return RPCCase(draw(worlds()), draw(attribute_writes()), keys, left, waiter)


KEYS = ("n", "m", "x")
OWNER = "rpc-1"


def lock_rows_of(
    world: World, owner: str, keys: tuple[str, ...], waiter: bool = False
) -> Callable[[Connection], None]:
    """A unit putting ``owner``'s RPC lock rows on ``keys`` (and a waiting Step)."""

    def unit(conn: Connection) -> None:
        rows = [
            {
                "flow_id": world.flow_id,
                "lock_key": key,
                "owner": owner,
                "kind": RPC,
                "phase": "",
                "process_id": ME,
            }
            for key in keys
        ]
        if rows:
            conn.execute(insert(t.attribute_locks), rows)
        if waiter:
            conn.execute(
                insert(t.lock_waiters).values(
                    flow_id=world.flow_id,
                    owner="step",
                    phase="EXECUTE",
                    lock_keys='["n"]',
                    process_id=ME,
                )
            )

    return unit


async def locked(databases: Databases, case: RPCCase) -> dict[str, list[Any]]:
    """Make the case's world and lock rows in both databases; return their rows."""
    await made(databases, case.world)
    rows_left = lock_rows_of(case.world, OWNER, case.keys[: case.left], case.waiter)
    for engine in (databases.fast, databases.plain):
        await run(engine, rows_left)
    return await same_rows(databases, case.world)


async def check_rpc_writes(databases: Databases, case: RPCCase) -> None:
    before = await locked(databases, case)
    fast = case.fast()
    found = await run(databases.fast, raw(*fast.statement(OWNER, len(case.keys))))
    outcome = fast.outcome(found, len(case.keys))
    if outcome == rpc_writes.WAITERS:
        # Nothing done: the Committer commits the plain unit instead, which grants the Step.
        assert case.waiter
        assert await rows(databases.fast, *case.world.ids()) == before
        return
    assert not case.waiter

    def fenced(conn: Connection) -> CommitResult:
        result = rpc_unit(case.world, case.effects(), NOW + 10)(conn)
        dropped, _ = release_all(conn, case.world.flow_id, OWNER, ME, False)
        if dropped != len(case.keys):
            lost(conn, case.world.flow_id, case.keys)
        return result

    plain = await run(databases.plain, fenced)
    if not isinstance(plain, CommitResult):  # the commit failed: its rows go on their own
        await run(databases.plain, lambda c: release_all(c, case.world.flow_id, OWNER, ME, False))
    expected = {
        "FlowNotActiveOrNotFoundError": rpc_writes.NOT_OPEN,
        "RPCLockConflictError": rpc_writes.LOST,
    }.get(plain if isinstance(plain, str) else "", rpc_writes.COMMITTED)
    assert outcome == expected, plain
    await same_rows(databases, case.world)


@EXAMPLES
@given(case=rpc_cases())
async def test_a_locked_rpcs_writes_in_one_call_write_what_its_unit_writes(
    databases: Databases, case: RPCCase
) -> None:
    await check_rpc_writes(databases, case)


async def check_kept_rpc_writes(databases: Databases, case: RPCCase) -> None:
    """A relay's commit of the RPC's writes keeps its lock rows: it raises where the unit
    does (rows lost, run not open), and otherwise commits what the unit commits."""
    await locked(databases, case)
    kept = await run(databases.fast, raw(*case.fast().kept(OWNER, len(case.keys))))

    def keeping(conn: Connection) -> CommitResult:
        result: CommitResult = rpc_unit(case.world, case.effects(), NOW + 10)(conn)
        locks = t.attribute_locks
        held = conn.execute(
            select(locks.c.lock_key)
            .where(locks.c.flow_id == case.world.flow_id, locks.c.owner == OWNER)
            .with_for_update()
        ).all()
        if len(held) != len(case.keys):
            lost(conn, case.world.flow_id, case.keys)
        return result

    plain = await run(databases.plain, keeping)
    assert isinstance(kept, str) == isinstance(plain, str), (kept, plain)
    if isinstance(plain, str):
        assert kept == plain
    await same_rows(databases, case.world)


@EXAMPLES
@given(case=rpc_cases(waiters=False))
async def test_a_relays_kept_commit_writes_what_its_unit_writes(
    databases: Databases, case: RPCCase
) -> None:
    await check_kept_rpc_writes(databases, case)


# -- an RPC's lock take and read -----------------------------------------------------------------


@dataclass(frozen=True)
class TakeCase:
    """An RPC taking ``keys`` and reading ``plan`` of a run (``known``: the Flow ID has one)
    whose keys ``held`` carry another RPC's rows."""

    world: World
    known: bool
    keys: tuple[str, ...]
    held: tuple[str, ...]
    plan: LoadPlan


@st.composite
def take_cases(draw: st.DrawFn) -> TakeCase:
    plan = LoadPlan(
        names=draw(
            st.none() | st.lists(st.sampled_from(NAMES), max_size=2, unique=True).map(tuple)
        ),
        whole_maps=tuple(draw(st.lists(st.sampled_from(NAMES), max_size=1))),
        instances=tuple(
            draw(st.lists(st.tuples(st.sampled_from(NAMES), st.just("i1")), max_size=1))
        ),
    )
    return TakeCase(
        draw(worlds()),
        draw(st.booleans()),
        tuple(sorted(draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True)))),
        tuple(draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))),
        plan,
    )


class _Reader:
    """What ``reads.load_snapshot`` reads through, on a test's engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def rows(self, statement: Any, params: Any, *, grouped: bool = False) -> list[Any]:
        async with self._engine.connect() as conn:
            found: list[Any] = await conn.run_sync(lambda c: statement.rows(c, params))
            return found


async def check_take(databases: Databases, case: TakeCase) -> None:
    world = case.world
    if case.known:
        await made(databases, world)
    if case.held:
        for engine in (databases.fast, databases.plain):
            await run(engine, lock_rows_of(world, "other", case.held))
    before = await same_rows(databases, world)
    args = take_and_load(
        flow_id=world.flow_id,
        keys=case.keys,
        owner=OWNER,
        kind=RPC,
        process=ME,
        run_id=None,
        plan=case.plan,
    )
    assert args is not None
    fast = await run(databases.fast, lambda c: loaded(pg_direct.fetch(c, TAKE_AND_LOAD, args)))
    if fast is None:  # a row is on a key (its holder alive or dead): the unit decides
        assert set(case.held) & set(case.keys)
        assert await rows(databases.fast, *world.ids()) == before
        return

    def take(conn: Connection) -> None:
        lock_flow(conn, world.flow_id)
        holders = holders_of(conn, world.flow_id, list(case.keys))
        clear_dead(conn, world.flow_id, holders)
        assert not holders
        lock_rows_of(world, OWNER, case.keys)(conn)

    assert await run(databases.plain, take) is None
    reader: Any = _Reader(databases.plain)
    assert fast.snapshot == await reads.load_snapshot(reader, world.flow_id, None, case.plan)
    await same_rows(databases, world)


@EXAMPLES
@given(case=take_cases())
async def test_a_lock_take_with_its_read_takes_and_reads_what_the_unit_does(
    databases: Databases, case: TakeCase
) -> None:
    await check_take(databases, case)


# -- a unit's deferred writes ----------------------------------------------------------------------


@dataclass(frozen=True)
class TailCase:
    """A Step's decision (with Attribute writes and maybe next Steps) and, in the same unit,
    an RPC's writes dropping its lock row when ``locked``: the parts a deferred flush gathers."""

    step: StepCase
    writes: tuple[AttributeWrite, ...]
    locked: bool

    def unit(self) -> Callable[[Connection], Any]:
        world, decision = self.step.world, self.step.decision
        effects = replace(self.step.effects(), writes=self.writes)
        step = units.commit_step(
            run_id=world.run_id, attempt=1, effects=effects, now=NOW + 10, fence=1
        )
        rpc = rpc_unit(world, StagedEffects(writes=self.writes))
        assert decision.attempt == 1

        def both(conn: Connection) -> Any:
            answer = step(conn)
            if self.locked:
                answer = (answer, rpc(conn))
                found = deferred_flush.deferred_flush_of(conn)
                if found is not None:
                    found.drop_rpc_locks(world.flow_id, OWNER, lambda _conn, _dropped: None)
                else:
                    release_all(conn, world.flow_id, OWNER, ME, False)
            return answer

        return both


@st.composite
def tail_cases(draw: st.DrawFn) -> TailCase:
    step = draw(step_cases(moves=draw(st.booleans())))
    step = replace(step, world=replace(step.world, open=True), fence=1)
    step = replace(step, decision=replace(step.decision, attempt=1))
    return TailCase(step, draw(attribute_writes()), draw(st.booleans()))


async def check_tail(databases: Databases, case: TailCase) -> None:
    world = case.step.world
    await made(databases, world)
    if case.locked:
        for engine in (databases.fast, databases.plain):
            await run(engine, lock_rows_of(world, OWNER, ("n",)))
    fast = await run(
        databases.fast, lambda conn: deferred_flush.with_deferred_flush(conn, case.unit())
    )
    plain = await run(databases.plain, case.unit())
    assert type(fast) is type(plain)
    await same_rows(databases, world)


@EXAMPLES
@given(case=tail_cases())
async def test_a_unit_sending_its_last_writes_as_one_statement_writes_what_it_writes_without(
    databases: Databases, case: TailCase
) -> None:
    await check_tail(databases, case)
