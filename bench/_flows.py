"""Flows the benchmarks define for themselves (the pattern's own Flow is imported, not copied)."""

from __future__ import annotations

from datetime import UTC, datetime

from engine import Attribute, Context, Flow, rpc
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
