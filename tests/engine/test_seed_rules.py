"""Rules of seed 002 that held without a test: reads of committed state only, an RPC reading
its own staged writes, whole-map enumeration, RPCs pinned to an older run, closed-run erases."""

from __future__ import annotations

import asyncio

import pytest

from engine import (
    Attribute,
    AttributeMap,
    AttributeMapNotLoadedError,
    Context,
    EngineConfig,
    Flow,
    FlowNotActiveOrNotFoundError,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    graceful_complete,
    rpc,
)
from tests.conftest import running_engine


class Gate:
    entered: asyncio.Event
    release: asyncio.Event


class Busy(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(self.flow.count.lock(),))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.count.set(context, 99)  # staged: invisible until the decision commits
        Gate.entered.set()
        await Gate.release.wait()
        return graceful_complete(None)


class RulesFlow(Flow[None]):
    count = Attribute("count", int)
    notes = AttributeMap("notes", str)
    secret = Attribute("secret", str, hard_delete_on_null=True)
    label = Attribute("label", str)

    def get_steps(self) -> StepList[None]:
        return StepList.empty().other_steps(Busy())

    @rpc
    def bump_and_read(self, context: Context, input: int) -> RPCResult[int | None]:
        self.count.set(context, input)
        return RPCResult(self.count.get(context))  # its own staged write

    @rpc
    def list_notes(self, context: Context) -> dict[str, str]:
        return self.notes.items(context)  # no whole-map load declared

    @rpc(load_attribute_maps=(notes,))
    def all_notes(self, context: Context) -> dict[str, str]:
        return self.notes.items(context)

    @rpc
    def read_count(self, context: Context) -> int | None:
        return self.count.get(context)

    @rpc
    def start_busy(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Busy, None),))


def _gate() -> None:
    Gate.entered, Gate.release = asyncio.Event(), asyncio.Event()


async def test_get_attributes_reads_committed_state_and_takes_no_lock_a_step_holds(
    engine_config: EngineConfig,
) -> None:
    _gate()
    options = StartFlowOptions(initial_attributes={"count": 1})
    async with running_engine([RulesFlow()], engine_config) as eng:
        await eng.start_flow(RulesFlow, "r", options=options)
        await eng.invoke_rpc("start_busy", "r")
        await asyncio.wait_for(Gate.entered.wait(), 10)
        during = await asyncio.wait_for(eng.get_attributes("r", ["count"]), 5)  # not blocked
        Gate.release.set()
        await eng.wait_for_flow("r", wait_seconds=10)  # Busy's decision closes the run
        after = await eng.get_attributes("r", ["count"])
    assert during.values == {"count": 1}
    assert after.values == {"count": 99}


async def test_an_rpc_reads_its_own_staged_write(engine_config: EngineConfig) -> None:
    async with running_engine([RulesFlow()], engine_config) as eng:
        await eng.start_flow(RulesFlow, "r")
        assert await eng.invoke_rpc("bump_and_read", "r", 7) == 7


async def test_enumerating_map_instances_needs_a_whole_map_load(
    engine_config: EngineConfig,
) -> None:
    options = StartFlowOptions(initial_attributes={"notes/a": "A", "notes/b": "B"})
    async with running_engine([RulesFlow()], engine_config) as eng:
        await eng.start_flow(RulesFlow, "r", options=options)
        with pytest.raises(AttributeMapNotLoadedError):
            await eng.invoke_rpc("list_notes", "r")
        assert await eng.invoke_rpc("all_notes", "r") == {"a": "A", "b": "B"}


async def test_an_rpc_pinned_to_an_older_run_reads_that_run(engine_config: EngineConfig) -> None:
    async with running_engine([RulesFlow()], engine_config) as eng:
        first = await eng.start_flow(
            RulesFlow, "r", options=StartFlowOptions(initial_attributes={"count": 1})
        )
        await eng.stop_flow("r")
        await eng.start_flow(
            RulesFlow, "r", options=StartFlowOptions(initial_attributes={"count": 2})
        )
        assert await eng.invoke_rpc("read_count", "r") == 2
        assert await eng.invoke_rpc("read_count", "r", run_id=first.run_id) == 1


async def test_an_erase_after_close_is_refused_for_a_mixed_request_or_an_unstored_key(
    engine_config: EngineConfig,
) -> None:
    async with running_engine([RulesFlow()], engine_config) as eng:
        initial = {"secret": "s", "label": "x"}
        await eng.start_flow(RulesFlow, "r", options=StartFlowOptions(initial_attributes=initial))
        await eng.stop_flow("r")
        refused = "only the erase \\(null\\) of stored hard-delete values is allowed"
        with pytest.raises(FlowNotActiveOrNotFoundError, match=refused):
            await eng.set_attributes("r", {"secret": None, "label": None})  # mixed
        still = await eng.get_attributes("r", ["secret", "label"])
        await eng.set_attributes("r", {"secret": None})  # the erase itself
        with pytest.raises(FlowNotActiveOrNotFoundError, match=refused):
            await eng.set_attributes("r", {"secret": None})  # nothing stored any more
        after = await eng.get_attributes("r", ["secret", "label"])
    assert still.values == {"secret": "s", "label": "x"}
    assert after.values == {"label": "x"}
