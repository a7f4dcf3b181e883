"""What the client knows of Flow types: declared value types, for validating and decoding.

The types come from the client's Registry, or from a Flow class or instance a call passes
(a one-Flow Registry is built for it, once, so its declarations are validated as the engine
validates them). A run's Flow type is learned from the answers that name it (a start, a
describe) and remembered by (Flow ID, run ID), which never changes for a run.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import engine

#: How many runs' Flow types the client remembers.
KNOWN_RUNS_LIMIT = 10_000

FlowRef = type[engine.Flow[Any]] | engine.Flow[Any] | str


@dataclass(frozen=True)
class RPCTypes:
    """One RPC's declared input and output."""

    name: str
    function: Callable[..., Any]
    takes_input: bool
    input_type: Any
    output_type: Any
    #: Raises InvalidArgumentError unless invoke options suit this RPC, as the engine checks.
    check_options: Callable[[engine.RPCInvokeOptions], None]


@dataclass(frozen=True)
class FlowTypeInfo:
    """The declared types of one Flow type."""

    flow_type: str
    input_type: Any
    rpcs: dict[str, RPCTypes] = field(default_factory=dict)
    states: dict[str, Any] = field(default_factory=dict)
    channels: dict[str, Any] = field(default_factory=dict)
    streams: dict[str, engine.Stream[Any]] = field(default_factory=dict)

    def rpc_of(self, function: Callable[..., Any]) -> RPCTypes | None:
        """Return the RPC whose handler is ``function``, if any."""
        return next((r for r in self.rpcs.values() if r.function is function), None)


def flow_type_name(flow: FlowRef) -> str:
    """Return the Flow type name of a Flow class, instance or name."""
    if isinstance(flow, str):
        return flow
    cls = flow if isinstance(flow, type) else type(flow)
    return cls.flow_type()


def _info_of(registry: engine.Registry, flow_type: str) -> FlowTypeInfo:
    spec = registry.spec(flow_type)
    return FlowTypeInfo(
        flow_type=flow_type,
        input_type=spec.input_type,
        rpcs={
            name: RPCTypes(
                name,
                d.function,
                d.takes_input,
                d.input_type,
                d.output_type,
                functools.partial(registry.check_invoke_options, flow_type, name),
            )
            for name, d in spec.rpcs.items()
        },
        states={name: state.value_type for name, state in spec.states.items()},
        channels={name: channel.value_type for name, channel in spec.channels.items()},
        streams=dict(spec.streams),
    )


class FlowTypes:
    """The Flow types a client knows, and the Flow type of the runs it has seen."""

    def __init__(self, registry: engine.Registry | None) -> None:
        self._known: dict[str, FlowTypeInfo] = {}
        if registry is not None:
            for name in registry.flow_types:
                self._known[name] = _info_of(registry, name)
        self._runs: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._latest: OrderedDict[str, str] = OrderedDict()

    def get(self, flow: FlowRef | None) -> FlowTypeInfo | None:
        """Return what is known of ``flow``; a Flow class or instance teaches its types."""
        if flow is None:
            return None
        name = flow_type_name(flow)
        found = self._known.get(name)
        if found is not None or isinstance(flow, str):
            return found
        instance = flow
        if isinstance(instance, type):
            try:
                instance = instance()
            except Exception:
                return None  # a Flow that needs arguments to build: its values stay JSON
        try:
            learned = _info_of(engine.Registry([instance]), name)
        except engine.EngineError:
            return None  # the server refuses it the same way, with its own error
        self._known[name] = learned
        return learned

    def all(self) -> list[FlowTypeInfo]:
        """Return every Flow type known so far."""
        return list(self._known.values())

    def remember_run(self, flow_id: str, run_id: str, flow_type: str) -> None:
        """Remember the Flow type of a run the server named."""
        self._runs[(flow_id, run_id)] = flow_type
        self._runs.move_to_end((flow_id, run_id))
        self._latest[flow_id] = flow_type
        self._latest.move_to_end(flow_id)
        # Oldest first out: a long-lived client keeps a bounded memory.
        if len(self._runs) > KNOWN_RUNS_LIMIT:
            self._runs.popitem(last=False)
        if len(self._latest) > KNOWN_RUNS_LIMIT:
            self._latest.popitem(last=False)

    def run_type(self, flow_id: str, run_id: str | None) -> str | None:
        """Return the Flow type of a run seen before (the latest seen without ``run_id``)."""
        if run_id is None:
            return self._latest.get(flow_id)
        return self._runs.get((flow_id, run_id))
