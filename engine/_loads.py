"""What an invocation locks and loads, computed in one place for every source.

A Step phase, an RPC (with the invoke options of one call) and the Flow timeout handler each
get a plan here. Plans of declarations are built once, when the Registry is; an RPC's plan is
rebuilt only for a call that brings invoke options.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine._rpc_definition import RPCDefinition
from engine._storage.records import LoadPlan, Phase
from engine.attribute import AttributeLock, AttributeMap, AttributeMapLoad, check_instance_key
from engine.channel import Channel, ChannelMap, ChannelMapLoad, _Channel
from engine.errors import DefinitionError, InvalidArgumentError
from engine.options import RPCInvokeOptions
from engine.step import RetryPolicy, StepOptions

if TYPE_CHECKING:
    from engine.attribute import _State
    from engine.flow import FlowTimeoutHandlerOptions

#: The retry policy of a phase that declares none: one attempt.
NO_RETRY = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class PhasePlan:
    """What one Step phase locks (taken when its attempt is handed out), loads and retries."""

    lock_keys: tuple[str, ...]
    loads: LoadPlan
    retry: RetryPolicy


@dataclass(frozen=True)
class RPCPlan:
    """What one RPC invocation locks and loads, and whether it commits transactionally."""

    lock_keys: tuple[str, ...]
    loads: LoadPlan
    transactional: bool


@dataclass(frozen=True)
class Loads:
    """What one handler declares it loads, as its options spell it."""

    attribute_maps: tuple[AttributeMap[Any], ...] = ()
    attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    channels: tuple[Channel[Any], ...] = ()
    channel_maps: tuple[ChannelMap[Any], ...] = ()
    channel_map_instances: tuple[ChannelMapLoad, ...] = ()


def load_plan(loads: Loads, *, channel_sizes: bool) -> LoadPlan:
    """Return the plan that reads every singleton Attribute and what ``loads`` names.

    ``channel_sizes`` (the Flow declares Channels) reads the pending count of every queue,
    which every handler sees without a load.
    """
    maps = tuple(sorted({m.name for m in loads.attribute_maps}))
    exact = tuple(
        sorted({(x.name, x.instance) for x in loads.attribute_map_instances if x.name not in maps})
    )
    channels = tuple(sorted({c.name for c in (*loads.channels, *loads.channel_maps)}))
    queues = tuple(
        sorted(
            {(x.name, x.instance) for x in loads.channel_map_instances if x.name not in channels}
        )
    )
    return LoadPlan(None, maps, exact, channel_sizes, channels, queues)


def step_loads(options: StepOptions, phase: Phase) -> Loads:
    """Return what one phase of a Step loads."""
    if phase == Phase.WAIT_FOR:
        return Loads(
            options.wait_for_load_attribute_maps,
            options.wait_for_load_attribute_map_instances,
            options.wait_for_load_channels,
            options.wait_for_load_channel_maps,
            options.wait_for_load_channel_map_instances,
        )
    return Loads(
        options.execute_load_attribute_maps,
        options.execute_load_attribute_map_instances,
        options.execute_load_channels,
        options.execute_load_channel_maps,
        options.execute_load_channel_map_instances,
    )


def rpc_loads(definition: RPCDefinition) -> Loads:
    """Return what an RPC's registration loads."""
    return Loads(
        definition.load_attribute_maps,
        definition.load_attribute_map_instances,
        definition.load_channels,
        definition.load_channel_maps,
        definition.load_channel_map_instances,
    )


def timeout_loads(options: FlowTimeoutHandlerOptions) -> Loads:
    """Return what a Flow's ``handle_timeout`` loads."""
    return Loads(
        options.load_attribute_maps,
        options.load_attribute_map_instances,
        options.load_channels,
        options.load_channel_maps,
        options.load_channel_map_instances,
    )


def phase_plans(options: StepOptions, *, channel_sizes: bool) -> dict[Phase, PhasePlan]:
    """Return the plans of a Step's ``wait_for`` and ``execute`` phases."""
    return {
        Phase.WAIT_FOR: PhasePlan(
            _keys(options.wait_for_lock_attributes),
            load_plan(step_loads(options, Phase.WAIT_FOR), channel_sizes=channel_sizes),
            options.wait_for_retry or NO_RETRY,
        ),
        Phase.EXECUTE: PhasePlan(
            _keys(options.execute_lock_attributes),
            load_plan(step_loads(options, Phase.EXECUTE), channel_sizes=channel_sizes),
            options.execute_retry or NO_RETRY,
        ),
    }


def timeout_plan(options: FlowTimeoutHandlerOptions, *, channel_sizes: bool) -> LoadPlan:
    """Return what a Flow's ``handle_timeout`` loads."""
    return load_plan(timeout_loads(options), channel_sizes=channel_sizes)


def rpc_plan(definition: RPCDefinition, *, channel_sizes: bool) -> RPCPlan:
    """Return the plan of an RPC invoked without invoke options."""
    return RPCPlan(
        _keys(definition.lock_attributes),
        load_plan(rpc_loads(definition), channel_sizes=channel_sizes),
        definition.transactional,
    )


def rpc_plan_with(
    definition: RPCDefinition,
    states: Mapping[str, _State[Any]],
    channels: Mapping[str, _Channel[Any]],
    options: RPCInvokeOptions,
) -> RPCPlan:
    """Union, sort and de-duplicate invoke options with the definition, after validating them.

    Invoke options can only add exact AttributeMap instance locks and loads and exact
    ChannelMap instance loads; every entry must name a map of this Flow with a non-empty,
    slash-free instance.
    """
    what = f"RPC {definition.name} invoke options"
    if not isinstance(options, RPCInvokeOptions):
        raise InvalidArgumentError(f"{what}: expected RPCInvokeOptions", field="options")
    extra_locks: list[AttributeLock] = []
    for lock in options.lock_attribute_map_instances:
        if not isinstance(lock, AttributeLock):
            raise InvalidArgumentError(
                f"{what}: lock_attribute_map_instances takes map.lock(key) values, got {lock!r}",
                field="lockAttributeMapInstances",
            )
        check_lock(what, states, lock, InvalidArgumentError)
        if lock.instance is None:
            raise InvalidArgumentError(
                f"{what}: {lock.name!r} is not an AttributeMap instance lock",
                field="lockAttributeMapInstances",
            )
        check_instance_key(lock.instance, "lockAttributeMapInstances instance")
        extra_locks.append(lock)
    extra_loads: list[AttributeMapLoad] = []
    for load in options.load_attribute_map_instances:
        check_load(what, states, load, InvalidArgumentError)
        check_instance_key(load.instance, "loadAttributeMapInstances instance")
        extra_loads.append(load)
    extra_queues: list[ChannelMapLoad] = []
    for queue in options.load_channel_map_instances:
        check_channel_load(what, channels, queue, InvalidArgumentError)
        check_instance_key(queue.instance, "loadChannelMapInstances instance")
        extra_queues.append(queue)
    locks = sorted(set(definition.lock_attributes) | set(extra_locks))
    base = rpc_loads(definition)
    loads = Loads(
        base.attribute_maps,
        (*base.attribute_map_instances, *extra_loads),
        base.channels,
        base.channel_maps,
        (*base.channel_map_instances, *extra_queues),
    )
    return RPCPlan(
        _keys(locks),
        load_plan(loads, channel_sizes=bool(channels)),
        definition.is_transactional or bool(locks),
    )


def check_lock(
    what: str, states: Mapping[str, _State[Any]], lock: AttributeLock, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``lock`` names declared state of the right kind."""
    state = states.get(lock.name)
    if state is None:
        raise error(f"{what}: lock on undeclared state {lock.name!r}")
    _check_owner(what, f"lock on {lock.name!r}", state, lock.definition, error)
    if state.is_map and lock.instance is None:
        raise error(f"{what}: a lock on AttributeMap {lock.name!r} must name an instance")
    if not state.is_map and lock.instance is not None:
        raise error(f"{what}: Attribute {lock.name!r} is not an AttributeMap; lock it whole")


def _check_owner(
    what: str, entry: str, declared: Any, made_by: Any, error: type[Exception]
) -> None:
    """Raise ``error`` when ``made_by`` (the definition that built the entry) is not the one
    this Flow declares under that name: another Flow type's state of the same name."""
    if made_by is not None and made_by is not declared:
        raise error(
            f"{what}: the {entry} was made by another Flow type's definition of that name; "
            "use this Flow's own"
        )


def check_load(
    what: str, states: Mapping[str, _State[Any]], load: Any, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``load`` is an exact instance load of a declared AttributeMap."""
    if not isinstance(load, AttributeMapLoad):
        raise error(f"{what}: {load!r} is not an AttributeMap instance load (use map.load(key))")
    state = states.get(load.name)
    if state is None:
        raise error(f"{what}: load of undeclared state {load.name!r}")
    _check_owner(what, f"load of {load.name!r}", state, load.definition, error)
    if not state.is_map:
        raise error(f"{what}: {load.name!r} is an Attribute, not an AttributeMap")


def check_channel_load(
    what: str, channels: Mapping[str, _Channel[Any]], load: Any, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``load`` is an exact instance load of a declared ChannelMap."""
    if not isinstance(load, ChannelMapLoad):
        raise error(
            f"{what}: {load!r} is not a ChannelMap instance load (use map.load_messages(key))"
        )
    channel = channels.get(load.name)
    if channel is None:
        raise error(f"{what}: load of undeclared Channel {load.name!r}")
    _check_owner(what, f"load of {load.name!r}", channel, load.definition, error)
    if not channel.is_map:
        raise error(f"{what}: {load.name!r} is a Channel, not a ChannelMap; load it whole")


def check_declared_loads(
    what: str,
    states: Mapping[str, _State[Any]],
    channels: Mapping[str, _Channel[Any]],
    loads: Loads,
) -> None:
    """Raise DefinitionError unless every declared load names state of this Flow."""
    for m in loads.attribute_maps:
        if not isinstance(m, AttributeMap) or states.get(m.name) is not m:
            raise DefinitionError(
                f"{what}: load of {m!r}, which is not an AttributeMap of this Flow"
            )
    for load in loads.attribute_map_instances:
        check_load(what, states, load, DefinitionError)
    for c in loads.channels:
        if not isinstance(c, Channel) or channels.get(c.name) is not c:
            raise DefinitionError(f"{what}: load of {c!r}, which is not a Channel of this Flow")
    for channel_map in loads.channel_maps:
        if not isinstance(channel_map, ChannelMap) or channels.get(channel_map.name) is not (
            channel_map
        ):
            raise DefinitionError(
                f"{what}: load of {channel_map!r}, which is not a ChannelMap of this Flow"
            )
    for queue in loads.channel_map_instances:
        check_channel_load(what, channels, queue, DefinitionError)


def _keys(locks: Iterable[AttributeLock]) -> tuple[str, ...]:
    return tuple(sorted({lock.key for lock in locks}))
