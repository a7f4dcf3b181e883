"""The Registry: every Flow type an Engine runs, validated once when built."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from engine._describe import describe_flow_type
from engine._enums import IndexType
from engine._limits import check_lock_retry
from engine._loads import rpc_plan_with
from engine._specs import FlowSpec, IndexKeys, build_flow_spec
from engine.errors import DefinitionError, FlowTypeNotFoundError
from engine.flow import Flow
from engine.options import RPCInvokeOptions
from engine.results import FlowTypeDescription


class Registry:
    """The Flow types an Engine serves; validates every declaration when built.

    Raises DefinitionError naming the first problem: duplicate names, locks or loads on
    undeclared state, an indexed AttributeMap without an explicit index key, one index key
    with two types, a hard-delete Attribute of a numeric or boolean type or with an index, a
    handler with the wrong signature.
    """

    def __init__(self, flows: Iterable[Flow[Any]]) -> None:
        self._specs: dict[str, FlowSpec] = {}
        self._index_keys = IndexKeys()
        for flow in flows:
            spec = build_flow_spec(flow, self._index_keys)
            if spec.flow_type in self._specs:
                raise DefinitionError(f"Flow type {spec.flow_type} is registered twice")
            self._specs[spec.flow_type] = spec

    @property
    def flow_types(self) -> list[str]:
        """Return the registered Flow type names, sorted."""
        return sorted(self._specs)

    def spec(self, flow_type: str) -> FlowSpec:
        """Return what the engine knows of ``flow_type``; raises FlowTypeNotFoundError."""
        try:
            return self._specs[flow_type]
        except KeyError:
            raise FlowTypeNotFoundError(f"Flow type {flow_type!r} is not registered") from None

    def spec_of(self, flow: type[Flow[Any]] | Flow[Any] | str) -> FlowSpec:
        """Return the spec of a Flow class, a Flow instance or a Flow type name."""
        if isinstance(flow, str):
            return self.spec(flow)
        cls = flow if isinstance(flow, type) else type(flow)
        return self.spec(cls.flow_type())

    def specs(self) -> list[FlowSpec]:
        """Return every spec, sorted by Flow type."""
        return [self._specs[t] for t in self.flow_types]

    def check_invoke_options(self, flow_type: str, rpc: str, options: RPCInvokeOptions) -> None:
        """Raise InvalidArgumentError unless ``options`` are invoke options RPC ``rpc`` of
        ``flow_type`` accepts: exact AttributeMap instance locks and loads and ChannelMap
        instance loads of that Flow type's own maps, and a lock retry within its bounds (what
        the engine checks before an RPC runs; a remote client checks the same before it sends
        the call)."""
        spec = self.spec(flow_type)
        rpc_plan_with(spec.rpc(rpc), spec.states, spec.channels, options)
        if options.lock_retry is not None:
            check_lock_retry(options.lock_retry)

    def index_type(self, key: str) -> IndexType | None:
        """Return the index type of a search key, or None if no Flow declares it."""
        found = self._index_keys.types.get(key)
        return found[0] if found else None

    def index_key_types(self) -> dict[str, IndexType]:
        """Return every declared search key with its index type."""
        return {key: found[0] for key, found in self._index_keys.types.items()}

    def describe(self, default_rpc_timeout: timedelta | None = None) -> list[FlowTypeDescription]:
        """Describe every Flow type: Steps, RPCs with JSON schemas, state, indexes, Streams
        (an RPC without its own timeout shows ``default_rpc_timeout`` when given)."""
        return [describe_flow_type(spec, default_rpc_timeout) for spec in self.specs()]
