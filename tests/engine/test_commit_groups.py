"""One-statement commits that arrive together commit together (``_storage/commit_groups``).

Many locked RPCs at once on distinct Flows each take their locks in one call and commit as one
statement; on PostgreSQL those that arrive while one of their kind is on its way go as one
transaction. A trigger on the history table records the transaction of each RPC_COMMITTED
event, so the tests see how the commits were grouped, and SQLAlchemy's listeners hear the lock
takes that went in a group (their text then answers a tag first); triggers make one Flow's
commit fail and another's lock take, to show that neither fails a neighbour of its group.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from bench._flow_worker import ThreeStepAsyncFlow, expected
from engine import EngineConfig
from engine._storage.postgres.statement_groups import TAG
from tests.conftest import running_engine
from tests.engine.test_shared_rpc_locks import LockFlow, _sql
from tests.support.backends import postgres_only
from tests.support.statements_heard import Heard, statements_heard

pytestmark = postgres_only("one-statement commits are PostgreSQL's")

FLOWS = 48
ROUNDS = 4

TRANSACTIONS = (
    "CREATE TABLE commit_transactions (run_id text, xid bigint)",
    """
CREATE FUNCTION note_commit_transaction() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_type = 'RPC_COMMITTED' THEN
        IF EXISTS (SELECT 1 FROM runs WHERE run_id = NEW.run_id AND flow_id = 'poisoned') THEN
            RAISE EXCEPTION 'this Flow''s commits fail';
        END IF;
        INSERT INTO commit_transactions VALUES (NEW.run_id, txid_current());
    END IF;
    RETURN NEW;
END $$
""",
    "CREATE TRIGGER note_commit_transactions AFTER INSERT ON history "
    "FOR EACH ROW EXECUTE FUNCTION note_commit_transaction()",
    """
CREATE FUNCTION refuse_lock_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.flow_id = 'untakeable' THEN
        RAISE EXCEPTION 'this Flow''s lock takes fail';
    END IF;
    RETURN NEW;
END $$
""",
    "CREATE TRIGGER refuse_lock_takes BEFORE INSERT ON attribute_locks "
    "FOR EACH ROW EXECUTE FUNCTION refuse_lock_take()",
)


@pytest.fixture
def statements() -> Iterator[list[Heard]]:
    """The text of every statement the engines run from now on."""
    with statements_heard() as heard:
        yield heard


def take_groups(statements: list[Heard]) -> list[list[str]]:
    """The Flow IDs of the lock takes that went in groups, group by group, in the order the
    groups ran them (a grouped take's last parameter is its place in its group)."""
    groups: list[list[str]] = []
    for heard in statements:
        if TAG in heard.statement and "dexlite_take_rpc_locks_and_load" in heard.statement:
            if heard.parameters[-1] == 0:
                groups.append([])
            groups[-1].append(heard.parameters[0])
    return groups


def grouped_takes(statements: list[Heard]) -> int:
    """How many lock takes went in a group."""
    return sum(len(group) for group in take_groups(statements))


async def _note_transactions(url: str) -> None:
    for statement in TRANSACTIONS:
        await _sql(url, statement)


async def _bump_all(config: EngineConfig, *, poisoned: bool = False) -> tuple[list[Any], int]:
    """Bump every Flow ROUNDS times, all at once; return the outcomes and how many
    transactions committed them."""
    url = config.database_url
    names = [f"f{n}" for n in range(FLOWS)] + (["poisoned", "untakeable"] if poisoned else [])
    async with running_engine([LockFlow()], config) as eng:
        for name in names:
            await eng.start_flow(LockFlow, name)
        await _note_transactions(url)

        async def bumps(name: str) -> list[Any]:
            out = []
            for _ in range(ROUNDS):
                try:
                    out.append(await eng.invoke_rpc("bump", name))
                except Exception as exc:
                    out.append(exc)
            return out

        outcomes = await asyncio.gather(*(bumps(name) for name in names))
        for name in names[:FLOWS]:
            values = (await eng.get_attributes(name, ["k"])).values
            assert values == {"k": ROUNDS}, (name, values)
    rows = await _sql(url, "SELECT count(*), count(DISTINCT xid) FROM commit_transactions")
    ((commits, transactions),) = rows
    assert commits == FLOWS * ROUNDS
    return outcomes, transactions


async def test_locked_rpcs_at_once_commit_in_fewer_transactions_than_rpcs(
    engine_config: EngineConfig, statements: list[Heard]
) -> None:
    outcomes, transactions = await _bump_all(engine_config)
    # Each RPC read the value the one before it on its Flow wrote: its take read its own.
    assert outcomes == [list(range(1, ROUNDS + 1))] * FLOWS
    assert transactions < FLOWS * ROUNDS / 2, transactions
    assert grouped_takes(statements) > FLOWS * ROUNDS / 2
    # Each group took its Flows' locks in the order of their IDs, whatever order the takes
    # came in (f0, f1, ..., f10, ...): two groups then cannot wait for each other.
    groups = take_groups(statements)
    assert all(group == sorted(group) for group in groups), groups
    assert any(group != sorted(group, key=lambda f: int(f[1:])) for group in groups), groups


async def test_a_commit_that_fails_fails_no_other_of_its_group(
    engine_config: EngineConfig,
) -> None:
    outcomes, transactions = await _bump_all(engine_config, poisoned=True)
    assert outcomes[:FLOWS] == [list(range(1, ROUNDS + 1))] * FLOWS
    failed, untaken = outcomes[FLOWS:]
    assert len(failed) == ROUNDS
    assert all("this Flow's commits fail" in str(exc) for exc in failed), failed
    assert len(untaken) == ROUNDS
    assert all("this Flow's lock takes fail" in str(exc) for exc in untaken), untaken
    # The others still went in groups.
    assert transactions < FLOWS * ROUNDS, transactions


async def test_with_group_commits_off_each_commit_is_its_own_transaction(
    engine_config: EngineConfig, statements: list[Heard]
) -> None:
    config = dataclasses.replace(engine_config, group_commits=False)
    outcomes, transactions = await _bump_all(config)
    assert outcomes == [list(range(1, ROUNDS + 1))] * FLOWS
    assert transactions == FLOWS * ROUNDS
    assert grouped_takes(statements) == 0


STEP_TRANSACTIONS = (
    "CREATE TABLE step_transactions (run_id text, xid bigint, event bigint)",
    """
CREATE FUNCTION note_step_transaction() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_type = 'STEP_CLOSED' THEN
        INSERT INTO step_transactions VALUES (NEW.run_id, txid_current(), NEW.id);
    END IF;
    RETURN NEW;
END $$
""",
    "CREATE TRIGGER note_step_transactions AFTER INSERT ON history "
    "FOR EACH ROW EXECUTE FUNCTION note_step_transaction()",
)


async def test_step_commits_at_once_go_in_groups_in_the_order_of_their_flow_ids(
    engine_config: EngineConfig,
) -> None:
    # Started in the order s0, s1, ..., s10, ...: their runs' IDs (time-ordered) sort that way,
    # their Flow IDs not ("s10" < "s2"). A group ordered by run would lock Flows in another
    # order than a group of RPC commits, ordered by Flow, and the two could wait for each other.
    url = engine_config.database_url
    names = [f"s{n}" for n in range(FLOWS)]
    async with running_engine([ThreeStepAsyncFlow()], engine_config) as eng:
        for statement in STEP_TRANSACTIONS:
            await _sql(url, statement)
        # All at once, so that their Steps decide together.
        await asyncio.gather(
            *(eng.start_flow(ThreeStepAsyncFlow, name, n) for n, name in enumerate(names))
        )
        results = await asyncio.gather(
            *(eng.wait_for_flow(name, wait_seconds=30) for name in names)
        )
        flows = {result.run_id: name for result, name in zip(results, names, strict=True)}
    assert [[c.output for c in r.completions] for r in results] == [
        [expected(n)] for n in range(FLOWS)
    ]
    rows = await _sql(url, "SELECT run_id, xid FROM step_transactions ORDER BY event")
    groups: dict[int, list[str]] = {}
    for run_id, xid in rows:
        groups.setdefault(xid, []).append(flows[run_id])
    together = [group for group in groups.values() if len(group) > 1]
    assert sum(len(group) for group in together) > len(rows) / 2, groups
    assert all(group == sorted(group) for group in together), together
    assert any(group != sorted(group, key=lambda f: int(f[1:])) for group in together), together


async def test_statements_that_arrive_in_one_pass_of_the_event_loop_go_as_one_group(
    engine_config: EngineConfig, statements: list[Heard]
) -> None:
    """RPCs invoked at once reach their lock takes one after the other in one pass of the
    event loop: the first does not go alone (and the rest as a second group after it)."""
    names = [f"f{n}" for n in range(FLOWS)]
    async with running_engine([LockFlow()], engine_config) as eng:
        for name in names:
            await eng.start_flow(LockFlow, name)
        for name in names:  # the engine learns each Flow's type: no read before the take
            assert await eng.invoke_rpc("bump", name) == 1
        statements.clear()
        assert (
            await asyncio.gather(*(eng.invoke_rpc("bump", name) for name in names)) == [2] * FLOWS
        )
    takes = [h for h in statements if "dexlite_take_rpc_locks_and_load" in h.statement]
    assert len(takes) == FLOWS
    assert take_groups(statements) == [sorted(names)]
