"""Flows and their RPCs."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, ClassVar, Generic, TypeVar, overload

from engine._rpc_definition import DEFAULT_RPC_TIMEOUT, RPC_MARKER, RPCDefinition
from engine.attribute import AttributeLock, AttributeMap, AttributeMapLoad, _State
from engine.channel import Channel, ChannelMap, ChannelMapLoad
from engine.errors import DefinitionError
from engine.step import Step, StepList, StepMovement, _step_class

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


class Flow(Generic[I]):
    """A durable workflow type: declare state as class attributes, Steps in ``get_steps``.

    The Flow type name is the class name. Methods decorated with :func:`rpc` are its RPCs.
    Set ``keep_change_log = False`` on a Flow class to keep no change log for its runs:
    their writes then cost nothing more, but time travel and as-of reads refuse them.
    """

    #: Runs keep the log of their changes that time travel and as-of reads restore from.
    keep_change_log: ClassVar[bool] = True

    def get_steps(self) -> StepList[I]:
        """Return the Flow's Steps; an RPC-only Flow keeps the default empty list."""
        return StepList.empty()

    def get_persistence_schema(self) -> tuple[_State[Any], ...]:
        """Return state declared outside the class body (class attributes are found anyway)."""
        return ()

    @classmethod
    def flow_type(cls) -> str:
        """Return the Flow type name (the class name)."""
        return cls.__name__

    def get_timeout_handler_options(self) -> FlowTimeoutHandlerOptions:
        """Return the AttributeMap loads of ``handle_timeout`` (none by default)."""
        return FlowTimeoutHandlerOptions()

    # A Flow may define ``handle_timeout(self, context) -> None`` (``def`` or ``async def``). It
    # runs once when the Flow's timeout fires; its Attribute writes commit together with the
    # run's close as TIMED_OUT. It is looked up with getattr so that Flows without one skip it.


@dataclass(frozen=True)
class FlowTimeoutHandlerOptions:
    """State a Flow's ``handle_timeout`` loads: whole AttributeMaps and exact instances, and
    the pending messages of Channels, whole ChannelMaps and exact ChannelMap instances."""

    load_attribute_maps: tuple[AttributeMap[Any], ...] = ()
    load_attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    load_channels: tuple[Channel[Any], ...] = ()
    load_channel_maps: tuple[ChannelMap[Any], ...] = ()
    load_channel_map_instances: tuple[ChannelMapLoad, ...] = ()


@dataclass(frozen=True)
class RPCResult(Generic[O]):
    """An RPC's output plus the Steps it starts and the Step types it cancels."""

    output: O
    next_steps: tuple[StepMovement, ...] = ()
    canceling_steps: tuple[type[Step[Any]], ...] = field(default=())

    def with_canceling_steps(self, *steps: type[Step[Any]]) -> RPCResult[O]:
        """Cancel every active Step of these types when this RPC commits."""
        return replace(self, canceling_steps=self.canceling_steps + tuple(map(_step_class, steps)))


@overload
def rpc(function: Callable[..., Any], /) -> Callable[..., Any]: ...


@overload
def rpc(
    function: None = None,
    /,
    *,
    name: str | None = None,
    timeout: timedelta | None = None,
    lock_attributes: tuple[AttributeLock, ...] = (),
    is_transactional: bool = False,
    load_attribute_maps: tuple[AttributeMap[Any], ...] = (),
    load_attribute_map_instances: tuple[AttributeMapLoad, ...] = (),
    load_channels: tuple[Channel[Any], ...] = (),
    load_channel_maps: tuple[ChannelMap[Any], ...] = (),
    load_channel_map_instances: tuple[ChannelMapLoad, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def rpc(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    timeout: timedelta | None = None,
    lock_attributes: tuple[AttributeLock, ...] = (),
    is_transactional: bool = False,
    load_attribute_maps: tuple[AttributeMap[Any], ...] = (),
    load_attribute_map_instances: tuple[AttributeMapLoad, ...] = (),
    load_channels: tuple[Channel[Any], ...] = (),
    load_channel_maps: tuple[ChannelMap[Any], ...] = (),
    load_channel_map_instances: tuple[ChannelMapLoad, ...] = (),
) -> Any:
    """Declare a Flow method ``(self, context[, input])`` as an RPC.

    Works bare (``@rpc``), empty (``@rpc()``) or with options. Locks make the RPC
    transactional; the timeout (default 60 s) bounds one handler invocation. Loads select
    AttributeMap entries and pending Channel messages the handler reads; loading does not
    consume messages, nor make the RPC transactional.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
            raise DefinitionError(f"RPC {fn.__name__}: timeout must be a positive timedelta")
        for lock in lock_attributes:
            if not isinstance(lock, AttributeLock):
                raise DefinitionError(
                    f"RPC {fn.__name__}: lock_attributes takes AttributeLock values "
                    "(use attribute.lock() or map.lock(key)), got {lock!r}"
                )
        params = list(inspect.signature(fn).parameters.values())
        if len(params) not in (2, 3) or any(
            p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params
        ):
            raise DefinitionError(
                f"RPC {fn.__name__} must take (self, context) or (self, context, input)"
            )
        definition = RPCDefinition(
            name=name or fn.__name__,
            function=fn,
            timeout=timeout or DEFAULT_RPC_TIMEOUT,
            has_own_timeout=timeout is not None,
            lock_attributes=tuple(lock_attributes),
            is_transactional=is_transactional,
            load_attribute_maps=tuple(load_attribute_maps),
            load_attribute_map_instances=tuple(load_attribute_map_instances),
            load_channels=tuple(load_channels),
            load_channel_maps=tuple(load_channel_maps),
            load_channel_map_instances=tuple(load_channel_map_instances),
            takes_input=len(params) == 3,
        )
        setattr(fn, RPC_MARKER, definition)
        return fn

    if function is not None:
        return decorate(function)
    return decorate
