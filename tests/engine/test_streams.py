"""Streams through the Engine: Step writes (async and sync generators), heartbeats, the
buffered text writer on the injectable clock, client writes, the disabled backend, restarts
and concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from engine import (
    Context,
    DefinitionError,
    EngineConfig,
    FailedPreconditionError,
    Flow,
    FlowTypeNotFoundError,
    Heartbeat,
    InvalidArgumentError,
    ManualClock,
    ResourceExhaustedError,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    StepOutput,
    Stream,
    StreamNotFoundError,
    StreamStoreConfig,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.engine.test_stream_store_backends import (
    drop_stream_database,
    selected_stores,
    store_config,
)

WAIT = 10.0
F = TypeVar("F", bound=Callable[..., Any])


def memory_store_only(reason: str) -> Callable[[F], F]:
    """Run a test on the memory Stream Store only."""

    def mark(test: F) -> F:
        test.memory_store_only = reason  # type: ignore[attr-defined]
        return test

    return mark


@pytest.fixture(scope="session")
def _stream_database() -> Iterator[None]:
    """Drop the database of Stream schemas the postgres runs made when the run ends."""
    yield
    drop_stream_database()


@pytest.fixture(params=selected_stores())
async def engine_config(
    request: pytest.FixtureRequest, engine_config: EngineConfig, _stream_database: None
) -> AsyncIterator[EngineConfig]:
    """Run every test on each selected Stream Store (see test_stream_store_backends)."""
    reason = getattr(request.function, "memory_store_only", None)
    if reason is not None and request.param != "memory":
        pytest.skip(f"memory store only: {reason}")
    async with store_config(request.param, engine_config.database_url) as streams:
        yield dataclasses.replace(engine_config, streams=streams)


@dataclasses.dataclass
class Gates:
    """Events a test and its Steps meet at: each test makes its own and hands it to the Flow
    it registers (``flow_with(step, gates)``); a Step reads it as ``self.flow.gates``."""

    async_gate: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    thread_gate: threading.Event = dataclasses.field(default_factory=threading.Event)
    thread_ready: threading.Event = dataclasses.field(default_factory=threading.Event)
    observed: dict[str, Any] = dataclasses.field(default_factory=dict)


class AnnounceAsync(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.progress.write(context, "async started")
        await self.flow.gates.async_gate.wait()
        return graceful_complete("done")


class AnnounceSync(Step[None]):
    def execute(self, context: Context, input: None) -> Iterator[StepOutput]:
        yield self.flow.progress.write(context, "sync started")
        self.flow.gates.thread_gate.wait(WAIT)
        return graceful_complete("done")  # type: ignore[return-value]


class WriteThenFail(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.progress.write(context, f"#{context.step_execution_id}")
        raise RuntimeError("boom after writing")


class Busy(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        context.heartbeat({"phase": "download"})
        for i in range(50):
            self.flow.progress.write(context, f"p{i}")
        self.flow.counts.write(context, 50)
        io = context.step_io
        assert io is not None
        self.flow.gates.observed["async"] = (io.heartbeat_details, io.heartbeats)
        return graceful_complete()


class BusySync(Step[None]):
    def execute(self, context: Context, input: None) -> Iterator[StepOutput]:
        yield Heartbeat("phase one")
        for i in range(3):
            yield self.flow.progress.write(context, f"s{i}")
        yield self.flow.counts.write(context, 3)
        io = context.step_io
        assert io is not None
        self.flow.gates.observed["sync"] = (io.heartbeat_details, io.heartbeats)
        return graceful_complete()  # type: ignore[return-value]


class RetryWrites(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(max_attempts=2, initial_interval=timedelta(0)))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.progress.write(context, f"attempt {context.attempt}")
        if context.attempt == 1:
            raise RuntimeError("first attempt fails")
        return graceful_complete()


class WaitThenWrite(Step[None]):
    async def wait_for(self, context: Context, input: None) -> Wait:
        self.flow.progress.write(context, "waiting")
        return Wait.until(Timer.by_duration(timedelta(0)))

    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.progress.write(context, "executing")
        return graceful_complete()


class YieldsJunk(Step[None]):
    def execute(self, context: Context, input: None) -> Iterator[Any]:
        yield "not a StepOutput"
        return graceful_complete()


class TooBig(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.tiny.write(context, "x" * 500)
        self.flow.progress.write(context, "small one")
        return graceful_complete("completed anyway")


class BadValue(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        self.flow.counts.write(context, "not a number")
        return graceful_complete()


class ManyWrites(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        for i in range(input):
            self.flow.progress.write(context, f"{context.step_execution_id}:{i}")
            if i % 9 == 0:
                await asyncio.sleep(0)
        return graceful_complete()


class ManyWritesSync(Step[int]):
    def execute(self, context: Context, input: int) -> Iterator[StepOutput]:
        for i in range(input):
            yield self.flow.progress.write(context, f"{context.step_execution_id}:{i}")
        return graceful_complete()  # type: ignore[return-value]


def flow_with(step: Step[Any], gates: Gates | None = None) -> Flow[Any]:
    """Return a Flow instance of a fresh class named after ``step`` with the test Streams,
    holding ``gates`` (fresh ones when the test meets none of its Steps)."""

    class _Flow(Flow[Any]):
        progress = Stream("progress", str)
        counts = Stream("counts", int)
        tiny = Stream("tiny", str, stream_capacity_bytes=200)

        def __init__(self, gates: Gates) -> None:
            self.gates = gates

        def get_steps(self) -> StepList[Any]:
            return StepList.start_step(step)

        @rpc
        def report(self, context: Context) -> None:
            self.progress.write(context, "from an RPC")

    _Flow.__name__ = _Flow.__qualname__ = f"{type(step).__name__}Flow"
    return _Flow(Gates() if gates is None else gates)


#: How long a Flow may take to close: the concurrency test's dozen Flows writing thousands of
#: messages through a database-backed store take a few seconds alone, tens of seconds on a
#: machine that runs the rest of the suite beside them: the longest wait a call may ask for.
CLOSE_WAIT = 60.0


async def finished(eng: Any, flow_id: str) -> Any:
    """Return the Flow's result as soon as it closed (RUNNING if it did not within
    CLOSE_WAIT)."""
    return await eng.wait_for_flow(flow_id, wait_seconds=CLOSE_WAIT)


async def values(eng: Any, flow: Flow[Any], flow_id: str, stream: str = "progress") -> list[Any]:
    """Return every retained message value, oldest first."""
    page = await eng.list_stream_messages(flow_id, stream, 1000, flow_type=type(flow))
    return [m.value for m in reversed(page.messages)]


async def test_async_step_write_is_sent_at_once_not_with_the_result(
    engine_config: EngineConfig,
) -> None:
    gates = Gates()
    flow = flow_with(AnnounceAsync(), gates)
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        message = await eng.read_stream("f1", "progress", wait_seconds=WAIT, flow_type=type(flow))
        assert message is not None and message.value == "async started"
        assert (await eng.describe_flow("f1")).status == "RUNNING"
        gates.async_gate.set()
        assert (await finished(eng, "f1")).status == "COMPLETED"


async def test_sync_generator_step_write_is_sent_at_once(engine_config: EngineConfig) -> None:
    gates = Gates()
    flow = flow_with(AnnounceSync(), gates)
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        message = await eng.read_stream("f1", "progress", wait_seconds=WAIT, flow_type=type(flow))
        assert message is not None and message.value == "sync started"
        assert (await eng.describe_flow("f1")).status == "RUNNING"
        gates.thread_gate.set()
        result = await finished(eng, "f1")
        assert result.status == "COMPLETED"
        assert result.completions[0].output == "done"  # the generator's return value


async def test_a_later_step_failure_does_not_take_a_write_back(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(WriteThenFail())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        assert (await finished(eng, "f1")).status == "FAILED"
        message = await eng.read_stream("f1", "progress", flow_type=type(flow))
        assert message is not None
        # Every Step message has the source #<stepExecutionId>.
        assert message.source == message.value and message.source.startswith("#")


async def test_any_number_of_writes_are_implicit_heartbeats_keeping_explicit_details(
    engine_config: EngineConfig,
) -> None:
    gates = Gates()
    flow, sync_flow = flow_with(Busy(), gates), flow_with(BusySync(), gates)
    async with running_engine([flow, sync_flow], engine_config) as eng:
        await eng.start_flow(type(flow), "a")
        await eng.start_flow(type(sync_flow), "s")
        assert (await finished(eng, "a")).status == "COMPLETED"
        assert (await finished(eng, "s")).status == "COMPLETED"
        assert await values(eng, flow, "a") == [f"p{i}" for i in range(50)]
        assert await values(eng, flow, "a", "counts") == [50]
        assert await values(eng, sync_flow, "s") == ["s0", "s1", "s2"]
    assert gates.observed["async"] == ({"phase": "download"}, 52)
    assert gates.observed["sync"] == ("phase one", 5)


async def test_rpc_handlers_cannot_write_through_their_context(
    engine_config: EngineConfig,
) -> None:
    gates = Gates()
    flow = flow_with(AnnounceAsync(), gates)
    gates.async_gate.set()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        with pytest.raises(DefinitionError, match="RPC handlers cannot write Streams"):
            await eng.invoke_rpc("report", "f1")


class InjectedClientFlow(Flow[None]):
    progress = Stream("progress", str)
    client: Any = None  # the Engine, injected by the application

    @rpc
    async def announce(self, context: Context, input: str) -> str:
        token: str = await self.client.write_stream(
            context.flow_id, self.progress, input, source=f"rpc:{context.rpc_name}"
        )
        return token


class ContextWriterFlow(Flow[None]):
    progress = Stream("progress", str)

    @rpc
    def report(self, context: Context, input: str) -> None:
        self.progress.write(context, input)

    @rpc
    def beat(self, context: Context) -> None:
        context.heartbeat("busy")


async def test_an_rpc_writing_a_stream_through_its_context_is_told_to_use_a_client(
    engine_config: EngineConfig,
) -> None:
    flow = ContextWriterFlow()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(ContextWriterFlow, "f1")
        with pytest.raises(DefinitionError, match="RPC report.*Engine.write_stream"):
            await eng.invoke_rpc(flow.report, "f1", "x")
        with pytest.raises(DefinitionError, match="only Step invocations heartbeat"):
            await eng.invoke_rpc(flow.beat, "f1")
        page = await eng.list_stream_messages("f1", ContextWriterFlow.progress, 10)
        assert page.messages == []


async def test_rpcs_write_streams_through_an_injected_client(
    engine_config: EngineConfig,
) -> None:
    flow = InjectedClientFlow()
    async with running_engine([flow], engine_config) as eng:
        flow.client = eng
        await eng.start_flow(InjectedClientFlow, "f1")
        token = await eng.invoke_rpc(flow.announce, "f1", "hello")
        message = await eng.read_stream("f1", InjectedClientFlow.progress)
        assert message is not None
        assert (message.value, message.source, message.resume_token) == (
            "hello",
            "rpc:announce",
            token,
        )


async def test_a_retry_writes_again_with_the_same_source(engine_config: EngineConfig) -> None:
    flow = flow_with(RetryWrites())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        assert (await finished(eng, "f1")).status == "COMPLETED"
        page = await eng.list_stream_messages("f1", "progress", 10, flow_type=type(flow))
        assert [m.value for m in page.messages] == ["attempt 2", "attempt 1"]
        assert len({m.source for m in page.messages}) == 1


async def test_wait_for_and_execute_both_write(engine_config: EngineConfig) -> None:
    flow = flow_with(WaitThenWrite())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        assert (await finished(eng, "f1")).status == "COMPLETED"
        assert await values(eng, flow, "f1") == ["waiting", "executing"]


async def test_a_generator_yielding_something_else_fails_the_step(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(YieldsJunk())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        result = await finished(eng, "f1")
        assert (result.status, result.error_type) == ("FAILED", "InvalidStepResultError")


async def test_a_rejected_step_write_is_dropped_without_failing_the_step(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(TooBig())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        result = await finished(eng, "f1")
        assert result.status == "COMPLETED"
        assert await values(eng, flow, "f1", "tiny") == []
        assert await values(eng, flow, "f1") == ["small one"]


async def test_a_value_of_the_wrong_type_fails_the_step(engine_config: EngineConfig) -> None:
    flow = flow_with(BadValue())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        result = await finished(eng, "f1")
        assert (result.status, result.error_type) == ("FAILED", "InvalidArgumentError")


@memory_store_only("it replaces the store with a disabled one")
async def test_disabled_store_drops_step_writes_and_refuses_clients(
    engine_config: EngineConfig,
) -> None:
    config = dataclasses.replace(engine_config, streams=StreamStoreConfig(backend="disabled"))
    flow = flow_with(Busy())
    async with running_engine([flow], config) as eng:
        await eng.start_flow(type(flow), "f1")
        assert (await finished(eng, "f1")).status == "COMPLETED"
        with pytest.raises(FailedPreconditionError):
            await eng.write_stream("f1", "progress", "x", source="me", flow_type=type(flow))
        with pytest.raises(FailedPreconditionError):
            await eng.read_stream("f1", "progress", flow_type=type(flow))
        with pytest.raises(FailedPreconditionError):
            await eng.list_stream_messages("f1", "progress", flow_type=type(flow))


async def test_clients_write_to_missing_and_closed_flows(engine_config: EngineConfig) -> None:
    flow = flow_with(Busy())
    async with running_engine([flow], engine_config) as eng:
        await eng.write_stream(
            "never-started", "progress", "hi", source="cli", flow_type=type(flow)
        )
        await eng.start_flow(type(flow), "done")
        await finished(eng, "done")
        token = await eng.write_stream(
            "done",
            type(flow).progress,
            "after close",  # type: ignore[attr-defined]
            source="cli",
        )
        assert await values(eng, flow, "never-started") == ["hi"]
        last = await eng.read_stream("done", "progress", flow_type=type(flow))
        assert last is not None and last.value == "p0"
        assert (await values(eng, flow, "done"))[-1] == "after close"
        assert await eng.read_stream("done", "progress", token, flow_type=type(flow)) is None


async def test_unknown_flow_type_stream_or_bad_ids_are_errors(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(Busy())
    async with running_engine([flow], engine_config) as eng:
        with pytest.raises(FlowTypeNotFoundError):
            await eng.write_stream("f", "progress", "x", source="s", flow_type="Nope")
        with pytest.raises(StreamNotFoundError):
            await eng.write_stream("f", "nope", "x", source="s", flow_type=type(flow))
        with pytest.raises(StreamNotFoundError):
            await eng.read_stream("f", Stream("progress", str))  # not a registered declaration
        with pytest.raises(InvalidArgumentError, match="flow_type"):
            await eng.read_stream("f", "progress")
        with pytest.raises(InvalidArgumentError, match="flowId"):
            await eng.write_stream("a/b", "progress", "x", source="s", flow_type=type(flow))


@memory_store_only("a shared store keeps its contents (test_stream_store_backends)")
async def test_contents_vanish_on_restart_and_old_tokens_start_at_the_head(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(Busy())
    async with running_engine([flow], engine_config) as eng:
        old = await eng.write_stream("f", "progress", "before", source="s", flow_type=type(flow))
    async with running_engine([flow], engine_config) as eng:
        assert await values(eng, flow, "f") == []
        await eng.write_stream("f", "progress", "after", source="s", flow_type=type(flow))
        message = await eng.read_stream("f", "progress", old, flow_type=type(flow))
        assert message is not None and message.value == "after"


async def test_capacity_rejection_reaches_the_client_and_retry_succeeds(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(Busy())
    async with running_engine([flow], engine_config) as eng:
        kind = type(flow)
        await eng.write_stream("f", "tiny", "a" * 40, source="s", flow_type=kind)
        with pytest.raises(ResourceExhaustedError) as rejected:
            await eng.write_stream("f", "tiny", "b" * 40, source="s", flow_type=kind)
        assert rejected.value.retryable is True
        await settle(eng)  # the rejection asked for room; trimming makes it in the background
        await eng.write_stream("f", "tiny", "b" * 40, source="s", flow_type=kind)
        assert await values(eng, flow, "f", "tiny") == ["b" * 40]


# -- the buffered text writer on the injectable clock -----------------------------------------


class TypingAsync(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        writer = self.flow.progress.buffered_text(context)
        writer.write("Hel")
        writer.write("")
        writer.write("lo")
        self.flow.gates.observed["first"].set()
        await self.flow.gates.observed["advanced"].wait()
        writer.write(" wor")
        writer.write("ld")
        self.flow.gates.observed["second"].set()
        await self.flow.gates.observed["finish"].wait()
        return graceful_complete()


class TypingThreshold(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        writer = self.flow.progress.buffered_text(context)
        for i in range(20):
            writer.write(chr(0x0100 + i) * 500)  # 500 characters, 1000 UTF-8 bytes
        return graceful_complete()


class TypingNothing(Step[None]):
    async def execute(self, context: Context, input: None) -> StepDecision:
        writer = self.flow.progress.buffered_text(context)
        writer.write("")
        assert writer.flush() == []
        io = context.step_io
        assert io is not None
        self.flow.gates.observed["beats"] = io.heartbeats
        return graceful_complete()


class TypingSync(Step[None]):
    def execute(self, context: Context, input: None) -> Iterator[StepOutput]:
        writer = self.flow.progress.buffered_text(context)
        yield from writer.write("a")
        self.flow.gates.thread_ready.set()
        self.flow.gates.thread_gate.wait(WAIT)  # the test moves the clock one second on
        yield from writer.write("b")  # a second has passed: "ab" goes out now
        yield from writer.write("c")
        yield from writer.flush()  # the explicit final flush
        yield from writer.write("d")  # left for the end of the invocation
        return graceful_complete()  # type: ignore[return-value]


async def test_buffered_writer_flushes_each_second_and_at_the_end(
    engine_config: EngineConfig,
) -> None:
    clock = ManualClock()
    gates = Gates(observed={k: asyncio.Event() for k in ("first", "advanced", "second", "finish")})
    flow = flow_with(TypingAsync(), gates)
    async with running_engine([flow], dataclasses.replace(engine_config, clock=clock)) as eng:
        await eng.start_flow(type(flow), "f1")
        await asyncio.wait_for(gates.observed["first"].wait(), WAIT)
        assert await values(eng, flow, "f1") == []  # buffered, not sent yet
        clock.advance(1.0)
        message = await eng.read_stream("f1", "progress", wait_seconds=WAIT, flow_type=type(flow))
        assert message is not None and message.value == "Hello"  # empty chunk ignored
        # The first message there is, and it went out only once the clock had moved.
        assert message.created_at == datetime.fromtimestamp(clock.now(), UTC)
        gates.observed["advanced"].set()
        await asyncio.wait_for(gates.observed["second"].wait(), WAIT)
        assert await values(eng, flow, "f1") == ["Hello"]
        gates.observed["finish"].set()
        assert (await finished(eng, "f1")).status == "COMPLETED"
        assert await values(eng, flow, "f1") == ["Hello", " world"]


async def test_buffered_writer_flushes_at_the_utf8_soft_threshold_without_splitting(
    engine_config: EngineConfig,
) -> None:
    flow = flow_with(TypingThreshold())
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        assert (await finished(eng, "f1")).status == "COMPLETED"
        batches = await values(eng, flow, "f1")
    # 16 KiB is reached by the 17th 1000-byte chunk; the last 3 go out at the end.
    assert [len(b.encode()) for b in batches] == [17_000, 3_000]
    assert "".join(batches) == "".join(chr(0x0100 + i) * 500 for i in range(20))


async def test_buffered_writer_with_an_empty_buffer_sends_nothing(
    engine_config: EngineConfig,
) -> None:
    gates = Gates()
    flow = flow_with(TypingNothing(), gates)
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(type(flow), "f1")
        assert (await finished(eng, "f1")).status == "COMPLETED"
        assert await values(eng, flow, "f1") == []
    assert gates.observed["beats"] == 0  # no message, no implicit heartbeat


async def test_sync_buffered_writer_checks_elapsed_time_on_write(
    engine_config: EngineConfig,
) -> None:
    clock = ManualClock()
    gates = Gates()
    flow = flow_with(TypingSync(), gates)
    async with running_engine([flow], dataclasses.replace(engine_config, clock=clock)) as eng:
        await eng.start_flow(type(flow), "f1")
        assert await asyncio.to_thread(gates.thread_ready.wait, WAIT)
        assert await values(eng, flow, "f1") == []
        clock.advance(1.0)
        gates.thread_gate.set()
        assert (await finished(eng, "f1")).status == "COMPLETED"
        assert await values(eng, flow, "f1") == ["ab", "c", "d"]


# -- concurrency ------------------------------------------------------------------------------


async def test_concurrent_step_and_client_writers_lose_nothing_and_keep_order(
    engine_config: EngineConfig,
) -> None:
    async_flow, sync_flow = flow_with(ManyWrites()), flow_with(ManyWritesSync())
    count = 150
    async with running_engine([async_flow, sync_flow], engine_config) as eng:
        followed: list[str] = []

        async def follow(flow_id: str, expected: int) -> None:
            token = ""
            while len(followed) < expected:
                message = await eng.read_stream(
                    flow_id, "progress", token, wait_seconds=WAIT, flow_type=type(async_flow)
                )
                assert message is not None
                followed.append(message.value)
                token = message.resume_token

        async def client(flow: Flow[Any], flow_id: str, name: str) -> None:
            for i in range(count):
                await eng.write_stream(
                    flow_id, "progress", f"{name}:{i}", source=name, flow_type=type(flow)
                )
                await asyncio.sleep(0)

        follower = asyncio.create_task(follow("a0", count * 3))
        for n in range(6):
            await eng.start_flow(type(async_flow), f"a{n}", count)
            await eng.start_flow(type(sync_flow), f"s{n}", count)
        await asyncio.gather(
            client(async_flow, "a0", "c1"),
            client(async_flow, "a0", "c2"),
            client(sync_flow, "s0", "c3"),
        )
        for n in range(6):
            assert (await finished(eng, f"a{n}")).status == "COMPLETED"
            assert (await finished(eng, f"s{n}")).status == "COMPLETED"
        await asyncio.wait_for(follower, WAIT)
        for flow, flow_id, total in [
            (async_flow, "a0", 3 * count),
            (sync_flow, "s0", 2 * count),
            (async_flow, "a5", count),
            (sync_flow, "s5", count),
        ]:
            page = await eng.list_stream_messages(flow_id, "progress", 1000, flow_type=type(flow))
            oldest_first = list(reversed(page.messages))
            assert len(oldest_first) == total
            for source in {m.source for m in oldest_first}:
                mine = [m.value.rsplit(":", 1)[1] for m in oldest_first if m.source == source]
                assert mine == [str(i) for i in range(count)]
        assert sorted(followed) == sorted(
            m.value
            for m in reversed(
                (
                    await eng.list_stream_messages(
                        "a0", "progress", 1000, flow_type=type(async_flow)
                    )
                ).messages
            )
        )
