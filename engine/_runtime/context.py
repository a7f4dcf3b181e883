"""The runtime's Context: one invocation's snapshot, its staged writes and its cancellation."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._runtime.signals import StepCanceled
from engine._staging import Staging, StateRef, StreamRef, StreamSender
from engine._storage.records import LoadPlan
from engine.errors import AttributeMapNotLoadedError, DefinitionError
from engine.outputs import Heartbeat

if TYPE_CHECKING:
    from engine._runtime.step_io import StepIO
    from engine.attribute import _State

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
        self._cancel = threading.Event()

    def __repr__(self) -> str:
        who = self.rpc_name or self.step_type or "handle_timeout"
        return f"<Context {self.flow_type} {self.flow_id} {who}>"

    # -- cancellation and heartbeats ----------------------------------------------------------

    def is_cancellation_requested(self) -> bool:
        """Return True once the engine asked this invocation to stop."""
        return self._cancel.is_set()

    def request_cancellation(self) -> None:
        """Ask the invocation to stop; later staging calls raise StepCanceled."""
        self._cancel.set()

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
        if self._cancel.is_set():
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

    @property
    def staged_writes(self) -> dict[tuple[str, str], Any]:
        """Return the writes staged so far, keyed by (state name, instance or "")."""
        return dict(self._writes)

    @property
    def staged_texts(self) -> dict[tuple[str, str], str]:
        """Return the JSON text of each staged non-null write."""
        return dict(self._texts)
