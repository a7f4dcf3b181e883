"""The registration-time record of an RPC, made by the ``@rpc`` decorator."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from engine.attribute import AttributeLock, AttributeMapLoad

if TYPE_CHECKING:
    from engine.attribute import AttributeMap
    from engine.channel import Channel, ChannelMap, ChannelMapLoad

DEFAULT_RPC_TIMEOUT = timedelta(seconds=60)
#: The attribute ``@rpc`` sets on the decorated function.
RPC_MARKER = "__dexlite_rpc__"


@dataclass(frozen=True)
class RPCDefinition:
    """The registration-time options of one RPC."""

    name: str
    function: Callable[..., Any]
    timeout: timedelta = DEFAULT_RPC_TIMEOUT
    #: False: ``timeout`` is the default, and the server's default RPC timeout applies instead.
    has_own_timeout: bool = False
    lock_attributes: tuple[AttributeLock, ...] = ()
    is_transactional: bool = False
    load_attribute_maps: tuple[AttributeMap[Any], ...] = ()
    load_attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    load_channels: tuple[Channel[Any], ...] = ()
    load_channel_maps: tuple[ChannelMap[Any], ...] = ()
    load_channel_map_instances: tuple[ChannelMapLoad, ...] = ()
    takes_input: bool = True
    input_type: Any = Any
    output_type: Any = Any

    @property
    def is_async(self) -> bool:
        """Return True for an ``async def`` handler."""
        return _is_async(self.function)

    @property
    def transactional(self) -> bool:
        """Return True when the RPC runs transactionally: declared so, or it takes locks."""
        return self.is_transactional or bool(self.lock_attributes)


@functools.lru_cache(maxsize=4096)
def _is_async(function: Callable[..., Any]) -> bool:
    # Asked on every invocation; the answer never changes for a function.
    return inspect.iscoroutinefunction(function)


def rpc_definition_of(function: Any) -> RPCDefinition | None:
    """Return the RPC definition ``@rpc`` attached to ``function``, if any."""
    found = getattr(function, RPC_MARKER, None)
    return found if isinstance(found, RPCDefinition) else None
