"""``def`` handlers run on the engine's handler threads (``engine/_runtime/handler_threads.py``).

What a user relies on: a blocking ``def`` RPC or Step handler blocks neither the event loop nor
other invocations; at most ``rpc_threads`` (``step_threads``) of them run at once, the rest
wait their turn and then run; a handler sees the caller's context variables; what it raises
reaches the caller as RPC_HANDLER_ERROR; and the engine closes while a handler still blocks.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Iterator

import pytest

import engine
from engine import Context, Flow, RPCHandlerError, Step, StepDecision, StepList, rpc
from engine.step import graceful_complete
from tests.conftest import running_engine
from tests.support.backends import backend_independent
from tests.support.flow_clients import ServeFlows
from tests.support.waiting import eventually

pytestmark = backend_independent("handler threads do not touch the database")

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


@dataclasses.dataclass
class Gate:
    """Handlers block on ``opened``; ``inside`` counts those blocked right now."""

    opened: threading.Event = dataclasses.field(default_factory=threading.Event)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    inside: int = 0
    most: int = 0
    threads: set[str] = dataclasses.field(default_factory=set)

    def pass_through(self) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            self.threads.add(threading.current_thread().name)
        try:
            assert self.opened.wait(timeout=30), "the test never opened the gate"
        finally:
            with self.lock:
                self.inside -= 1


class BlockingFlow(Flow[None]):
    """RPC-only: ``wait`` blocks its thread on the gate; ``caller`` reads a context variable."""

    def __init__(self, gate: Gate | None = None) -> None:
        # Without one (a test that blocks nothing, or the server process of ``serve_flows``,
        # which instantiates the class without arguments) the Flow has a gate of its own.
        self.gate = Gate() if gate is None else gate

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc
    def wait(self, context: Context) -> str:
        self.gate.pass_through()
        return threading.current_thread().name

    @rpc
    def caller(self, context: Context) -> str:
        return CALLER.get()

    @rpc
    def fail(self, context: Context) -> None:
        raise LookupError("nothing here")


class BlockingStep(Step[int]):
    """A ``def`` Step that blocks on the gate, then completes with its input."""

    def execute(self, context: Context, input: int) -> StepDecision:
        self.flow.gate.pass_through()
        return graceful_complete(input)


class BlockingStepFlow(Flow[int]):
    """One blocking ``def`` Step."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(BlockingStep())


@pytest.fixture
def gate() -> Iterator[Gate]:
    """The test's own gate, to hand to the Flow it registers."""
    made = Gate()
    yield made
    made.opened.set()  # never leave a handler thread blocked past its test


async def test_blocking_def_rpcs_leave_the_loop_free_and_queue_past_the_pool_size(
    engine_config: engine.EngineConfig, gate: Gate
) -> None:
    config = dataclasses.replace(engine_config, rpc_threads=2)
    async with running_engine([BlockingFlow(gate)], config) as eng:
        for n in range(3):
            await eng.start_flow(BlockingFlow, f"b{n}")
        calls = [asyncio.ensure_future(eng.invoke_rpc("wait", f"b{n}", None)) for n in range(3)]
        # Two handlers block their threads; the loop still serves other calls meanwhile.
        await eventually(lambda: gate.inside == 2)
        assert (await eng.describe_flow("b0")).status == "RUNNING"
        assert not any(c.done() for c in calls)
        assert gate.inside == 2, "a third handler ran although both threads were busy"
        gate.opened.set()
        names = await asyncio.gather(*calls)
        assert gate.most == 2
        assert set(names) <= {"dexlite-rpc_0", "dexlite-rpc_1"}
        assert len(set(names)) == 2


async def test_a_def_rpc_sees_the_callers_context_variables(
    engine_config: engine.EngineConfig,
) -> None:
    async with running_engine([BlockingFlow()], engine_config) as eng:
        await eng.start_flow(BlockingFlow, "b")

        async def as_caller(name: str) -> str:
            CALLER.set(name)
            return str(await eng.invoke_rpc("caller", "b", None))

        assert await asyncio.gather(as_caller("alice"), as_caller("bob")) == ["alice", "bob"]
        assert await eng.invoke_rpc("caller", "b", None) == "none"


async def test_what_a_def_rpc_raises_reaches_the_caller(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([BlockingFlow()]) as flows:
        await flows.start_flow(BlockingFlow, "b")
        with pytest.raises(RPCHandlerError) as raised:
            await flows.invoke_rpc("fail", "b", None)
        assert raised.value.code == "RPC_HANDLER_ERROR"
        assert "LookupError" in str(raised.value)
        # The thread that raised serves the next call.
        assert await flows.invoke_rpc("caller", "b", None) == "none"


async def test_blocking_def_steps_run_at_most_step_threads_at_once(
    engine_config: engine.EngineConfig, gate: Gate
) -> None:
    config = dataclasses.replace(engine_config, step_threads=2)
    async with running_engine([BlockingStepFlow(gate)], config) as eng:
        for n in range(4):
            await eng.start_flow(BlockingStepFlow, f"s{n}", n)
        await eventually(lambda: gate.inside == 2)
        # The loop answers reads while both Step threads block.
        assert (await eng.describe_flow("s0")).status == "RUNNING"
        assert gate.inside == 2
        gate.opened.set()
        for n in range(4):
            result = await eng.wait_for_flow(f"s{n}", wait_seconds=30)
            assert result.status == "COMPLETED"
            assert [c.output for c in result.completions] == [n]
        assert gate.most == 2
        assert gate.threads == {"dexlite-step_0", "dexlite-step_1"}


async def test_the_engine_closes_while_a_def_handler_still_blocks(
    engine_config: engine.EngineConfig, gate: Gate
) -> None:
    eng = engine.Engine(engine.Registry([BlockingFlow(gate)]), engine_config)
    await eng.start()
    try:
        await eng.start_flow(BlockingFlow, "b")
        call = asyncio.ensure_future(eng.invoke_rpc("wait", "b", None))
        await eventually(lambda: gate.inside == 1)
    finally:
        await asyncio.wait_for(eng.close(), timeout=30)
    assert gate.inside == 1  # still blocked: closing did not wait for the handler
    call.cancel()
    gate.opened.set()
    await eventually(lambda: gate.inside == 0)
