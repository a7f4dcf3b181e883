"""WaitForAttributeMatch through the engine API (issue 3)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from engine import (
    Attribute,
    AttributeMap,
    Context,
    EngineConfig,
    Flow,
    FlowNotActiveOrNotFoundError,
    InvalidArgumentError,
    MatchOperator,
    RPCResult,
    StartFlowOptions,
    StepList,
    rpc,
)
from engine._storage import reads
from tests.conftest import running_engine
from tests.support.flow_clients import ServeFlows


class CounterFlow(Flow[None]):
    count = Attribute("count", int)
    label = Attribute("label", Any)
    progress = AttributeMap("progress", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def set_count(self, context: Context, input: int) -> RPCResult[None]:
        self.count.set(context, input)
        return RPCResult(None)

    @rpc
    def bump_twice(self, context: Context, input: int) -> RPCResult[None]:
        # Only the committed (last) value exists; the intermediate one never matches.
        self.count.set(context, input)
        self.count.set(context, input + 1)
        return RPCResult(None)


class Reads:
    """Counts the run and snapshot reads of each task; tells when one has read.

    A waiter reads the current value once, after registering; once that read has returned, a
    commit can only reach it through the commit listener.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_task: dict[asyncio.Task[Any] | None, Counter[str]] = {}
        self._changed = asyncio.Event()
        real_snapshot, real_run = reads.load_snapshot, reads.load_run

        async def counting_snapshot(*args: Any, **kwargs: Any) -> Any:
            try:
                return await real_snapshot(*args, **kwargs)
            finally:
                self._count("snapshot")

        async def counting_run(*args: Any, **kwargs: Any) -> Any:
            try:
                return await real_run(*args, **kwargs)
            finally:
                self._count("run")

        monkeypatch.setattr(reads, "load_snapshot", counting_snapshot)
        monkeypatch.setattr(reads, "load_run", counting_run)

    def _count(self, kind: str) -> None:
        self.by_task.setdefault(asyncio.current_task(), Counter())[kind] += 1
        self._changed.set()

    def of(self, task: asyncio.Task[Any]) -> dict[str, int]:
        """Return how many reads of each kind ``task`` has made."""
        return dict(self.by_task.get(task, {}))

    def total(self) -> dict[str, int]:
        """Return how many reads of each kind every task together has made."""
        return dict(sum(self.by_task.values(), Counter()))

    async def until_read(self, *tasks: asyncio.Task[Any]) -> None:
        """Return once each of ``tasks`` has read its snapshot (it now waits for commits)."""
        while not all(self.of(task).get("snapshot") for task in tasks):
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), 5)


async def test_waiting_for_a_match_does_not_poll_the_database(
    engine_config: EngineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_engine([CounterFlow()], engine_config) as eng:
        await eng.start_flow(CounterFlow, "f")
        seen = Reads(monkeypatch)
        task = asyncio.create_task(
            eng.wait_for_attribute_match("f", "count", MatchOperator.GE, 3, wait_seconds=30)
        )
        # A second waiter that never matches: its own deadline ends the observation, and
        # over its whole wait neither waiter reads again.
        never = asyncio.create_task(
            eng.wait_for_attribute_match("f", "count", MatchOperator.GE, 99, wait_seconds=0.6)
        )
        await seen.until_read(task, never)
        assert not (await never).matched
        assert not task.done()
        assert seen.of(task) == {"snapshot": 1, "run": 1}
        # The one that gave up read once more at its deadline (a commit another process made
        # could have gone unannounced), and only then.
        assert seen.of(never) == {"snapshot": 2, "run": 1}
        assert seen.total() == {"snapshot": 3, "run": 2}  # nothing else read meanwhile
        # A commit that does not match reaches the waiter without a read; one that does, too.
        await eng.invoke_rpc("set_count", "f", 2)
        assert not task.done()
        await eng.invoke_rpc("set_count", "f", 3)
        match = await asyncio.wait_for(task, 5)
        assert (match.matched, match.value) == (True, 3)
        assert seen.of(task) == {"snapshot": 1, "run": 1}


async def test_only_the_committed_value_of_a_commit_is_offered(
    engine_config: EngineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_engine([CounterFlow()], engine_config) as eng:
        await eng.start_flow(CounterFlow, "f")
        seen = Reads(monkeypatch)
        task = asyncio.create_task(
            eng.wait_for_attribute_match("f", "count", "EQ", 5, wait_seconds=0.5)
        )
        await seen.until_read(task)  # registered and read: the commit below is offered to it
        await eng.invoke_rpc("bump_twice", "f", 5)
        assert (await task).matched is False
        match = await eng.wait_for_attribute_match("f", "count", "EQ", 6)
        assert (match.matched, match.value) == (True, 6)


async def test_many_waiters_on_one_flow_each_get_their_own_match(
    engine_config: EngineConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_engine([CounterFlow()], engine_config) as eng:
        await eng.start_flow(CounterFlow, "f")
        seen = Reads(monkeypatch)
        tasks = [
            asyncio.create_task(
                eng.wait_for_attribute_match("f", "count", "GE", n, wait_seconds=10)
            )
            for n in range(1, 6)
        ]
        await seen.until_read(*tasks)  # each read the unset count: only commits can match them
        for n in range(1, 6):
            await eng.invoke_rpc("set_count", "f", n)
        results = await asyncio.gather(*tasks)
        assert all(r.matched for r in results)
        assert [r.value for r in results] == [1, 2, 3, 4, 5]


async def test_a_loosely_typed_attribute_compares_by_json_kind(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await flows.start_flow(
            CounterFlow, "f", options=StartFlowOptions(initial_attributes={"label": True})
        )
        assert (await flows.wait_for_attribute_match("f", "label", "EQ", True)).matched
        # True is not the number 1, and a bool is not ordered.
        assert not (await flows.wait_for_attribute_match("f", "label", "EQ", 1)).matched
        assert not (await flows.wait_for_attribute_match("f", "label", "GE", 0)).matched
        assert (await flows.wait_for_attribute_match("f", "label", "NE", 1)).matched


async def test_engine_api_rejects_bad_arguments_and_closed_flows(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([CounterFlow()]) as flows:
        await flows.start_flow(CounterFlow, "f")
        with pytest.raises(InvalidArgumentError, match="operator"):
            await flows.wait_for_attribute_match("f", "count", "LIKE", 1)
        with pytest.raises(InvalidArgumentError, match="finite"):
            await flows.wait_for_attribute_match("f", "count", "GT", float("nan"))
        with pytest.raises(InvalidArgumentError, match="waitSeconds"):
            await flows.wait_for_attribute_match("f", "count", "GT", 1, wait_seconds=60.5)
        with pytest.raises(InvalidArgumentError, match="instance"):
            await flows.wait_for_attribute_match("f", "progress", "EQ", "x", instance="a/b")
        assert not (
            await flows.wait_for_attribute_match("f", "progress", "EQ", "x", instance="a")
        ).matched
        await flows.stop_flow("f")
        with pytest.raises(FlowNotActiveOrNotFoundError):
            await flows.wait_for_attribute_match("f", "count", "EQ", 1)
