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


def load_plan(
    whole_maps: Iterable[AttributeMap[Any]], instances: Iterable[AttributeMapLoad]
) -> LoadPlan:
    """Return the plan that reads every singleton, ``whole_maps`` and the exact ``instances``."""
    maps = tuple(sorted({m.name for m in whole_maps}))
    exact = tuple(
        sorted({(load.name, load.instance) for load in instances if load.name not in maps})
    )
    return LoadPlan(None, maps, exact)


def phase_plans(options: StepOptions) -> dict[Phase, PhasePlan]:
    """Return the plans of a Step's ``wait_for`` and ``execute`` phases."""
    return {
        Phase.WAIT_FOR: PhasePlan(
            _keys(options.wait_for_lock_attributes),
            load_plan(
                options.wait_for_load_attribute_maps, options.wait_for_load_attribute_map_instances
            ),
            options.wait_for_retry or NO_RETRY,
        ),
        Phase.EXECUTE: PhasePlan(
            _keys(options.execute_lock_attributes),
            load_plan(
                options.execute_load_attribute_maps, options.execute_load_attribute_map_instances
            ),
            options.execute_retry or NO_RETRY,
        ),
    }


def timeout_plan(options: FlowTimeoutHandlerOptions) -> LoadPlan:
    """Return what a Flow's ``handle_timeout`` loads."""
    return load_plan(options.load_attribute_maps, options.load_attribute_map_instances)


def rpc_plan(definition: RPCDefinition) -> RPCPlan:
    """Return the plan of an RPC invoked without invoke options."""
    return RPCPlan(
        _keys(definition.lock_attributes),
        load_plan(definition.load_attribute_maps, definition.load_attribute_map_instances),
        definition.transactional,
    )


def rpc_plan_with(
    definition: RPCDefinition,
    states: Mapping[str, _State[Any]],
    options: RPCInvokeOptions,
) -> RPCPlan:
    """Union, sort and de-duplicate invoke options with the definition, after validating them.

    Invoke options can only add exact AttributeMap instance locks and loads; every entry must
    name an AttributeMap of this Flow with a non-empty, slash-free instance.
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
    locks = sorted(set(definition.lock_attributes) | set(extra_locks))
    return RPCPlan(
        _keys(locks),
        load_plan(
            definition.load_attribute_maps,
            [*definition.load_attribute_map_instances, *extra_loads],
        ),
        definition.is_transactional or bool(locks),
    )


def check_lock(
    what: str, states: Mapping[str, _State[Any]], lock: AttributeLock, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``lock`` names declared state of the right kind."""
    state = states.get(lock.name)
    if state is None:
        raise error(f"{what}: lock on undeclared state {lock.name!r}")
    if state.is_map and lock.instance is None:
        raise error(f"{what}: a lock on AttributeMap {lock.name!r} must name an instance")
    if not state.is_map and lock.instance is not None:
        raise error(f"{what}: Attribute {lock.name!r} is not an AttributeMap; lock it whole")


def check_load(
    what: str, states: Mapping[str, _State[Any]], load: Any, error: type[Exception]
) -> None:
    """Raise ``error`` unless ``load`` is an exact instance load of a declared AttributeMap."""
    if not isinstance(load, AttributeMapLoad):
        raise error(f"{what}: {load!r} is not an AttributeMap instance load (use map.load(key))")
    state = states.get(load.name)
    if state is None:
        raise error(f"{what}: load of undeclared state {load.name!r}")
    if not state.is_map:
        raise error(f"{what}: {load.name!r} is an Attribute, not an AttributeMap")


def check_declared_loads(
    what: str,
    states: Mapping[str, _State[Any]],
    maps: Iterable[Any],
    instances: Iterable[Any],
) -> None:
    """Raise DefinitionError unless every declared load names state of this Flow."""
    for m in maps:
        if not isinstance(m, AttributeMap) or states.get(m.name) is not m:
            raise DefinitionError(
                f"{what}: load of {m!r}, which is not an AttributeMap of this Flow"
            )
    for load in instances:
        check_load(what, states, load, DefinitionError)


def _keys(locks: Iterable[AttributeLock]) -> tuple[str, ...]:
    return tuple(sorted({lock.key for lock in locks}))
