"""Channels through the Engine: wait conditions, consumption in the commit that moves the Step,
pending messages, deletion by caller, the seed's transactional move, FIFO and UUIDv7 order."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    Channel,
    ChannelMap,
    ChannelMessageNotFoundError,
    ChannelMessagesNotLoadedError,
    Context,
    DefinitionError,
    EngineConfig,
    Flow,
    FlowTimeoutHandlerOptions,
    InvalidArgumentError,
    ManualClock,
    Registry,
    RPCInvokeOptions,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Timer,
    Wait,
    go_to,
    graceful_complete,
    rpc,
)
from engine.testing import settle
from tests.conftest import running_engine
from tests.support.flow_clients import ServeFlows

# -- the seed's example: move a queued message to the prioritized Channel --------------------


class QueuedMessageReference(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    message_id: str


class HandlePrioritized(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.prioritized_messages.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        handled = self.flow.handled.get(context) or []
        self.flow.handled.set(context, [*handled, *self.flow.prioritized_messages.results(context)])
        return go_to(HandlePrioritized)


class ChannelFlow(Flow[None]):
    queued_messages = Channel("queued-messages", str)
    prioritized_messages = Channel("prioritized-messages", str)
    handled = Attribute("handled", list[str])
    note = Attribute("note", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(HandlePrioritized())

    @rpc
    def queue(self, context: Context, input: str) -> None:
        self.queued_messages.publish(context, input)

    @rpc(is_transactional=True, load_channels=(queued_messages,))
    def move_queued_message_to_prioritized_messages(
        self, context: Context, queued_message: QueuedMessageReference
    ) -> None:
        message_to_prioritize = self.queued_messages.find_pending_message(
            context, queued_message.message_id
        )
        self.queued_messages.delete(context, queued_message.message_id)
        self.note.set(context, "moved")
        if message_to_prioritize is not None:
            self.prioritized_messages.publish(context, message_to_prioritize.value)

    @rpc(load_channels=(queued_messages,))
    def forget_without_transaction(self, context: Context, message_id: str) -> None:
        self.queued_messages.delete(context, message_id)
        self.note.set(context, "forgot")

    @rpc(lock_attributes=(note.lock(),))
    def forget_under_lock(self, context: Context, message_id: str) -> None:
        self.queued_messages.delete(context, message_id)
        self.note.set(context, "forgot under lock")

    @rpc
    def peek_unloaded(self, context: Context) -> int:
        self.queued_messages.pending_messages(context)
        return 0

    @rpc(load_channels=(prioritized_messages,))
    def peek(self, context: Context) -> dict[str, Any]:
        return {
            "size": self.queued_messages.size(context),
            "prioritized": list(self.prioritized_messages.pending_messages(context)),
        }


async def queued_ids(eng: Any, flow_id: str) -> list[str]:
    page = await eng.list_channel_messages(flow_id, ChannelFlow.queued_messages)
    return [m.message_id for m in page.messages]


async def values(eng: Any, flow_id: str, name: str) -> Any:
    return (await eng.get_attributes(flow_id, [name])).values.get(name)


async def test_the_seed_move_commits_the_deletion_and_the_publication_together(
    engine_config: EngineConfig,
) -> None:
    flow = ChannelFlow()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(ChannelFlow, "move")
        for text in ("low", "urgent", "later"):
            await eng.invoke_rpc(flow.queue, "move", text)
        ids = await queued_ids(eng, "move")
        assert len(ids) == 3
        await eng.invoke_rpc(
            flow.move_queued_message_to_prioritized_messages,
            "move",
            {"messageId": ids[1]},
        )
        await settle(eng)
        assert await values(eng, "move", "handled") == ["urgent"]
        assert await queued_ids(eng, "move") == [ids[0], ids[2]]
        assert await values(eng, "move", "note") == "moved"


async def test_a_concurrent_consumer_makes_the_move_commit_neither_effect(
    engine_config: EngineConfig,
) -> None:
    flow = ChannelFlow()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(ChannelFlow, "race")
        await eng.invoke_rpc(flow.queue, "race", "urgent")
        [message_id] = await queued_ids(eng, "race")
        await eng.delete_channel_message("race", "queued-messages", message_id)  # the consumer
        with pytest.raises(ChannelMessageNotFoundError):
            await eng.invoke_rpc(
                flow.move_queued_message_to_prioritized_messages,
                "race",
                {"messageId": message_id},
            )
        await settle(eng)
        channels = {c.name: c.size for c in (await eng.list_channels("race")).channels}
        assert channels == {"prioritized-messages": 0, "queued-messages": 0}
        assert await values(eng, "race", "note") is None  # the write did not commit either
        assert await values(eng, "race", "handled") is None


async def test_deleting_a_missing_message_depends_on_the_caller(
    serve_flows: ServeFlows,
) -> None:
    flow = ChannelFlow()
    async with serve_flows([flow]) as flows:
        await flows.start_flow(ChannelFlow, "table")
        missing = str(uuid.uuid4())
        # Implicitly transactional through a lock: fails and commits nothing.
        with pytest.raises(ChannelMessageNotFoundError) as by_rpc:
            await flows.invoke_rpc(flow.forget_under_lock, "table", missing)
        assert "the transactional RPC committed nothing" in by_rpc.value.detail
        assert await values(flows, "table", "note") is None
        # Not transactional: the deletion is a no-op and the other effects commit.
        await flows.invoke_rpc(flow.forget_without_transaction, "table", missing)
        assert await values(flows, "table", "note") == "forgot"
        # The direct call is CHANNEL_MESSAGE_NOT_FOUND, and says so without speaking of an RPC.
        with pytest.raises(ChannelMessageNotFoundError) as direct:
            await flows.delete_channel_message("table", "queued-messages", missing)
        assert direct.value.detail == (
            f"message {missing} of Channel queued-messages is not pending (consumed or deleted "
            "already, or never published)"
        )
        assert direct.value.field == "messageId"
        # A known pending ID needs no load to be deleted.
        await flows.invoke_rpc(flow.queue, "table", "x")
        [pending] = await queued_ids(flows, "table")
        await flows.invoke_rpc(flow.forget_under_lock, "table", pending)
        assert await queued_ids(flows, "table") == []
        history = [e.event_type for e in (await flows.get_flow_history("table")).events]
        assert history.count("CHANNEL_MESSAGE_DELETED") == 1


async def test_pending_messages_need_a_load_while_sizes_are_always_there(
    serve_flows: ServeFlows,
) -> None:
    flow = ChannelFlow()
    async with serve_flows([flow]) as flows:
        await flows.start_flow(ChannelFlow, "loads")
        await flows.invoke_rpc(flow.queue, "loads", "a")
        with pytest.raises(ChannelMessagesNotLoadedError):
            await flows.invoke_rpc(flow.peek_unloaded, "loads")
        # Loaded and empty is (); the unloaded queue still shows its size.
        assert await flows.invoke_rpc(flow.peek, "loads") == {"size": 1, "prioritized": []}


async def test_message_ids_are_uuid7_increasing_in_fifo_order(serve_flows: ServeFlows) -> None:
    flow = ChannelFlow()
    async with serve_flows([flow]) as flows:
        await flows.start_flow(ChannelFlow, "fifo")
        for n in range(30):
            await flows.invoke_rpc(flow.queue, "fifo", f"m{n}")
        page = await flows.list_channel_messages("fifo", "queued-messages", page_size=20)
        rest = await flows.list_channel_messages(
            "fifo", "queued-messages", page_size=20, page_token=page.next_page_token
        )
        assert rest.next_page_token == ""
        messages = [*page.messages, *rest.messages]
        assert [m.value for m in messages] == [f"m{n}" for n in range(30)]
        ids = [m.message_id for m in messages]
        assert ids == sorted(ids) and len(set(ids)) == 30
        assert {uuid.UUID(i).version for i in ids} == {7}


# -- wait conditions -----------------------------------------------------------------------


class Waits:
    """The Wait the next Waiter returns, and what its executes saw (set per test)."""

    wait: Any = None
    seen: list[dict[str, Any]] = []


class Waiter(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Waits.wait(self.flow)  # type: ignore[no-any-return]

    def execute(self, context: Context, input: None) -> StepDecision:
        flow = self.flow
        Waits.seen.append(
            {
                "a": list(flow.a.results(context)),
                "b": list(flow.b.results(context)),
                "m": list(flow.m.results(context, "k")),
                "left": (flow.a.size(context), flow.b.size(context)),
            }
        )
        return graceful_complete(len(Waits.seen))


class Gate(Step[None]):
    """Holds the Flow for a minute, so a test can queue messages before the wait begins."""

    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(Timer.by_duration(GATE))

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Waiter)


GATE = timedelta(minutes=1)


class WaitFlow(Flow[None]):
    a = Channel("a", int)
    b = Channel("b", int)
    m = ChannelMap("m", int)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Waiter()).other_steps(Gate())

    @rpc
    def put(self, context: Context, input: dict[str, list[int]]) -> None:
        for name, numbers in input.items():
            for n in numbers:
                if name == "m":
                    self.m.publish(context, "k", n)
                else:
                    getattr(self, name).publish(context, n)


class GatedWaitFlow(WaitFlow):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Gate()).other_steps(Waiter())


@pytest.fixture(autouse=True)
def _fresh_waits() -> None:
    Waits.seen = []


def manual(config: EngineConfig) -> tuple[EngineConfig, ManualClock]:
    clock = ManualClock()
    return dataclasses.replace(config, clock=clock, retention=None), clock


async def run_wait(
    config: EngineConfig,
    wait: Any,
    before: dict[str, list[int]] | None = None,
    after: dict[str, list[int]] | None = None,
    *,
    advance: float | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Start a Flow whose Step waits on ``wait``; publish ``before`` (queued when the wait
    begins) and ``after`` (once it waits); return the result and what execute saw."""
    Waits.wait = wait
    flow = GatedWaitFlow()
    config, clock = manual(config)
    async with running_engine([flow], config) as eng:
        await eng.start_flow(GatedWaitFlow, "w")
        await settle(eng)  # the Gate holds the Flow
        if before:
            await eng.invoke_rpc(flow.put, "w", before)
        await clock.advance_when_idle(GATE.total_seconds())  # now the wait begins
        if after:
            await eng.invoke_rpc(flow.put, "w", after)
            await settle(eng)
        if advance is not None:
            await clock.advance_when_idle(advance)
        result = await eng.wait_for_flow("w")
    return result, Waits.seen


async def test_for_one_waits_for_a_message_and_takes_exactly_one(
    engine_config: EngineConfig,
) -> None:
    result, seen = await run_wait(
        engine_config, lambda f: Wait.until(f.a.for_one()), after={"a": [1, 2, 3]}
    )
    assert result.status == "COMPLETED"
    assert seen == [{"a": [1], "b": [], "m": [], "left": (2, 0)}]


async def test_for_n_waits_until_n_are_pending(engine_config: EngineConfig) -> None:
    Waits.wait = lambda f: Wait.until(f.a.for_n(3))
    flow = WaitFlow()
    config, _ = manual(engine_config)
    async with running_engine([flow], config) as eng:
        await eng.start_flow(WaitFlow, "w")
        await eng.invoke_rpc(flow.put, "w", {"a": [1, 2]})
        await settle(eng)
        assert (await eng.wait_for_flow("w")).status == "RUNNING"  # two are not enough
        await eng.invoke_rpc(flow.put, "w", {"a": [3, 4]})
        await settle(eng)
        assert (await eng.wait_for_flow("w")).status == "COMPLETED"
    assert Waits.seen == [{"a": [1, 2, 3], "b": [], "m": [], "left": (1, 0)}]


async def test_at_least_takes_everything_pending_when_it_is_met(
    engine_config: EngineConfig,
) -> None:
    _, seen = await run_wait(
        engine_config, lambda f: Wait.until(f.a.at_least(2)), before={"a": [1, 2, 3, 4]}
    )
    assert seen[0]["a"] == [1, 2, 3, 4]


async def test_at_most_on_an_empty_queue_does_not_wait_and_takes_nothing(
    engine_config: EngineConfig,
) -> None:
    result, seen = await run_wait(engine_config, lambda f: Wait.until(f.a.at_most(5)))
    assert result.status == "COMPLETED"
    assert seen == [{"a": [], "b": [], "m": [], "left": (0, 0)}]


async def test_at_most_takes_up_to_its_limit_of_what_is_queued(
    engine_config: EngineConfig,
) -> None:
    _, seen = await run_wait(
        engine_config, lambda f: Wait.until(f.a.at_most(2)), before={"a": [7, 8, 9]}
    )
    assert seen[0]["a"] == [7, 8] and seen[0]["left"] == (1, 0)


async def test_for_range_waits_for_its_lower_bound_and_takes_up_to_its_upper(
    engine_config: EngineConfig,
) -> None:
    Waits.wait = lambda f: Wait.until(f.a.for_range(at_least=2, at_most=3))
    flow = WaitFlow()
    config, _ = manual(engine_config)
    async with running_engine([flow], config) as eng:
        await eng.start_flow(WaitFlow, "w")
        await eng.invoke_rpc(flow.put, "w", {"a": [1]})
        await settle(eng)
        assert (await eng.wait_for_flow("w")).status == "RUNNING"
        await eng.invoke_rpc(flow.put, "w", {"a": [2, 3, 4, 5]})  # one commit, five pending
        await settle(eng)
    assert Waits.seen == [{"a": [1, 2, 3], "b": [], "m": [], "left": (2, 0)}]


async def test_any_of_a_ready_timer_and_a_ready_channel_chooses_the_timer(
    engine_config: EngineConfig,
) -> None:
    result, seen = await run_wait(
        engine_config,
        lambda f: Wait.any_of(f.a.for_one(), Timer.by_duration(timedelta(0))),
        before={"a": [1]},
    )
    assert result.status == "COMPLETED"
    # The zero Timer is ready as the wait begins and comes first: the message stays queued.
    assert seen == [{"a": [], "b": [], "m": [], "left": (1, 0)}]


async def test_any_of_takes_only_from_the_winning_condition(engine_config: EngineConfig) -> None:
    _, seen = await run_wait(
        engine_config,
        lambda f: Wait.any_of(f.a.for_n(2), f.b.for_one()),
        before={"a": [1], "b": [5, 6]},
    )
    assert seen == [{"a": [], "b": [5], "m": [], "left": (1, 1)}]


async def test_any_of_two_ready_channels_chooses_in_argument_order(
    engine_config: EngineConfig,
) -> None:
    _, seen = await run_wait(
        engine_config,
        lambda f: Wait.any_of(f.b.for_one(), f.a.for_one()),
        before={"a": [1], "b": [2]},
    )
    assert seen == [{"a": [], "b": [2], "m": [], "left": (1, 0)}]


async def test_all_of_two_channels_consumes_from_both_at_once(
    engine_config: EngineConfig,
) -> None:
    Waits.wait = lambda f: Wait.all_of(f.a.for_one(), f.b.for_n(2))
    flow = WaitFlow()
    config, _ = manual(engine_config)
    async with running_engine([flow], config) as eng:
        await eng.start_flow(WaitFlow, "w")
        await eng.invoke_rpc(flow.put, "w", {"a": [1], "b": [10]})
        await settle(eng)
        sizes = {c.name: c.size for c in (await eng.list_channels("w")).channels}
        assert sizes == {"a": 1, "b": 1}  # nothing consumed until every condition holds
        await eng.invoke_rpc(flow.put, "w", {"b": [11]})
        await settle(eng)
        history = list((await eng.get_flow_history("w")).events)
    assert Waits.seen == [{"a": [1], "b": [10, 11], "m": [], "left": (0, 0)}]
    consumed = [e.details for e in history if e.event_type == "CHANNEL_CONSUMED"]
    assert sorted(c["channel"] for c in consumed) == ["a", "b"]
    # Consumption committed with the move to execute: one commit, adjacent in history.
    kinds = [e.event_type for e in history]
    first = kinds.index("CHANNEL_CONSUMED")
    assert kinds[first : first + 2] == ["CHANNEL_CONSUMED", "CHANNEL_CONSUMED"]


async def test_a_timer_with_a_channel_in_all_of_waits_for_both(
    engine_config: EngineConfig,
) -> None:
    Waits.wait = lambda f: Wait.all_of(Timer.by_duration(timedelta(minutes=5)), f.a.for_one())
    flow = WaitFlow()
    config, clock = manual(engine_config)
    async with running_engine([flow], config) as eng:
        await eng.start_flow(WaitFlow, "w")
        await eng.invoke_rpc(flow.put, "w", {"a": [1]})
        await settle(eng)
        assert (await eng.wait_for_flow("w")).status == "RUNNING"
        await clock.advance_when_idle()  # to the Timer's deadline
        assert (await eng.wait_for_flow("w")).status == "COMPLETED"
    assert Waits.seen[0]["a"] == [1]


async def test_channel_map_conditions_wait_on_one_instance(engine_config: EngineConfig) -> None:
    _, seen = await run_wait(
        engine_config, lambda f: Wait.until(f.m.for_one("k")), after={"m": [4, 5]}
    )
    assert seen[0]["m"] == [4]


async def test_a_condition_on_another_flows_channel_fails_the_step(
    engine_config: EngineConfig,
) -> None:
    stranger = Channel("a", int)
    result, _ = await run_wait(engine_config, lambda f: Wait.until(stranger.for_one()))
    assert result.status == "FAILED"
    assert result.error_type == "InvalidStepResultError"


# -- ChannelMap metadata, loads and invoke options --------------------------------------------


class ForeignBoxes(Flow[None]):
    """A ChannelMap named like Inbox's, of another Flow type."""

    boxes = ChannelMap("boxes", str)


class Inbox(Flow[None]):
    boxes = ChannelMap("boxes", str)
    log = Channel("log", str)

    @rpc
    def post(self, context: Context, input: dict[str, str]) -> list[str]:
        self.boxes.publish(context, input["box"], input["text"])
        return self.boxes.get_all_instance_keys(context)

    @rpc
    def census(self, context: Context) -> dict[str, int]:
        return {k: self.boxes.size(context, k) for k in self.boxes.get_all_instance_keys(context)}

    @rpc
    def read_box(self, context: Context, input: str) -> list[str]:
        return [m.value for m in self.boxes.pending_messages(context, input)]

    @rpc(load_channel_maps=(boxes,))
    def read_all(self, context: Context) -> dict[str, list[str]]:
        return {
            k: [m.value for m in self.boxes.pending_messages(context, k)]
            for k in self.boxes.get_all_instance_keys(context)
        }


async def test_channel_map_keys_and_sizes_need_no_load_but_messages_do(
    serve_flows: ServeFlows,
) -> None:
    flow = Inbox()
    async with serve_flows([flow]) as flows:
        await flows.start_flow(Inbox, "ib")
        await flows.invoke_rpc(flow.post, "ib", {"box": "ada", "text": "hi"})
        assert await flows.invoke_rpc(flow.post, "ib", {"box": "bob", "text": "yo"}) == [
            "ada",
            "bob",
        ]
        await flows.invoke_rpc(flow.post, "ib", {"box": "ada", "text": "again"})
        assert await flows.invoke_rpc(flow.census, "ib") == {"ada": 2, "bob": 1}
        with pytest.raises(ChannelMessagesNotLoadedError):
            await flows.invoke_rpc(flow.read_box, "ib", "ada")
        exact = RPCInvokeOptions(load_channel_map_instances=(Inbox.boxes.load_messages("ada"),))
        assert await flows.invoke_rpc(flow.read_box, "ib", "ada", options=exact) == ["hi", "again"]
        with pytest.raises(ChannelMessagesNotLoadedError):  # the load was for "ada" only
            await flows.invoke_rpc(flow.read_box, "ib", "bob", options=exact)
        assert await flows.invoke_rpc(flow.read_all, "ib") == {
            "ada": ["hi", "again"],
            "bob": ["yo"],
        }
        foreign = RPCInvokeOptions(
            load_channel_map_instances=(ForeignBoxes.boxes.load_messages("ada"),)
        )
        with pytest.raises(InvalidArgumentError, match="another Flow type's definition"):
            await flows.invoke_rpc(flow.read_box, "ib", "ada", options=foreign)
        listed = [(c.name, c.instance, c.size) for c in (await flows.list_channels("ib")).channels]
        assert listed == [("boxes", "ada", 2), ("boxes", "bob", 1), ("log", None, 0)]


# -- publishes from everywhere, concurrency, the timeout handler ------------------------------


class Collect(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.inbox.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        [value] = self.flow.inbox.results(context)
        self.flow.got.set(context, [*(self.flow.got.get(context) or []), value])
        return go_to(Collect)


class ConsumerFlow(Flow[None]):
    inbox = Channel("inbox", int)
    got = Attribute("got", list[int])

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Collect())

    @rpc
    def send(self, context: Context, input: int) -> None:
        self.inbox.publish(context, input)


class Hoard(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(self.flow.inbox.for_n(100))  # never met in the test

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete()


class HoardFlow(Flow[None]):
    inbox = Channel("inbox", int)
    left = Attribute("left", list[int])
    done = Channel("done", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Hoard())

    def get_timeout_handler_options(self) -> FlowTimeoutHandlerOptions:
        return FlowTimeoutHandlerOptions(load_channels=(HoardFlow.inbox,))

    def handle_timeout(self, context: Context) -> None:
        pending = self.inbox.pending_messages(context)
        self.inbox.delete(context, str(uuid.uuid4()))  # not pending: a no-op for the handler
        for message in pending:
            self.inbox.delete(context, message.message_id)
        self.left.set(context, [m.value for m in pending])
        self.done.publish(context, "timed out")


async def test_twenty_concurrent_publishes_are_each_consumed_exactly_once(
    engine_config: EngineConfig,
) -> None:
    flow = ConsumerFlow()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(ConsumerFlow, "c")
        await asyncio.gather(*(eng.invoke_rpc(flow.send, "c", n) for n in range(20)))
        await settle(eng)
        got = await values(eng, "c", "got")
        history = (await eng.get_flow_history("c", page_size=1000)).events
    assert sorted(got) == list(range(20))  # none lost, none twice
    consumed = [e.details["messageIds"] for e in history if e.event_type == "CHANNEL_CONSUMED"]
    published = [e.details["messageId"] for e in history if e.event_type == "CHANNEL_PUBLISHED"]
    assert sorted(i for ids in consumed for i in ids) == sorted(published)
    assert all(len(ids) == 1 for ids in consumed) and len(published) == 20


async def test_the_timeout_handler_reads_deletes_and_publishes_with_the_close(
    engine_config: EngineConfig,
) -> None:
    config, clock = manual(engine_config)
    async with running_engine([HoardFlow()], config) as eng:
        await eng.start_flow(HoardFlow, "t", options=StartFlowOptions(timeout=timedelta(hours=1)))
        for n in (1, 2, 3):
            await eng.publish_to_channel("t", HoardFlow.inbox, n)
        await settle(eng)
        await clock.advance_when_idle()  # to the Flow timeout
        assert (await eng.wait_for_flow("t")).status == "TIMED_OUT"
        assert await values(eng, "t", "left") == [1, 2, 3]
        sizes = {c.name: c.size for c in (await eng.list_channels("t")).channels}
        assert sizes == {"done": 1, "inbox": 0}  # committed with the close, missing ID ignored
        kinds = [e.event_type for e in (await eng.get_flow_history("t")).events]
    assert kinds.count("CHANNEL_MESSAGE_DELETED") == 3
    assert kinds[-1] == "FLOW_CLOSED"


async def test_a_wait_resumes_after_a_restart_with_the_time_it_had_left(
    engine_config: EngineConfig,
) -> None:
    Waits.wait = lambda f: Wait.any_of(Timer.by_duration(timedelta(seconds=60)), f.a.for_one())
    clock = ManualClock()
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([WaitFlow()], config) as eng:
        await eng.start_flow(WaitFlow, "r")
        await settle(eng)
        clock.advance(40)
    async with running_engine([WaitFlow()], config) as eng:
        await settle(eng)
        assert (await eng.wait_for_flow("r")).status == "RUNNING"
        now = await clock.advance_when_idle()  # the Timer has 20 s left, not 60
        assert now == pytest.approx(1_800_000_000.0 + 60)
        assert (await eng.wait_for_flow("r")).status == "COMPLETED"
    assert Waits.seen == [{"a": [], "b": [], "m": [], "left": (0, 0)}]


async def test_a_wait_takes_a_message_published_after_a_restart(
    engine_config: EngineConfig,
) -> None:
    Waits.wait = lambda f: Wait.until(f.a.for_one())
    config, _ = manual(engine_config)
    async with running_engine([WaitFlow()], config) as eng:
        await eng.start_flow(WaitFlow, "r2")
        await settle(eng)
    flow = WaitFlow()
    async with running_engine([flow], config) as eng:
        await eng.invoke_rpc(flow.put, "r2", {"a": [9]})
        await settle(eng)
        assert (await eng.wait_for_flow("r2")).status == "COMPLETED"
    assert Waits.seen[0]["a"] == [9]


# -- declarations ---------------------------------------------------------------------------


def test_channel_names_are_unique_among_the_flows_state() -> None:
    class Clash(Flow[None]):
        a = Attribute("same", str)
        b = Channel("same", str)

    with pytest.raises(DefinitionError, match="'same' is declared twice"):
        Registry([Clash()])


def test_loads_of_undeclared_channels_are_definition_errors() -> None:
    elsewhere = Channel("elsewhere", str)

    class BadLoad(Flow[None]):
        mine = Channel("mine", str)

        @rpc(load_channels=(elsewhere,))
        def look(self, context: Context) -> None:
            return None

    with pytest.raises(DefinitionError, match="not a Channel of this Flow"):
        Registry([BadLoad()])

    class BadStepLoad(Flow[None]):
        boxes = ChannelMap("boxes", str)

        def get_steps(self) -> StepList[None]:
            return StepList.start_step(LoadsABox())

    with pytest.raises(DefinitionError, match="undeclared Channel 'ghost'"):
        Registry([BadStepLoad()])


class LoadsABox(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_load_channel_map_instances=(ChannelMap("ghost", str).load_messages("x"),)
        )

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Channel("c", int).for_n(0),
        lambda: Channel("c", int).at_most(0),
        lambda: Channel("c", int).for_range(at_least=3, at_most=2),
        lambda: ChannelMap("m", int).for_one("a/b"),
    ],
)
def test_bad_conditions_are_refused_when_made(make: Any) -> None:
    with pytest.raises((DefinitionError, InvalidArgumentError)):
        make()


async def test_an_rpc_publishing_a_value_of_the_wrong_type_fails_naming_the_channel(
    engine_config: EngineConfig,
) -> None:
    class Typed(Flow[None]):
        numbers = Channel("numbers", int)

        @rpc
        def bad(self, context: Context) -> None:
            self.numbers.publish(context, "not a number")

    flow = Typed()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(Typed, "typed")
        with pytest.raises(InvalidArgumentError, match="numbers"):
            await eng.invoke_rpc(flow.bad, "typed")
        assert [c.size for c in (await eng.list_channels("typed")).channels] == [0]


class Ask(Step[None]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_load_channels=(AskFlow.questions,))

    def wait_for(self, context: Context, input: None) -> Wait:
        self.flow.questions.publish(context, "ready?")
        return Wait.until(self.flow.answers.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        # Loaded for execute only: the questions still pending when the answer came.
        asked = [m.value for m in self.flow.questions.pending_messages(context)]
        self.flow.questions.delete(context, str(uuid.uuid4()))  # not pending: a no-op here
        self.flow.questions.publish(context, "thanks")
        return graceful_complete(
            {"answers": list(self.flow.answers.results(context)), "asked": asked}
        )


class AskFlow(Flow[None]):
    questions = Channel("questions", str)
    answers = Channel("answers", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Ask())

    @rpc(load_channels=(questions,))
    def shuffle(self, context: Context) -> list[int]:
        sizes = [self.questions.size(context)]
        [question] = self.questions.pending_messages(context)
        self.questions.delete(context, question.message_id)
        sizes.append(self.questions.size(context))
        self.questions.publish(context, "again?")
        self.questions.publish(context, "still?")
        sizes.append(self.questions.size(context))
        return sizes


async def test_wait_for_publishes_with_its_wait_and_sizes_follow_staged_work(
    engine_config: EngineConfig,
) -> None:
    flow = AskFlow()
    async with running_engine([flow], engine_config) as eng:
        await eng.start_flow(AskFlow, "ask")
        await settle(eng)
        pending = await eng.list_channel_messages("ask", AskFlow.questions)
        assert [m.value for m in pending.messages] == ["ready?"]  # committed with the wait
        assert await eng.invoke_rpc(flow.shuffle, "ask") == [1, 0, 2]
        after = await eng.list_channel_messages("ask", AskFlow.questions)
        assert [m.value for m in after.messages] == ["again?", "still?"]
        await eng.publish_to_channel("ask", AskFlow.answers, "yes")
        await settle(eng)
        result = await eng.wait_for_flow("ask")
        final = await eng.list_channel_messages("ask", AskFlow.questions)
    assert result.status == "COMPLETED"
    assert result.completions[0].output == {"answers": ["yes"], "asked": ["again?", "still?"]}
    # execute's publication committed with its decision; its missing deletion was a no-op.
    assert [m.value for m in final.messages] == ["again?", "still?", "thanks"]


async def test_a_handler_deleting_a_malformed_message_id_is_refused_naming_the_field(
    serve_flows: ServeFlows,
) -> None:
    flow = ChannelFlow()
    async with serve_flows([flow]) as flows:
        await flows.start_flow(ChannelFlow, "ids")
        with pytest.raises(InvalidArgumentError) as refused:
            await flows.invoke_rpc(flow.forget_without_transaction, "ids", "not-a-message-id")
        assert refused.value.field == "messageId"
        assert await values(flows, "ids", "note") is None
