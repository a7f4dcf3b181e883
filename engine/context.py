"""The Context a handler receives: a snapshot of committed state plus staged writes."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine import _codec
from engine._runtime.signals import StepCanceled
from engine.errors import AttributeMapNotLoadedError, DefinitionError

if TYPE_CHECKING:
    from engine._runtime.step_io import StepIO
    from engine.attribute import _State
    from engine.stream import Heartbeat

_UNSET = object()


class Context:
    """What a Step or RPC handler sees and stages during one invocation.

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
        snapshot: Mapping[tuple[str, str], Any],
        loaded_maps: frozenset[str] = frozenset(),
        loaded_instances: frozenset[tuple[str, str]] = frozenset(),
        step_execution_id: str | None = None,
        step_type: str | None = None,
        attempt: int = 1,
        rpc_name: str | None = None,
    ) -> None:
        self.flow_id = flow_id
        self.run_id = run_id
        self.flow_type = flow_type
        self.step_execution_id = step_execution_id
        self.step_type = step_type
        self.attempt = attempt
        self.rpc_name = rpc_name
        self._states = states
        # Decoded snapshot values keyed by (state name, instance or "").
        self._snapshot = snapshot
        self._loaded_maps = loaded_maps
        self._loaded_instances = loaded_instances
        self._writes: dict[tuple[str, str], Any] = {}
        self._texts: dict[tuple[str, str], str] = {}
        self._cancel = threading.Event()
        # Set by the scheduler for Step invocations: Stream writes and heartbeats go out at
        # once through it. RPCs have none, so they cannot write Streams through a Context.
        self.step_io: StepIO | None = None

    # -- cancellation -------------------------------------------------------------------------

    def is_cancellation_requested(self) -> bool:
        """Return True once the engine asked this invocation to stop (poll it in sync Steps)."""
        return self._cancel.is_set()

    def request_cancellation(self) -> None:
        """Ask the invocation to stop; later staging calls raise StepCanceled."""
        self._cancel.set()

    def heartbeat(self, details: Any = None) -> Heartbeat:
        """Record an explicit heartbeat of this Step invocation with ``details``.

        It is recorded at once; a sync generator Step may also yield the returned value. Stream
        writes are implicit heartbeats that keep the last explicit ``details``.
        """
        from engine.stream import Heartbeat

        if self.step_io is None:
            raise DefinitionError("only Step invocations heartbeat; this Context is an RPC's")
        beat = Heartbeat(details)
        self.step_io.deliver(beat)
        return beat

    # -- state access used by Attribute and AttributeMap --------------------------------------

    def _own(self, state: _State[Any]) -> None:
        declared = self._states.get(state.name)
        if declared is not state:
            raise DefinitionError(
                f"{type(state).__name__} {state.name!r} is not declared by Flow {self.flow_type}"
            )

    def read(self, state: _State[Any], instance: str | None) -> Any:
        """Return the value of a singleton (``instance is None``) or a map instance."""
        self._own(state)
        key = (state.name, instance or "")
        staged = self._writes.get(key, _UNSET)
        if staged is not _UNSET:
            return staged
        if state.is_map and not (state.name in self._loaded_maps or key in self._loaded_instances):
            raise AttributeMapNotLoadedError(
                f"AttributeMap {state.name!r} instance {instance!r} was not loaded for this "
                "invocation; load it with load_attribute_map_instances or load the whole map",
                flow_id=self.flow_id,
            )
        return self._snapshot.get(key)

    def read_all(self, state: _State[Any]) -> dict[str, Any]:
        """Return every instance of a wholly loaded AttributeMap, staged writes applied."""
        self._own(state)
        if state.name not in self._loaded_maps:
            raise AttributeMapNotLoadedError(
                f"AttributeMap {state.name!r} was not loaded whole for this invocation",
                flow_id=self.flow_id,
            )
        values = {i: v for (n, i), v in self._snapshot.items() if n == state.name}
        for (n, i), v in self._writes.items():
            if n == state.name:
                if v is None:
                    values.pop(i, None)
                else:
                    values[i] = v
        return dict(sorted(values.items()))

    def write(self, state: _State[Any], instance: str | None, value: Any) -> None:
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

    @property
    def staged_texts(self) -> dict[tuple[str, str], str]:
        """Return the JSON text of each staged non-null write."""
        return dict(self._texts)

    @property
    def staged_writes(self) -> dict[tuple[str, str], Any]:
        """Return the writes staged so far, keyed by (state name, instance or "")."""
        return dict(self._writes)
