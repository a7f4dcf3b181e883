"""What the Registry builds from each Flow: validated specs the runtime looks things up in.

Validation happens here, once, when a Registry is built; a DefinitionError says precisely what
is wrong. Specs also carry what each handler locks and loads (see ``_loads``).
"""

from __future__ import annotations

import functools
import inspect
import numbers
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from engine._enums import IndexType
from engine._loads import (
    PhasePlan,
    RPCPlan,
    check_declared_loads,
    check_lock,
    phase_plans,
    rpc_loads,
    rpc_plan,
    step_loads,
    timeout_loads,
    timeout_plan,
)
from engine._rpc_definition import RPCDefinition, rpc_definition_of
from engine._storage.records import LoadPlan, Phase
from engine._storage.search.fields import is_system_field
from engine.attribute import AttributeLock, _State
from engine.channel import _Channel
from engine.errors import DefinitionError, RPCNotFoundError
from engine.flow import Flow, FlowTimeoutHandlerOptions, RPCResult
from engine.step import Step, StepList, StepOptions
from engine.stream import Stream

D = TypeVar("D")
#: Longest index key (the default key is the Attribute's name).
MAX_INDEX_KEY_LENGTH = 256
# Numbers and Booleans (bool and IntEnum are ints; Decimal, Fraction and complex are Numbers).
_HARD_DELETE_REFUSED: tuple[type, ...] = (int, float, complex, numbers.Number)


def _holds_numbers_or_booleans(value_type: Any) -> bool:
    """Return True when ``value_type`` admits a number or a Boolean: itself, a member of a
    union (``int | None``), an ``Annotated`` base, a ``NewType``'s supertype or a ``Literal``
    value. Only string and object values (bytes included) may be hard-delete."""
    origin = typing.get_origin(value_type)
    if origin is typing.Annotated:
        return _holds_numbers_or_booleans(typing.get_args(value_type)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(_holds_numbers_or_booleans(arg) for arg in typing.get_args(value_type))
    if origin is typing.Literal:
        return any(isinstance(arg, _HARD_DELETE_REFUSED) for arg in typing.get_args(value_type))
    supertype = getattr(value_type, "__supertype__", None)  # a NewType
    if supertype is not None:
        return _holds_numbers_or_booleans(supertype)
    return isinstance(value_type, type) and issubclass(value_type, _HARD_DELETE_REFUSED)


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
    """A registered Step: its instance, type name, input type, options and phase plans."""

    step: Step[Any]
    step_type: str
    input_type: Any
    options: StepOptions
    has_wait_for: bool
    plans: dict[Phase, PhasePlan]

    @property
    def first_phase(self) -> Phase:
        """Return the phase a new execution starts in."""
        return Phase.WAIT_FOR if self.has_wait_for else Phase.EXECUTE

    def handler(self, phase: Phase) -> Callable[..., Any]:
        """Return the bound method that runs ``phase``."""
        return getattr(self.step, "wait_for" if phase == Phase.WAIT_FOR else "execute")  # type: ignore[no-any-return]


@dataclass
class FlowSpec:
    """A registered Flow type with everything the runtime needs to look up."""

    flow: Flow[Any]
    flow_type: str
    states: dict[str, _State[Any]]
    steps: dict[str, StepSpec]
    start_step: str | None
    rpcs: dict[str, RPCDefinition]
    rpc_plans: dict[str, RPCPlan]
    input_type: Any = None
    step_classes: dict[type[Step[Any]], str] = field(default_factory=dict)
    streams: dict[str, Stream[Any]] = field(default_factory=dict)
    channels: dict[str, _Channel[Any]] = field(default_factory=dict)
    timeout_handler: Callable[..., Any] | None = None
    timeout_plan: LoadPlan = field(default_factory=LoadPlan)

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

    @functools.cached_property
    def singletons(self) -> frozenset[str]:
        """The names of the declared singleton Attributes, which every invocation loads."""
        return frozenset(name for name, state in self.states.items() if not state.is_map)


class IndexKeys:
    """Index keys across every Flow type of a Registry: one key, one index type."""

    def __init__(self) -> None:
        self.types: dict[str, tuple[IndexType, str]] = {}

    def add(self, key: str, index_type: IndexType, flow_type: str) -> None:
        """Record that ``flow_type`` indexes ``key`` as ``index_type``, or raise on a clash."""
        previous = self.types.get(key)
        if previous and previous[0] != index_type:
            raise DefinitionError(
                f"index key {key!r} is {previous[0]} in {previous[1]} but "
                f"{index_type} in {flow_type}; a shared key needs one index type"
            )
        self.types.setdefault(key, (index_type, flow_type))


def build_flow_spec(flow: Flow[Any], keys: IndexKeys) -> FlowSpec:
    """Validate ``flow`` and return its spec; index keys are checked against ``keys``."""
    if not isinstance(flow, Flow):
        raise DefinitionError(f"Registry takes Flow instances, got {flow!r}")
    flow_type = type(flow).flow_type()
    states = _collect_states(flow, flow_type)
    streams = _collect(flow, flow_type, Stream, set(states))
    channels: dict[str, _Channel[Any]] = _collect(flow, flow_type, _Channel, {*states, *streams})
    _check_indexes(flow_type, states, keys)
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
        steps[step_type] = _step_spec(flow_type, step, states, channels)
        step_classes[type(step)] = step_type
    for spec in steps.values():
        failure = spec.options.failure_step
        if failure is not None and failure not in step_classes:
            raise DefinitionError(
                f"{flow_type}.{spec.step_type}: failure_step {failure.__name__} is not a "
                "Step of this Flow"
            )
    rpcs = _collect_rpcs(flow, flow_type, states, channels)
    start = type(step_list.start).step_type() if step_list.start is not None else None
    timeout_handler, timeout_options = _timeout_handler(flow, flow_type, states, channels)
    sizes = bool(channels)
    return FlowSpec(
        flow=flow,
        flow_type=flow_type,
        states=states,
        steps=steps,
        start_step=start,
        rpcs=rpcs,
        rpc_plans={
            name: rpc_plan(definition, channel_sizes=sizes) for name, definition in rpcs.items()
        },
        input_type=steps[start].input_type if start else None,
        step_classes=step_classes,
        streams=streams,
        channels=channels,
        timeout_handler=timeout_handler,
        timeout_plan=timeout_plan(timeout_options, channel_sizes=sizes),
    )


def _timeout_handler(
    flow: Flow[Any],
    flow_type: str,
    states: dict[str, _State[Any]],
    channels: dict[str, _Channel[Any]],
) -> tuple[Callable[..., Any] | None, FlowTimeoutHandlerOptions]:
    # ``handle_timeout`` is looked up with getattr so that Flows without one skip it.
    handler = getattr(flow, "handle_timeout", None)
    options = flow.get_timeout_handler_options()
    if not isinstance(options, FlowTimeoutHandlerOptions):
        raise DefinitionError(
            f"{flow_type}.get_timeout_handler_options() must return FlowTimeoutHandlerOptions"
        )
    what = f"{flow_type}.handle_timeout"
    check_declared_loads(what, states, channels, timeout_loads(options))
    if handler is None:
        return None, options
    if len(inspect.signature(handler).parameters) != 1:
        raise DefinitionError(f"{what} must take (self, context)")
    if inspect.isasyncgenfunction(handler) or inspect.isgeneratorfunction(handler):
        raise DefinitionError(f"{what} must not be a generator")
    return handler, options


def _collect_states(flow: Flow[Any], flow_type: str) -> dict[str, _State[Any]]:
    found: list[_State[Any]] = []
    seen_ids: set[int] = set()
    for klass in reversed(type(flow).__mro__):
        for value in vars(klass).values():
            if isinstance(value, _State) and id(value) not in seen_ids:
                seen_ids.add(id(value))
                found.append(value)
    for value in flow.get_persistence_schema():
        if isinstance(value, Stream | _Channel):
            continue  # collected by _collect
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
            if _holds_numbers_or_booleans(state.value_type):
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


def _collect(flow: Flow[Any], flow_type: str, kind: type[D], taken: set[str]) -> dict[str, D]:
    """Return the declarations of ``kind`` (Streams, Channels) of ``flow``: class attributes
    and ``get_persistence_schema()``; names are unique among all of the Flow's state."""
    found: list[D] = []
    seen: set[int] = set()
    candidates: list[Any] = [
        value for klass in reversed(type(flow).__mro__) for value in vars(klass).values()
    ]
    candidates.extend(flow.get_persistence_schema())
    for value in candidates:
        if isinstance(value, kind) and id(value) not in seen:
            seen.add(id(value))
            found.append(value)
    declared: dict[str, D] = {}
    for item in found:
        name: str = item.name  # type: ignore[attr-defined]
        if name in declared or name in taken:
            raise DefinitionError(f"{flow_type}: state name {name!r} is declared twice")
        declared[name] = item
    return declared


def _check_indexes(flow_type: str, states: dict[str, _State[Any]], keys: IndexKeys) -> None:
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
        if (
            not key.strip()
            or len(key) > MAX_INDEX_KEY_LENGTH
            or "`" in key
            or any(ord(c) < 0x20 for c in key)
        ):
            raise DefinitionError(
                f"{flow_type}: index key {key!r} must be 1 to {MAX_INDEX_KEY_LENGTH} printable "
                "characters without a backtick (a key that is not an identifier is written "
                "`like-this` in SearchFlows queries)"
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
        keys.add(key, state.index.type, flow_type)


def _step_spec(
    flow_type: str,
    step: Step[Any],
    states: dict[str, _State[Any]],
    channels: dict[str, _Channel[Any]],
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
    # ``wait_for`` is looked up with getattr so that a Step without one skips waiting.
    wait_for = getattr(type(step), "wait_for", None)
    if wait_for is not None:
        _handler_input_type(wait_for, name + ".wait_for")
    options = step.get_step_options()
    if not isinstance(options, StepOptions):
        raise DefinitionError(f"{name}.get_step_options() must return StepOptions")
    for locks in (options.wait_for_lock_attributes, options.execute_lock_attributes):
        _check_locks(name, states, locks)
    for phase in (Phase.WAIT_FOR, Phase.EXECUTE):
        check_declared_loads(name, states, channels, step_loads(options, phase))
    return StepSpec(
        step,
        type(step).step_type(),
        input_type,
        options,
        wait_for is not None,
        phase_plans(options, channel_sizes=bool(channels)),
    )


def _collect_rpcs(
    flow: Flow[Any],
    flow_type: str,
    states: dict[str, _State[Any]],
    channels: dict[str, _Channel[Any]],
) -> dict[str, RPCDefinition]:
    # By attribute name, base classes first, so a subclass's method overrides its base's.
    by_attribute: dict[str, RPCDefinition] = {}
    for klass in reversed(type(flow).__mro__):
        for attribute, value in vars(klass).items():
            definition = rpc_definition_of(value)
            if definition is not None:
                by_attribute[attribute] = definition
            else:
                by_attribute.pop(attribute, None)  # overridden by a plain method
    rpcs: dict[str, RPCDefinition] = {}
    for definition in by_attribute.values():
        name = f"{flow_type}.{definition.name}"
        if definition.name in rpcs:
            raise DefinitionError(f"{flow_type}: RPC name {definition.name!r} is used twice")
        _check_locks(name, states, definition.lock_attributes)
        check_declared_loads(name, states, channels, rpc_loads(definition))
        rpcs[definition.name] = _resolve_rpc_types(definition)
    return rpcs


def _resolve_rpc_types(definition: RPCDefinition) -> RPCDefinition:
    """Return ``definition`` with its input and output types read from the annotations.

    Runs when the Registry is built, so annotations may name classes defined after the Flow.
    """
    fn = definition.function
    hints = _type_hints(fn, f"RPC {definition.name}")
    params = list(inspect.signature(fn).parameters.values())
    input_type: Any = None
    if definition.takes_input:
        input_type = hints.get(params[2].name, Any)
    output_type = hints.get("return", Any)
    if output_type is RPCResult or getattr(output_type, "__origin__", None) is RPCResult:
        args = getattr(output_type, "__args__", ())
        output_type = args[0] if args else Any
    return replace(
        definition, input_type=_none_type(input_type), output_type=_none_type(output_type)
    )


def _none_type(annotation: Any) -> Any:
    return None if annotation is type(None) else annotation


def _type_hints(fn: Callable[..., Any], what: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # an unresolvable annotation is a definition error
        raise DefinitionError(f"{what}: cannot resolve annotations: {exc}") from exc


def _handler_input_type(function: Any, what: str) -> Any:
    params = list(inspect.signature(function).parameters.values())
    if len(params) != 3:
        raise DefinitionError(f"{what} must take (self, context, input)")
    annotation = _type_hints(function, what).get(params[2].name, Any)
    return _none_type(annotation)


def _check_locks(what: str, states: dict[str, _State[Any]], locks: Iterable[Any]) -> None:
    for lock in locks:
        if not isinstance(lock, AttributeLock):
            raise DefinitionError(f"{what}: {lock!r} is not an AttributeLock")
        check_lock(what, states, lock, DefinitionError)
