"""An RPC's Attribute locks on a shared PostgreSQL database, fast path and full path alike.

An RPC takes its keys with one statement when no row is on them, and drops them with one
statement when no Step waits on the Flow; otherwise the full transaction runs, judging the
rows found alive or dead and granting waiting Steps. Each test pins one of those cases down.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from engine import (
    Attribute,
    Context,
    Engine,
    EngineConfig,
    Flow,
    FlowNotActiveOrNotFoundError,
    RPCLockConflictError,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    graceful_complete,
    rpc,
)
from tests.conftest import running_engine
from tests.support.backends import postgres_only
from tests.support.waiting import eventually

pytestmark = postgres_only("the lock rows of a shared database")


@dataclasses.dataclass
class Gate:
    """Where the gated RPC waits: each test makes its own and hands it to its LockFlows."""

    entered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    release: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class AfterTheRPC(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.k.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.k.set(context, (self.flow.k.get(context) or 0) + 10)
        return graceful_complete(None)


class LockFlow(Flow[None]):
    k = Attribute("k", int)
    j = Attribute("j", int)

    def __init__(self, gate: Gate | None = None) -> None:
        self.gate = Gate() if gate is None else gate  # its own when the test opens none

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(AfterTheRPC())

    @rpc(lock_attributes=(k.lock(),))
    async def hold(self, context: Context) -> RPCResult[None]:
        self.gate.entered.set()
        await self.gate.release.wait()
        self.k.set(context, (self.k.get(context) or 0) + 100)
        return RPCResult(None)

    @rpc(lock_attributes=(k.lock(),))
    def bump(self, context: Context) -> int:
        value = (self.k.get(context) or 0) + 1
        self.k.set(context, value)
        return value

    @rpc(lock_attributes=(j.lock(), k.lock()))
    def bump_both(self, context: Context) -> None:
        self.j.set(context, (self.j.get(context) or 0) + 1)
        self.k.set(context, (self.k.get(context) or 0) + 1)

    @rpc
    def queue_step(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(AfterTheRPC, None),))


KEY = LockFlow.k.lock().key


async def _sql(url: str, statement: str, **params: Any) -> list[tuple[Any, ...]]:
    db = create_async_engine(url)
    try:
        async with db.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        await db.dispose()


async def _lock_rows(url: str) -> list[tuple[Any, ...]]:
    return await _sql(
        url, "SELECT lock_key, owner, kind, process_id FROM attribute_locks ORDER BY lock_key"
    )


async def _put_lock_row(url: str, owner: str, process_id: str) -> None:
    await _sql(
        url,
        "INSERT INTO attribute_locks (flow_id, lock_key, owner, kind, phase, process_id) "
        "VALUES ('f', :key, :owner, 'an RPC', '', :process)",
        key=KEY,
        owner=owner,
        process=process_id,
    )


async def _process_ids(url: str) -> list[str]:
    return [row[0] for row in await _sql(url, "SELECT process_id FROM processes")]


async def _holding(eng: Engine, gate: Gate) -> asyncio.Task[Any]:
    """Start Flow f and return its ``hold`` RPC once it runs, holding k until ``gate`` (the
    gate of the LockFlow ``eng`` runs) opens."""
    await eng.start_flow(LockFlow, "f")
    held = asyncio.create_task(eng.invoke_rpc("hold", "f"))
    await asyncio.wait_for(gate.entered.wait(), 10)
    return held


async def test_an_rpc_holds_one_row_per_key_while_it_runs_and_none_after(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    async with running_engine([LockFlow(gate)], engine_config) as eng:
        held = await _holding(eng, gate)
        (process,) = await _process_ids(url)
        rows = await _lock_rows(url)
        assert [(key, kind, where) for key, _, kind, where in rows] == [(KEY, "an RPC", process)]
        with pytest.raises(RPCLockConflictError, match="an RPC"):
            await eng.invoke_rpc("bump", "f")
        with pytest.raises(RPCLockConflictError, match="an RPC"):
            await eng.set_attributes("f", {"k": 7})  # a client write takes the keys too
        gate.release.set()
        assert await held is None
        assert await _lock_rows(url) == []
        assert await eng.invoke_rpc("bump", "f") == 101
        assert await _lock_rows(url) == []
        await eng.set_attributes("f", {"k": 7})
        assert await _lock_rows(url) == []
        assert (await eng.get_attributes("f", ["k"])).values == {"k": 7}


async def test_the_row_of_a_dead_processs_rpc_is_cleared_and_the_key_taken(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    async with running_engine([LockFlow()], engine_config) as eng:
        await eng.start_flow(LockFlow, "f")
        await _put_lock_row(url, "an-rpc-of-a-dead-process", "a-process-with-no-lease")
        assert await eng.invoke_rpc("bump", "f") == 1
        assert await _lock_rows(url) == []


async def test_the_row_of_a_live_processs_rpc_conflicts_and_stays(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    async with running_engine([LockFlow()], engine_config) as eng:
        await eng.start_flow(LockFlow, "f")
        (process,) = await _process_ids(url)
        await _put_lock_row(url, "another-rpc", process)
        with pytest.raises(RPCLockConflictError, match="an RPC") as caught:
            await eng.invoke_rpc("bump", "f")
        assert caught.value.key == KEY
        assert await _lock_rows(url) == [(KEY, "another-rpc", "an RPC", process)]
        assert (await eng.get_attributes("f", ["k"])).values.get("k") is None
        # Of two keys, the free one is not kept either: the take changed nothing.
        with pytest.raises(RPCLockConflictError, match="an RPC") as both:
            await eng.invoke_rpc("bump_both", "f")
        assert both.value.key == KEY
        assert await _lock_rows(url) == [(KEY, "another-rpc", "an RPC", process)]
        assert (await eng.get_attributes("f")).values == {}


async def test_an_rpc_dropping_its_keys_grants_them_to_another_processs_waiting_step(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    # No poll in the test's time: only the RPC's release can grant the waiting Step. It is
    # the other engine's (its commit queued it), so the releasing engine has no Step of its
    # own waiting and goes by the lock rows alone.
    config = dataclasses.replace(engine_config, poll_seconds=timedelta(hours=1).total_seconds())
    async with (
        running_engine([LockFlow(gate)], config) as first,
        running_engine([LockFlow(gate)], config) as second,
    ):
        held = await _holding(first, gate)
        await second.invoke_rpc("queue_step", "f")

        async def step_waits() -> list[tuple[Any, ...]]:
            return await _sql(url, "SELECT owner FROM lock_waiters")

        await eventually(step_waits, what="the Step waiting for k")
        gate.release.set()
        await held
        result = await second.wait_for_flow("f", wait_seconds=30)
        assert result.status == "COMPLETED"
        assert (await first.get_attributes("f", ["k"])).values["k"] == 110

        async def released() -> bool:
            # The Step's row is dead once its execution closed; its process deletes it right
            # after the commit that closed it, which the wait above may beat.
            rows = await _lock_rows(url)
            waiters = await _sql(url, "SELECT owner FROM lock_waiters")
            return rows == [] and waiters == []

        await eventually(released, what="the Step's lock row and its waiter row gone")


async def test_an_rpc_whose_commit_fails_still_drops_its_keys(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    async with running_engine([LockFlow(gate)], engine_config) as eng:
        held = await _holding(eng, gate)
        await eng.stop_flow("f")  # the run closes under the RPC: its commit must fail
        gate.release.set()
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await held
        # The release made with the commit was rolled back with it, and made on its own.
        assert await _lock_rows(url) == []
        await eng.start_flow(LockFlow, "f")  # a new run of the Flow ID takes k at once
        assert await eng.invoke_rpc("bump", "f") == 1


async def test_an_rpc_whose_key_was_taken_over_after_its_lease_lapsed_commits_nothing(
    engine_config: EngineConfig,
) -> None:
    url = engine_config.database_url
    gate = Gate()
    async with (
        running_engine([LockFlow(gate)], engine_config) as first,
        running_engine([LockFlow(gate)], engine_config) as second,
    ):
        held = await _holding(first, gate)
        ((_, _, _, holder),) = await _lock_rows(url)

        async def taken_over() -> bool:
            # The first engine renews its lease: end it until the other has taken k.
            await _sql(
                url, "UPDATE processes SET lease_expires_at = 0 WHERE process_id = :p", p=holder
            )
            try:
                return bool(await second.invoke_rpc("bump", "f") == 1)
            except RPCLockConflictError:
                return False

        await eventually(taken_over, what="the other engine to take k over")
        gate.release.set()
        with pytest.raises(RPCLockConflictError) as caught:
            await held
        assert caught.value.key == KEY
        values = await second.get_attributes("f", ["k"])
        history = (await second.get_flow_history("f")).events
    # The holder whose lease lapsed committed nothing: only the taker's increment is there.
    assert values.values == {"k": 1}
    assert [e.details["rpc"] for e in history if e.event_type == "RPC_COMMITTED"] == ["bump"]
