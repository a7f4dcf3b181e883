"""RPCs of one process passing their lock rows on to each other (``_runtime/postgres/relay.py``).

On PostgreSQL an RPC whose effects are Attribute writes leaves its rows on the keys when the
next RPC of its process asks for them as it commits: the next one holds them without taking
rows, reads the handed-off writes, and the queued commits go out in order, each fenced. These
tests drive the passing with RPCs that retry lock conflicts (they take turns on the keys, as
the HTTP routes' RPCs do), count the rows taken with a trigger, and pin down each way a relay
ends: the keys let go, the run closed, the rows lost, a Step waiting here or elsewhere.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Context,
    Engine,
    EngineConfig,
    FlowNotActiveOrNotFoundError,
    RPCHandlerError,
    RPCInvokeOptions,
    RPCLockConflictError,
    rpc,
)
from tests.conftest import running_engine
from tests.engine.test_shared_rpc_locks import KEY, Gate, LockFlow, _lock_rows, _sql
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

pytestmark = postgres_only("the lock rows of a shared database")


class RelayFlow(LockFlow):
    """LockFlow with an RPC that holds k and fails."""

    @rpc(lock_attributes=(LockFlow.k.lock(),))
    def fail(self, context: Context) -> None:
        raise ValueError("refused")


TAKES = """
CREATE TABLE lock_takes (owner text);
CREATE FUNCTION count_lock_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO lock_takes VALUES (NEW.owner); RETURN NEW; END $$;
CREATE TRIGGER count_lock_takes AFTER INSERT ON attribute_locks
    FOR EACH ROW EXECUTE FUNCTION count_lock_take();
"""


async def _count_takes(url: str) -> None:
    for statement in TAKES.split(";\n"):
        if statement.strip():
            await _sql(url, statement)


async def _takes(url: str) -> int:
    return int((await _sql(url, "SELECT count(*) FROM lock_takes"))[0][0])


#: The RPCs retry their lock conflicts: those of one process on the same keys take turns, each
#: as soon as the one before released the keys (as the bundled routes' RPCs do).
TURNS = RPCInvokeOptions(lock_retry=timedelta(seconds=30))


def _chain(
    eng: Engine,
    rpcs: list[str],
    results: list[asyncio.Future[Any]],
    flow: type[LockFlow] = LockFlow,
) -> Callable[[], None]:
    """A callback that invokes ``rpcs`` on Flow f, all at once and in this order, each taking
    its turn on the keys once the one before released them; each RPC's outcome goes to
    ``results`` in order. (Naming the Flow type, each is in line for the keys before the next
    starts.)"""

    def start() -> None:
        for name in rpcs:
            results.append(
                asyncio.ensure_future(
                    eng.invoke_rpc(name, "f", options=TURNS, flow_type=flow.flow_type())
                )
            )

    return start


async def _outcomes(results: list[asyncio.Future[Any]], count: int) -> list[Any]:
    await eventually(lambda: len(results) == count, what=f"{count} RPCs started")
    return list(await asyncio.gather(*results, return_exceptions=True))


async def test_rpcs_that_follow_each_other_pass_the_rows_on_and_commit_in_order(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    async with running_engine([LockFlow()], engine_config) as eng:
        await eng.start_flow(LockFlow, "f")
        await _count_takes(url)
        results: list[asyncio.Future[Any]] = []
        _chain(eng, ["bump"] * 50, results)()
        # Each read the value the one before handed off: none lost, none repeated.
        assert await _outcomes(results, 50) == list(range(1, 51))
        assert (await eng.get_attributes("f", ["k"])).values == {"k": 50}
        history = (await eng.get_flow_history("f")).events
        commits = [e for e in history if e.event_type == "RPC_COMMITTED"]
        assert [e.details["rpc"] for e in commits] == ["bump"] * 50
        # Each commit logged its write under a commit number of its own, in order.
        logged = await _sql(
            url, "SELECT commit_seq, value FROM change_log WHERE name = 'k' ORDER BY commit_seq"
        )
        assert [value for _, value in logged] == [str(n) for n in range(1, 51)]
        assert [seq for seq, _ in logged] == list(range(logged[0][0], logged[0][0] + 50))
        # Taken from the database once, then passed on: far fewer rows than RPCs.
        takes = await _takes(url)
        assert 1 <= takes < 10, takes
        # The last commit dropped them (or a release did, once no RPC held the keys).
        await eventually(lambda: _no_rows(url), what="the relay's rows dropped")
        # A new RPC takes the key from the database again.
        assert await eng.invoke_rpc("bump", "f") == 51
        assert await _takes(url) == takes + 1


async def _no_rows(url: str) -> bool:
    return await _lock_rows(url) == []


async def test_a_holder_that_ends_without_committing_lets_the_next_rpc_have_the_keys(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    async with running_engine([RelayFlow()], engine_config) as eng:
        await eng.start_flow(RelayFlow, "f")
        results: list[asyncio.Future[Any]] = []
        _chain(eng, ["bump", "fail", "bump"], results, RelayFlow)()
        one, failed, two = await _outcomes(results, 3)
        assert (one, two) == (1, 2)
        assert isinstance(failed, RPCHandlerError)
        await eventually(lambda: _no_rows(url), what="the relay's rows dropped")


async def test_the_run_closing_under_a_passed_on_holder_fails_it_and_its_readers(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    async with running_engine([LockFlow(gate)], engine_config) as eng:
        await eng.start_flow(LockFlow, "f")
        results: list[asyncio.Future[Any]] = []
        _chain(eng, ["bump", "hold", "bump"], results)()
        await asyncio.wait_for(gate.entered.wait(), 10)  # hold has the keys bump passed on
        assert await results[0] == 1
        with pytest.raises(RPCLockConflictError, match="an RPC"):
            await eng.invoke_rpc("bump", "f")  # held in this process: no queueing here either
        await eng.stop_flow("f")
        gate.release.set()
        # hold's commit fails; the bump it passed k on to read its writes and fails with it.
        _, held, after = await _outcomes(results, 3)
        assert isinstance(held, FlowNotActiveOrNotFoundError)
        assert isinstance(after, FlowNotActiveOrNotFoundError)
        history = (await eng.get_flow_history("f")).events
        assert [e.details["rpc"] for e in history if e.event_type == "RPC_COMMITTED"] == ["bump"]
        await eventually(lambda: _no_rows(url), what="the relay's rows dropped")
        await eng.start_flow(LockFlow, "f")  # a new run of the Flow ID takes k at once
        assert await eng.invoke_rpc("bump", "f") == 1


async def test_a_passed_on_holder_whose_rows_were_taken_over_commits_nothing_nor_its_readers(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    async with (
        running_engine([LockFlow(gate)], engine_config) as first,
        running_engine([LockFlow(gate)], engine_config) as second,
    ):
        await first.start_flow(LockFlow, "f")
        results: list[asyncio.Future[Any]] = []
        _chain(first, ["bump", "hold", "bump"], results)()
        await asyncio.wait_for(gate.entered.wait(), 10)
        assert await results[0] == 1
        ((_, _, _, holder),) = await _lock_rows(url)

        async def taken_over() -> bool:
            await _sql(
                url, "UPDATE processes SET lease_expires_at = 0 WHERE process_id = :p", p=holder
            )
            try:
                return bool(await second.invoke_rpc("bump", "f") == 2)
            except RPCLockConflictError:
                return False

        await eventually(taken_over, what="the other engine to take k over")
        gate.release.set()
        _, held, after = await _outcomes(results, 3)
        assert isinstance(held, RPCLockConflictError) and held.key == KEY
        values = await second.get_attributes("f", ["k"])
        history = (await second.get_flow_history("f")).events
    commits = [e.details["rpc"] for e in history if e.event_type == "RPC_COMMITTED"]
    if isinstance(after, RPCLockConflictError):
        # hold passed k on: the last bump read hold's writes and fails with it.
        assert after.key == KEY
        assert (values.values, commits) == ({"k": 2}, ["bump", "bump"])
    else:
        # hold held k past the relay's age bound: the last bump took k from the database
        # once hold's commit had failed, and read what is committed.
        assert after == 3
        assert (values.values, commits) == ({"k": 3}, ["bump", "bump", "bump"])


async def test_a_step_waiting_in_this_process_gets_the_keys_before_the_next_rpc(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    async with running_engine([LockFlow(gate)], engine_config) as eng:
        await eng.start_flow(LockFlow, "f")
        results: list[asyncio.Future[Any]] = []
        start = _chain(eng, ["bump", "hold", "bump"], results)
        start()
        await asyncio.wait_for(gate.entered.wait(), 10)
        await eng.invoke_rpc("queue_step", "f")  # AfterTheRPC waits for k behind hold
        await eventually(lambda: _waiters(url), what="the Step waiting for k")
        gate.release.set()
        one, held, after = await _outcomes(results, 3)
        assert (one, held) == (1, None)
        result = await eng.wait_for_flow("f", wait_seconds=30)
        assert result.status == "COMPLETED"
        # The Step had k first: the last RPC, trying again while the Step held k, found the
        # run closed by it, or ran after the Step's +10 (passed on by hold, it would have read
        # 101 and answered 102).
        if isinstance(after, FlowNotActiveOrNotFoundError):
            assert (await eng.get_attributes("f", ["k"])).values == {"k": 111}
        else:
            assert after == 112


async def _waiters(url: str) -> bool:
    return bool(await _sql(url, "SELECT owner FROM lock_waiters"))


async def test_a_step_waiting_in_another_process_gets_its_turn_under_endless_rpcs(
    engine_config: EngineConfig,
) -> None:
    # No poll in the test's time: only a release of the relay's rows can grant the Step.
    config = dataclasses.replace(engine_config, poll_seconds=timedelta(hours=1).total_seconds())
    async with (
        running_engine([RelayFlow()], config) as first,
        running_engine([RelayFlow()], config) as second,
    ):
        await first.start_flow(RelayFlow, "f")
        assert await first.invoke_rpc("bump", "f") == 1
        bumps: list[asyncio.Future[Any]] = []

        failed = asyncio.Event()

        async def keep_bumping() -> None:
            # Two RPCs at a time, one holding k and one in line for it, until one fails (k
            # held by the Step, or the Flow completed by it).
            while not failed.is_set():
                bump = asyncio.ensure_future(
                    first.invoke_rpc("bump", "f", options=TURNS, flow_type=RelayFlow.flow_type())
                )
                bump.add_done_callback(lambda done: done.exception() is None or failed.set())
                bumps.append(bump)
                if len(bumps) > 1:
                    await asyncio.wait([bumps[-2]])

        bumping = asyncio.ensure_future(keep_bumping())
        await eventually(lambda: len(bumps) > 5, what="RPCs passing k on")
        await second.invoke_rpc("queue_step", "f")
        result = await second.wait_for_flow("f", wait_seconds=30)
        assert result.status == "COMPLETED"
        await bumping
        await eventually(lambda: all(b.done() for b in bumps), what="the RPCs to stop")
        outcomes = await asyncio.gather(*bumps, return_exceptions=True)
        counted = [o for o in outcomes if isinstance(o, int)]
        assert outcomes[: len(counted)] == list(range(2, 2 + len(counted)))
        rest = outcomes[len(counted) :]
        assert 1 <= len(rest) <= 2, rest
        assert all(isinstance(o, RPCLockConflictError | FlowNotActiveOrNotFoundError) for o in rest)
        assert (await first.get_attributes("f", ["k"])).values == {"k": 1 + len(counted) + 10}


async def test_with_lock_handoffs_off_every_rpc_takes_its_rows_again(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    config = dataclasses.replace(engine_config, lock_handoffs=False)
    async with running_engine([LockFlow()], config) as eng:
        await eng.start_flow(LockFlow, "f")
        await _count_takes(url)
        results: list[asyncio.Future[Any]] = []
        _chain(eng, ["bump"] * 10, results)()
        assert await _outcomes(results, 10) == list(range(1, 11))
        assert await _takes(url) == 10


POISON_HOLD = (
    """
CREATE FUNCTION refuse_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_type = 'RPC_COMMITTED' AND NEW.details LIKE '%"hold"%' THEN
        RAISE EXCEPTION 'hold may not commit';
    END IF;
    RETURN NEW;
END $$
""",
    "CREATE TRIGGER refuse_hold BEFORE INSERT ON history "
    "FOR EACH ROW EXECUTE FUNCTION refuse_hold()",
)


async def test_a_holder_without_a_follower_commits_only_after_the_unit_it_read(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    gate.release.set()
    async with running_engine([LockFlow(gate)], engine_config) as eng:
        await eng.start_flow(LockFlow, "f")
        for statement in POISON_HOLD:
            await _sql(url, statement)
        # The bump waits in line while hold holds k, so hold's commit goes to a relay and
        # the bump gets k from it; nothing waits behind the bump: its commit is a plain one.
        hold, bump = (
            asyncio.ensure_future(
                eng.invoke_rpc(name, "f", options=TURNS, flow_type=LockFlow.flow_type())
            )
            for name in ("hold", "bump")
        )
        with pytest.raises(Exception, match="hold may not commit"):
            await hold
        # It read hold's +100, which never committed: it must not commit either.
        with pytest.raises(Exception, match="hold may not commit"):
            await bump
        assert (await eng.get_attributes("f", ["k"])).values == {}
        await eventually(lambda: _no_rows(url), what="the relay's rows dropped")
        assert await eng.invoke_rpc("bump", "f") == 1
