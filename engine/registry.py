"""The Registry: every Flow type an Engine runs, validated once when built."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine import _codec
from engine._storage.search.fields import is_system_field
from engine.attribute import AttributeLock, AttributeMap, AttributeMapLoad, IndexType, _State
from engine.errors import DefinitionError, FlowTypeNotFoundError, RPCNotFoundError
from engine.flow import (
    RPC_MARKER,
    Flow,
    FlowTimeoutHandlerOptions,
    RPCDefinition,
    resolve_rpc_types,
    resolve_type_hints,
)
from engine.step import Step, StepList, StepOptions, declared_wait_for
from engine.stream import Stream, collect_streams

_HARD_DELETE_REFUSED = (int, float, bool)
_INDEX_VALUE_TYPES: dict[IndexType, tuple[Any, ...]] = {
    IndexType.KEYWORD: (str,),
    IndexType.FULL_TEXT: (str,),
    IndexType.KEYWORD_ARRAY: (list[str], tuple[str, ...], list),
    IndexType.INT: (int,),
    IndexType.DOUBLE: (float, int),
    IndexType.BOOL: (bool,),
    IndexType.DATETIME: (datetime,),
}


@dataclass
class StepSpec:
    """A registered Step: its instance, type name, input type and options."""

    step: Step[Any]
    step_type: str
    input_type: Any
    options: StepOptions
    has_wait_for: bool


@dataclass
class FlowSpec:
    """A registered Flow type with everything the runtime needs to look up."""

    flow: Flow[Any]
    flow_type: str
    states: dict[str, _State[Any]]
    steps: dict[str, StepSpec]
    start_step: str | None
    rpcs: dict[str, RPCDefinition]
    input_type: Any = None
    step_classes: dict[type[Step[Any]], str] = field(default_factory=dict)
    streams: dict[str, Stream[Any]] = field(default_factory=dict)
    timeout_handler: Any = None
    timeout_options: FlowTimeoutHandlerOptions = field(default_factory=FlowTimeoutHandlerOptions)

    def rpc(self, name: str) -> RPCDefinition:
        """Return the RPC called ``name`` or raise RPCNotFoundError."""
        try:
            return self.rpcs[name]
        except KeyError:
            raise RPCNotFoundError(
                f"Flow type {self.flow_type} has no RPC named {name!r}"
            ) from None

    def state(self, name: str) -> _State[Any] | None:
        """Return the Attribute or AttributeMap called ``name``, if declared."""
        return self.states.get(name)


class Registry:
    """The Flow types an Engine serves; validates every declaration when built."""

    def __init__(self, flows: Iterable[Flow[Any]]) -> None:
        self._specs: dict[str, FlowSpec] = {}
        self._index_types: dict[str, tuple[IndexType, str]] = {}
        for flow in flows:
            spec = self._build(flow)
            if spec.flow_type in self._specs:
                raise DefinitionError(f"Flow type {spec.flow_type} is registered twice")
            self._specs[spec.flow_type] = spec

    # -- lookups ------------------------------------------------------------------------------

    @property
    def flow_types(self) -> list[str]:
        """Return the registered Flow type names, sorted."""
        return sorted(self._specs)

    def spec(self, flow_type: str) -> FlowSpec:
        """Return the spec of ``flow_type`` or raise FlowTypeNotFoundError."""
        try:
            return self._specs[flow_type]
        except KeyError:
            raise FlowTypeNotFoundError(f"Flow type {flow_type!r} is not registered") from None

    def specs(self) -> list[FlowSpec]:
        """Return every spec, sorted by Flow type."""
        return [self._specs[t] for t in self.flow_types]

    def index_type(self, key: str) -> IndexType | None:
        """Return the index type of a search key, or None if no Flow declares it."""
        found = self._index_types.get(key)
        return found[0] if found else None

    # -- validation ---------------------------------------------------------------------------

    def _build(self, flow: Flow[Any]) -> FlowSpec:
        if not isinstance(flow, Flow):
            raise DefinitionError(f"Registry takes Flow instances, got {flow!r}")
        flow_type = type(flow).flow_type()
        states = self._collect_states(flow, flow_type)
        streams = collect_streams(flow, flow_type, states)
        self._check_indexes(flow_type, states)
        step_list = flow.get_steps()
        if not isinstance(step_list, StepList):
            raise DefinitionError(f"{flow_type}.get_steps() must return a StepList")
        steps: dict[str, StepSpec] = {}
        step_classes: dict[type[Step[Any]], str] = {}
        for step in step_list.all():
            step_type = type(step).step_type()
            if step_type in steps:
                raise DefinitionError(f"{flow_type}: Step type {step_type} is listed twice")
            step.flow = flow
            steps[step_type] = self._step_spec(flow_type, step, states)
            step_classes[type(step)] = step_type
        for spec in steps.values():
            failure = spec.options.failure_step
            if failure is not None and failure not in step_classes:
                raise DefinitionError(
                    f"{flow_type}.{spec.step_type}: failure_step {failure.__name__} is not a "
                    "Step of this Flow"
                )
        rpcs = self._collect_rpcs(flow, flow_type, states)
        start = type(step_list.start).step_type() if step_list.start is not None else None
        timeout_handler, timeout_options = self._timeout_handler(flow, flow_type, states)
        return FlowSpec(
            flow=flow,
            flow_type=flow_type,
            states=states,
            steps=steps,
            start_step=start,
            rpcs=rpcs,
            input_type=steps[start].input_type if start else None,
            step_classes=step_classes,
            streams=streams,
            timeout_handler=timeout_handler,
            timeout_options=timeout_options,
        )

    @staticmethod
    def _timeout_handler(
        flow: Flow[Any], flow_type: str, states: dict[str, _State[Any]]
    ) -> tuple[Any, FlowTimeoutHandlerOptions]:
        handler = getattr(flow, "handle_timeout", None)
        options = flow.get_timeout_handler_options()
        if not isinstance(options, FlowTimeoutHandlerOptions):
            raise DefinitionError(
                f"{flow_type}.get_timeout_handler_options() must return FlowTimeoutHandlerOptions"
            )
        what = f"{flow_type}.handle_timeout"
        _check_loads(
            what, states, options.load_attribute_maps, options.load_attribute_map_instances
        )
        if handler is None:
            return None, options
        if len(inspect.signature(handler).parameters) != 1:
            raise DefinitionError(f"{what} must take (self, context)")
        if inspect.isasyncgenfunction(handler) or inspect.isgeneratorfunction(handler):
            raise DefinitionError(f"{what} must not be a generator")
        return handler, options

    @staticmethod
    def _collect_states(flow: Flow[Any], flow_type: str) -> dict[str, _State[Any]]:
        found: list[_State[Any]] = []
        seen_ids: set[int] = set()
        for klass in reversed(type(flow).__mro__):
            for value in vars(klass).values():
                if isinstance(value, _State) and id(value) not in seen_ids:
                    seen_ids.add(id(value))
                    found.append(value)
        for value in flow.get_persistence_schema():
            if isinstance(value, Stream):
                continue  # collected by collect_streams
            if not isinstance(value, _State):
                raise DefinitionError(
                    f"{flow_type}.get_persistence_schema() returned {value!r}, not state"
                )
            if id(value) not in seen_ids:
                seen_ids.add(id(value))
                found.append(value)
        states: dict[str, _State[Any]] = {}
        for state in found:
            if state.name in states:
                raise DefinitionError(f"{flow_type}: state name {state.name!r} is declared twice")
            states[state.name] = state
            if state.hard_delete_on_null:
                if state.value_type in _HARD_DELETE_REFUSED:
                    raise DefinitionError(
                        f"{flow_type}: hard-delete {type(state).__name__} {state.name!r} must "
                        "hold string or object values, not numbers or booleans"
                    )
                if state.index is not None:
                    raise DefinitionError(
                        f"{flow_type}: hard-delete {type(state).__name__} {state.name!r} "
                        "cannot be indexed"
                    )
        return states

    def _check_indexes(self, flow_type: str, states: dict[str, _State[Any]]) -> None:
        used: dict[str, str] = {}
        for state in states.values():
            if state.index is None:
                continue
            if not isinstance(state.index.type, IndexType):
                raise DefinitionError(f"{flow_type}: {state.name!r} has an unknown index type")
            if state.is_map and not state.index.key:
                raise DefinitionError(
                    f"{flow_type}: indexed AttributeMap {state.name!r} must name its index key "
                    "explicitly, e.g. AttributeIndex(IndexType.KEYWORD, 'keyword2')"
                )
            key = state.index_key
            assert key is not None
            if not key.strip() or not key.replace("_", "").isalnum() or key[0].isdigit():
                raise DefinitionError(
                    f"{flow_type}: index key {key!r} must be an identifier (letters, digits, _)"
                )
            if is_system_field(key):
                raise DefinitionError(
                    f"{flow_type}: index key {key!r} is a reserved system field of SearchFlows"
                )
            if key in used:
                raise DefinitionError(
                    f"{flow_type}: {state.name!r} and {used[key]!r} use the same index key "
                    f"{key!r}; two indexed fields of one Flow need different keys"
                )
            used[key] = state.name
            allowed = _INDEX_VALUE_TYPES[state.index.type]
            if state.value_type not in allowed and state.value_type not in (Any, object):
                raise DefinitionError(
                    f"{flow_type}: {state.name!r} of type {state.value_type!r} cannot have a "
                    f"{state.index.type} index"
                )
            previous = self._index_types.get(key)
            if previous and previous[0] != state.index.type:
                raise DefinitionError(
                    f"index key {key!r} is {previous[0]} in {previous[1]} but "
                    f"{state.index.type} in {flow_type}; a shared key needs one index type"
                )
            self._index_types.setdefault(key, (state.index.type, flow_type))

    def _step_spec(
        self, flow_type: str, step: Step[Any], states: dict[str, _State[Any]]
    ) -> StepSpec:
        name = f"{flow_type}.{type(step).step_type()}"
        execute = type(step).execute
        if execute is Step.execute:
            raise DefinitionError(f"{name} must override execute(self, context, input)")
        input_type = _handler_input_type(execute, name + ".execute")
        if inspect.isasyncgenfunction(execute):
            raise DefinitionError(
                f"{name}.execute is an async generator; write Streams with stream.write(ctx, v) "
                "in an async def, or yield them from a plain def generator"
            )
        wait_for = declared_wait_for(step)
        if wait_for is not None:
            _handler_input_type(type(step).wait_for, name + ".wait_for")  # type: ignore[attr-defined]
        options = step.get_step_options()
        if not isinstance(options, StepOptions):
            raise DefinitionError(f"{name}.get_step_options() must return StepOptions")
        for phase in ("wait_for", "execute"):
            _check_locks(name, states, getattr(options, f"{phase}_lock_attributes"))
            _check_loads(
                name,
                states,
                getattr(options, f"{phase}_load_attribute_maps"),
                getattr(options, f"{phase}_load_attribute_map_instances"),
            )
        return StepSpec(step, type(step).step_type(), input_type, options, wait_for is not None)

    @staticmethod
    def _collect_rpcs(
        flow: Flow[Any], flow_type: str, states: dict[str, _State[Any]]
    ) -> dict[str, RPCDefinition]:
        # By attribute name, base classes first, so a subclass's method overrides its base's.
        by_attribute: dict[str, RPCDefinition] = {}
        for klass in reversed(type(flow).__mro__):
            for attribute, value in vars(klass).items():
                definition = getattr(value, RPC_MARKER, None)
                if isinstance(definition, RPCDefinition):
                    by_attribute[attribute] = definition
                else:
                    by_attribute.pop(attribute, None)  # overridden by a plain method
        rpcs: dict[str, RPCDefinition] = {}
        for definition in by_attribute.values():
            name = f"{flow_type}.{definition.name}"
            if definition.name in rpcs:
                raise DefinitionError(f"{flow_type}: RPC name {definition.name!r} is used twice")
            _check_locks(name, states, definition.lock_attributes)
            _check_loads(
                name,
                states,
                definition.load_attribute_maps,
                definition.load_attribute_map_instances,
            )
            rpcs[definition.name] = resolve_rpc_types(definition)
        return rpcs


def _handler_input_type(function: Any, what: str) -> Any:
    params = list(inspect.signature(function).parameters.values())
    if len(params) != 3:
        raise DefinitionError(f"{what} must take (self, context, input)")
    hints = resolve_type_hints(function, what)
    annotation = hints.get(params[2].name, Any)
    return None if annotation is type(None) else annotation


def _check_locks(what: str, states: dict[str, _State[Any]], locks: Iterable[Any]) -> None:
    for lock in locks:
        if not isinstance(lock, AttributeLock):
            raise DefinitionError(f"{what}: {lock!r} is not an AttributeLock")
        check_lock(what, states, lock, DefinitionError)


def check_lock(
    what: str, states: dict[str, _State[Any]], lock: AttributeLock, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``lock`` names declared state of the right kind."""
    state = states.get(lock.name)
    if state is None:
        raise error(f"{what}: lock on undeclared state {lock.name!r}")
    if state.is_map and lock.instance is None:
        raise error(f"{what}: a lock on AttributeMap {lock.name!r} must name an instance")
    if not state.is_map and lock.instance is not None:
        raise error(f"{what}: Attribute {lock.name!r} is not an AttributeMap; lock it whole")


def _check_loads(
    what: str,
    states: dict[str, _State[Any]],
    maps: Iterable[Any],
    instances: Iterable[Any],
) -> None:
    for m in maps:
        if not isinstance(m, AttributeMap) or states.get(m.name) is not m:
            raise DefinitionError(
                f"{what}: load of {m!r}, which is not an AttributeMap of this Flow"
            )
    for load in instances:
        check_load(what, states, load, DefinitionError)


def check_load(
    what: str, states: dict[str, _State[Any]], load: Any, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``load`` is an exact instance load of a declared AttributeMap."""
    if not isinstance(load, AttributeMapLoad):
        raise error(f"{what}: {load!r} is not an AttributeMap instance load (use map.load(key))")
    state = states.get(load.name)
    if state is None:
        raise error(f"{what}: load of undeclared state {load.name!r}")
    if not state.is_map:
        raise error(f"{what}: {load.name!r} is an Attribute, not an AttributeMap")


def validate_value(state: _State[Any], value: Any, what: str) -> Any:
    """Validate a JSON-borne value for ``state`` (lax mode), raising InvalidArgumentError."""
    return _codec.validate(state.value_type, value, what=what, strict=False)


__all__ = ["FlowSpec", "Registry", "StepSpec", "check_load", "check_lock"]


def _schema(value_type: Any) -> dict[str, Any]:
    if value_type is None:
        return {"type": "null"}
    if value_type is Any or value_type is object:
        return {}
    try:
        return _codec.adapter_for(value_type).json_schema()
    except Exception:  # a type pydantic cannot describe is still usable
        return {}


def describe_registry(registry: Registry) -> list[dict[str, Any]]:
    """Describe every Flow type as plain data (for listFlowTypes and the playground)."""
    described = []
    for spec in registry.specs():
        described.append(
            {
                "flowType": spec.flow_type,
                "startStep": spec.start_step,
                "inputSchema": _schema(spec.input_type),
                "steps": [
                    {
                        "stepType": s.step_type,
                        "inputSchema": _schema(s.input_type),
                        "hasWaitFor": s.has_wait_for,
                        "waitForLocks": [lock.key for lock in s.options.wait_for_lock_attributes],
                        "executeLocks": [lock.key for lock in s.options.execute_lock_attributes],
                    }
                    for s in spec.steps.values()
                ],
                "rpcs": [
                    {
                        "name": r.name,
                        "inputSchema": _schema(r.input_type),
                        "outputSchema": _schema(r.output_type),
                        "lockAttributes": [lock.key for lock in r.lock_attributes],
                        "isTransactional": r.is_transactional or bool(r.lock_attributes),
                        "timeoutSeconds": r.timeout.total_seconds(),
                    }
                    for r in sorted(spec.rpcs.values(), key=lambda r: r.name)
                ],
                "attributes": [
                    {
                        "name": s.name,
                        "kind": "AttributeMap" if s.is_map else "Attribute",
                        "schema": _schema(s.value_type),
                        "hardDeleteOnNull": s.hard_delete_on_null,
                        "index": None
                        if s.index is None
                        else {
                            "type": s.index.type.value,
                            "key": s.index_key,
                        },
                    }
                    for s in sorted(spec.states.values(), key=lambda s: s.name)
                ],
                "streams": [
                    {
                        "name": st.name,
                        "schema": _schema(st.value_type),
                        "streamCapacityBytes": st.stream_capacity_bytes,
                    }
                    for st in sorted(spec.streams.values(), key=lambda st: st.name)
                ],
            }
        )
    return described
