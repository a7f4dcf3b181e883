"""Flows the benchmarks define for themselves (the pattern's own Flow is imported, not copied)."""

from __future__ import annotations

from datetime import UTC, datetime

from engine import (
    Attribute,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    Wait,
    graceful_complete,
    rpc,
)
from patterns.sequentially_chunked_attribute_map.flow import (
    RegisterSubscriberInput,
    SubscriberRecord,
)


class NaiveSubscriberFlow(Flow[None]):
    """The layout the pattern replaces: every subscriber in one list Attribute.

    Each append reads, validates, re-encodes and rewrites the whole list, so its cost grows
    with the number of records. Records are the pattern's own type, so both layouts store the
    same bytes per record.
    """

    subscribers = Attribute("Subscribers", list[SubscriberRecord])

    @rpc(lock_attributes=(subscribers.lock(),))
    def append_subscriber(self, context: Context, input: RegisterSubscriberInput) -> int:
        """Append one subscriber to the list and return its sequence."""
        records = self.subscribers.get(context) or []
        record = SubscriberRecord(
            sequence=len(records) + 1,
            email=input.email,
            name=input.name,
            registered_at=datetime.now(UTC),
        )
        self.subscribers.set(context, [*records, record])
        return record.sequence


class CounterFlow(Flow[None]):
    """An RPC-only Flow with one small locked read-modify-write RPC."""

    counter = Attribute("Counter", int)

    @rpc(lock_attributes=(counter.lock(),))
    def increment(self, context: Context, input: int) -> int:
        """Add ``input`` to the counter and return the new value."""
        value = (self.counter.get(context) or 0) + input
        self.counter.set(context, value)
        return value


#: What each of the three children of FanOutFlow computes from the parent's x.
LEAF_OPERATIONS = ("add_one", "double", "sub_one")


def fan_out_expected(x: int) -> int:
    """Return what a FanOutFlow completes with: (x + 1) + 2x + (x - 1)."""
    return 4 * x


class LeafWork(Step[list[int | str]]):
    """A child's only Step: apply its operation to x."""

    async def execute(self, context: Context, input: list[int | str]) -> StepDecision:
        x, operation = input
        assert isinstance(x, int)
        value = {"add_one": x + 1, "double": x * 2, "sub_one": x - 1}[str(operation)]
        return graceful_complete(value)


class LeafFlow(Flow[list[int | str]]):
    """A one-Step child: [x, operation] -> the operation applied to x."""

    def get_steps(self) -> StepList[list[int | str]]:
        return StepList.start_step(LeafWork())


class FanOut(Step[int]):
    """Start three LeafFlows and complete with the sum of their outputs."""

    async def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.all_of(*(SubFlow.run(LeafFlow, [input, op]) for op in LEAF_OPERATIONS))

    async def execute(self, context: Context, input: int) -> StepDecision:
        results = [SubFlow.get_condition_results(context, i) for i in range(3)]
        return graceful_complete(sum(r.completions[0].output for r in results))


class FanOutFlow(Flow[int]):
    """A parent with three SubFlows, all waited for (``async def`` Steps throughout)."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(FanOut())
