"""The runtime's Context: one invocation's snapshot, its staged writes and its cancellation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._runtime.cancellation import StepCanceled
from engine._staging import ChannelRef, Staging, StateRef, StreamRef, StreamSender
from engine._storage.records import ChannelDeletion, ChannelPublication, LoadPlan
from engine.channel import ChannelMessage
from engine.errors import AttributeMapNotLoadedError, ChannelMessagesNotLoadedError, DefinitionError
from engine.outputs import Heartbeat

if TYPE_CHECKING:
    from engine._runtime.step_io import StepIO
    from engine.attribute import _State
    from engine.results import FlowResult

_UNSET = object()


class InvocationContext(Staging):
    """What a Step, RPC or timeout handler sees and stages during one invocation.

    Reads come from one committed snapshot taken before the handler ran, overlaid with this
    invocation's own staged writes. Writes are staged here and commit atomically with the
    handler's result; nothing is written while the handler runs.
    """

    def __init__(
        self,
        *,
        flow_id: str,
        run_id: str,
        flow_type: str,
        states: Mapping[str, _State[Any]],
        values: Mapping[tuple[str, str], Any],
        plan: LoadPlan,
        channels: Mapping[str, ChannelRef] | None = None,
        sizes: Mapping[tuple[str, str], int] | None = None,
        messages: Mapping[tuple[str, str], tuple[ChannelMessage[Any], ...]] | None = None,
        consumed: Mapping[tuple[str, str], tuple[Any, ...]] | None = None,
        subflows: Mapping[int, FlowResult] | None = None,
        step_execution_id: str | None = None,
        step_type: str | None = None,
        attempt: int = 1,
        rpc_name: str | None = None,
        step_io: StepIO | None = None,
    ) -> None:
        self.flow_id = flow_id
        self.run_id = run_id
        self.flow_type = flow_type
        self.step_execution_id = step_execution_id
        self.step_type = step_type
        self.attempt = attempt
        self.rpc_name = rpc_name
        # Set for Step invocations: Stream writes and heartbeats go out at once through it.
        # RPCs have none, so they cannot write Streams through a Context.
        self.step_io = step_io
        self._states = states
        # Decoded snapshot values keyed by (state name, instance or "").
        self._values = values
        self._plan = plan
        self._writes: dict[tuple[str, str], Any] = {}
        self._texts: dict[tuple[str, str], str] = {}
        # A plain flag: set once from the loop, read from the handler's thread (a bool store
        # is atomic), and cheaper to make per invocation than a threading.Event.
        self._canceled = False
        self._channels = channels or {}
        # Pending counts of every non-empty queue; messages of the loaded queues, oldest first.
        self._sizes = sizes or {}
        self._messages = messages or {}
        self._consumed = consumed or {}
        # The results of the completed wait's SubFlows, by condition index.
        self._subflows = subflows or {}
        self._publications: list[ChannelPublication] = []
        self._deletions: dict[tuple[str, str, str], ChannelDeletion] = {}

    def __repr__(self) -> str:
        who = self.rpc_name or self.step_type or "handle_timeout"
        return f"<Context {self.flow_type} {self.flow_id} {who}>"

    # -- cancellation and heartbeats ----------------------------------------------------------

    def is_cancellation_requested(self) -> bool:
        """Return True once the engine asked this invocation to stop."""
        return self._canceled

    def request_cancellation(self) -> None:
        """Ask the invocation to stop; later staging calls raise StepCanceled."""
        self._canceled = True

    def heartbeat(self, details: Any = None) -> Heartbeat:
        """Record an explicit heartbeat of this Step invocation with ``details``."""
        if self.step_io is None:
            raise DefinitionError("only Step invocations heartbeat; this Context is an RPC's")
        beat = Heartbeat(details)
        self.step_io.deliver(beat)
        return beat

    # -- staging ------------------------------------------------------------------------------

    def _own(self, state: StateRef) -> None:
        if self._states.get(state.name) is not state:
            raise DefinitionError(
                f"{type(state).__name__} {state.name!r} is not declared by Flow {self.flow_type}"
            )

    def read_value(self, state: StateRef, instance: str | None) -> Any:
        """Return the value of a singleton (``instance is None``) or a map instance."""
        self._own(state)
        key = (state.name, instance or "")
        staged = self._writes.get(key, _UNSET)
        if staged is not _UNSET:
            return staged
        if state.is_map and not self._plan.loads_instance(*key):
            raise AttributeMapNotLoadedError(
                f"AttributeMap {state.name!r} instance {instance!r} was not loaded for this "
                "invocation; load it with load_attribute_map_instances or load the whole map",
                flow_id=self.flow_id,
            )
        return self._values.get(key)

    def read_map(self, state: StateRef) -> dict[str, Any]:
        """Return every instance of a wholly loaded AttributeMap, staged writes applied."""
        self._own(state)
        if state.name not in self._plan.whole_maps:
            raise AttributeMapNotLoadedError(
                f"AttributeMap {state.name!r} was not loaded whole for this invocation",
                flow_id=self.flow_id,
            )
        values = {i: v for (n, i), v in self._values.items() if n == state.name}
        for (n, i), v in self._writes.items():
            if n == state.name:
                if v is None:
                    values.pop(i, None)
                else:
                    values[i] = v
        return dict(sorted(values.items()))

    def stage_value(self, state: StateRef, instance: str | None, value: Any) -> None:
        """Stage a write (None deletes) after validating the value against its type."""
        if self._canceled:
            raise StepCanceled()
        self._own(state)
        if value is not None:
            what = state.name if instance is None else f"{state.name}/{instance}"
            value = _codec.validate(state.value_type, value, what=what, strict=True)
            # Encoding now rejects non-finite numbers and int64 overflow at the faulty call,
            # and the commit reuses the text.
            text = _codec.encode(value, state.value_type)
        key = (state.name, instance or "")
        # Re-inserting moves the key last: for an indexed AttributeMap the last write wins.
        self._writes.pop(key, None)
        self._texts.pop(key, None)
        self._writes[key] = value
        if value is not None:
            self._texts[key] = text

    def stream_sender(self, stream: StreamRef) -> StreamSender:
        """Return this Step invocation's sender, or raise a clear error for RPCs."""
        io = self.step_io
        if io is None:
            where = f"RPC {self.rpc_name}" if self.rpc_name else "this Context"
            raise DefinitionError(
                f"Stream {stream.name!r} cannot be written from {where}: RPC handlers cannot "
                "write Streams through their Context; use Engine.write_stream with a source "
                "instead"
            )
        if self.is_cancellation_requested():
            raise StepCanceled()
        io.check(stream)
        return io

    # -- Channels -------------------------------------------------------------------------------

    def _own_channel(self, channel: ChannelRef) -> None:
        if self._channels.get(channel.name) is not channel:
            raise DefinitionError(
                f"{type(channel).__name__} {channel.name!r} is not declared by Flow "
                f"{self.flow_type}"
            )

    def publish(self, channel: ChannelRef, instance: str, value: Any) -> None:
        """Stage a publication after validating the value against the Channel's type."""
        if self._canceled:
            raise StepCanceled()
        self._own_channel(channel)
        what = channel.name if not instance else f"{channel.name}/{instance}"
        value = _codec.validate(channel.value_type, value, what=what, strict=True)
        text = _codec.encode(value, channel.value_type)
        self._publications.append(ChannelPublication(channel.name, instance, text))

    def delete_message(self, channel: ChannelRef, instance: str, message_id: str) -> None:
        """Stage the deletion of a pending message."""
        if self._canceled:
            raise StepCanceled()
        self._own_channel(channel)
        key = (channel.name, instance, message_id)
        self._deletions.setdefault(key, ChannelDeletion(channel.name, instance, message_id))

    def _deleted(self, channel: str, instance: str) -> set[str]:
        return {m for (c, i, m) in self._deletions if (c, i) == (channel, instance)}

    def channel_size(self, channel: ChannelRef, instance: str) -> int:
        """Return the pending count with this handler's publications and deletions applied.

        Without a load a staged deletion is taken to name a pending message; with one, only a
        deletion of a loaded message counts.
        """
        self._own_channel(channel)
        queue = (channel.name, instance)
        deleted = self._deleted(*queue)
        if self._plan.loads_messages(*queue):
            pending = {m.message_id for m in self._messages.get(queue, ())}
            deleted &= pending
        published = sum(1 for p in self._publications if (p.channel, p.instance) == queue)
        return max(0, self._sizes.get(queue, 0) - len(deleted)) + published

    def pending_messages(self, channel: ChannelRef, instance: str) -> tuple[Any, ...]:
        """Return the loaded pending messages not deleted by this handler, oldest first.

        Staged publications get their IDs when the handler's result commits, so they are not
        listed.
        """
        self._own_channel(channel)
        queue = (channel.name, instance)
        if not self._plan.loads_messages(*queue):
            what = channel.name if not instance else f"{channel.name}/{instance}"
            raise ChannelMessagesNotLoadedError(
                f"the pending messages of {type(channel).__name__} {what!r} were not loaded for "
                "this invocation; load them with load_channels, load_channel_maps or "
                "load_channel_map_instances",
                flow_id=self.flow_id,
            )
        deleted = self._deleted(*queue)
        return tuple(m for m in self._messages.get(queue, ()) if m.message_id not in deleted)

    def channel_instances(self, channel: ChannelRef) -> list[str]:
        """Return the ChannelMap instance keys whose adjusted size is above zero, sorted."""
        self._own_channel(channel)
        keys = {i for (c, i) in self._sizes if c == channel.name}
        keys |= {p.instance for p in self._publications if p.channel == channel.name}
        return sorted(k for k in keys if self.channel_size(channel, k) > 0)

    def consumed(self, channel: ChannelRef, instance: str) -> tuple[Any, ...]:
        """Return the values this Step's winning wait condition consumed from a queue."""
        self._own_channel(channel)
        return self._consumed.get((channel.name, instance), ())

    def subflow_result(self, index: int) -> FlowResult:
        """Return the result of the completed wait's SubFlow at ``index``."""
        found = self._subflows.get(index) if isinstance(index, int) else None
        if found is None:
            where = self.step_type or self.rpc_name or "handle_timeout"
            if not self._subflows:
                raise DefinitionError(
                    f"{where} has no SubFlow results: they exist in the execute of a Step "
                    "whose wait had SubFlow conditions"
                )
            raise DefinitionError(
                f"{where}'s wait has no SubFlow at index {index!r} (its SubFlows are "
                f"0 to {len(self._subflows) - 1})"
            )
        return found

    @property
    def staged_publications(self) -> tuple[ChannelPublication, ...]:
        """Return the publications staged so far, in order."""
        return tuple(self._publications)

    @property
    def staged_deletions(self) -> tuple[ChannelDeletion, ...]:
        """Return the deletions staged so far, each once."""
        return tuple(self._deletions.values())

    @property
    def staged_writes(self) -> dict[tuple[str, str], Any]:
        """Return the writes staged so far, keyed by (state name, instance or "")."""
        return dict(self._writes)

    @property
    def staged_texts(self) -> dict[tuple[str, str], str]:
        """Return the JSON text of each staged non-null write."""
        return dict(self._texts)
