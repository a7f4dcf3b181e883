"""ChannelFlow: Dex's move-a-queued-message example, with a Step that consumes the moves.

Messages wait in the ``queued-messages`` Channel until a caller picks one by ID. The
transactional ``move_queued_message_to_prioritized_messages`` RPC loads that Channel, finds the
message's value, and stages its deletion and a publication of the value to
``prioritized-messages``. Being transactional, it commits both or neither: when a concurrent
consumer deleted the message first, the deletion fails validation and the RPC fails with
CHANNEL_MESSAGE_NOT_FOUND, leaving both Channels as they were.

HandlePrioritizedMessage waits for one prioritized message, consumes it in the commit that moves
it to ``execute``, records its value in the ``primitive-channel-handled`` Attribute, and goes
back to waiting. ``peek_queues`` reads both Channels from one snapshot without consuming.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine import (
    Attribute,
    Channel,
    ChannelMessage,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    Wait,
    go_to,
    rpc,
)

#: How many handled values the Attribute keeps, newest last: one Attribute value stays bounded
#: however long the Flow runs.
HANDLED_KEPT = 100
MAX_MESSAGE_LENGTH = 1000


class QueuedMessageReference(BaseModel):
    """The ID of a pending message of ``queued-messages``: all the move RPC needs."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    message_id: str = Field(min_length=1, max_length=64)


class PendingMessage(BaseModel):
    """A pending Channel message as ``peek_queues`` reports it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    message_id: str
    value: str
    published_at: datetime

    @classmethod
    def of(cls, message: ChannelMessage[str]) -> PendingMessage:
        """Return the report of one pending message."""
        return cls(
            message_id=message.message_id,
            value=message.value,
            published_at=message.published_at,
        )


class QueueSnapshot(BaseModel):
    """One Channel: its size (always known) and its pending messages (loaded), oldest first."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    size: int
    messages: list[PendingMessage]


class QueuesSnapshot(BaseModel):
    """Both Channels, read from one snapshot of the run."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    run_id: str
    queued: QueueSnapshot
    prioritized: QueueSnapshot


class HandlePrioritizedMessage(Step[None]):
    """Wait for a prioritized message, record its value, and wait for the next one."""

    def wait_for(self, context: Context, input: None) -> Wait:
        """Wait until one message is pending in ``prioritized-messages``.

        The message is consumed in the same commit that moves this Step to ``execute``, so no
        other wait can take it as well.
        """
        return Wait.until(self.flow.prioritized_messages.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        """Append the consumed value to the handled list and go back to waiting."""
        consumed = self.flow.prioritized_messages.results(context)
        # Only this Step writes the list, and one execution runs at a time, so no lock.
        handled = [*(self.flow.handled.get(context) or []), *consumed]
        self.flow.handled.set(context, handled[-HANDLED_KEPT:])
        return go_to(HandlePrioritizedMessage)


class ChannelFlow(Flow[None]):
    """Queued messages, a transactional move to the prioritized queue, and its consumer."""

    queued_messages: Channel[str] = Channel("queued-messages", str)
    prioritized_messages: Channel[str] = Channel("prioritized-messages", str)
    handled: Attribute[list[str]] = Attribute("primitive-channel-handled", list[str])

    def get_steps(self) -> StepList[None]:
        """Start with HandlePrioritizedMessage, which loops for as long as the Flow runs."""
        return StepList.start_step(HandlePrioritizedMessage())

    @rpc(is_transactional=True, load_channels=(queued_messages,))
    def move_queued_message_to_prioritized_messages(
        self, context: Context, queued_message: QueuedMessageReference
    ) -> None:
        """Move a pending queued message to ``prioritized-messages``, given only its ID.

        Transactional: the deletion is validated before anything commits, so a message no
        longer pending fails the RPC with CHANNEL_MESSAGE_NOT_FOUND and nothing is published.
        """
        message_to_prioritize = self.queued_messages.find_pending_message(
            context, queued_message.message_id
        )
        self.queued_messages.delete(context, queued_message.message_id)
        if message_to_prioritize is not None:
            self.prioritized_messages.publish(context, message_to_prioritize.value)

    @rpc(load_channels=(queued_messages, prioritized_messages))
    def peek_queues(self, context: Context) -> QueuesSnapshot:
        """Return both Channels' sizes and pending messages without consuming any.

        Sizes need no load; the pending messages do, hence ``load_channels``. No lock and no
        effects, so nothing commits and it also answers on a closed run.
        """
        return QueuesSnapshot(
            run_id=context.run_id,
            queued=_snapshot(context, self.queued_messages),
            prioritized=_snapshot(context, self.prioritized_messages),
        )


def _snapshot(context: Context, channel: Channel[str]) -> QueueSnapshot:
    return QueueSnapshot(
        size=channel.size(context),
        messages=[PendingMessage.of(m) for m in channel.pending_messages(context)],
    )
