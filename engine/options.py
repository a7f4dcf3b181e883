"""Per-call options of the client API."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from engine._enums import IdReusePolicy
from engine.attribute import AttributeLock, AttributeMapLoad
from engine.channel import ChannelMapLoad


class StopType(enum.StrEnum):
    """How stopFlow closes a run."""

    CANCEL = "CANCEL"
    TERMINATE = "TERMINATE"
    FAIL = "FAIL"


@dataclass(frozen=True)
class StartFlowOptions:
    """Options of one Flow start.

    ``initial_attributes`` maps ``"name"`` or ``"map/instance"`` to a value; they commit with
    the start, so the first Step sees them. ``request_id`` makes the start idempotent.
    ``start_delay``: the run exists at once (running, readable, searchable, taking RPCs) and
    its start Step runs once the delay has passed, durably.
    """

    initial_attributes: Mapping[str, Any] = field(default_factory=dict)
    id_reuse_policy: IdReusePolicy = IdReusePolicy.ALLOW_DUPLICATE
    timeout: timedelta | None = None
    request_id: str | None = None
    ignore_already_started: bool = False
    start_delay: timedelta | None = None


@dataclass(frozen=True)
class RPCInvokeOptions:
    """Instance loads and locks an application adds to one RPC invocation: AttributeMap
    instance loads and locks, and ChannelMap instance loads (``map.load_messages(key)``).

    They are unioned, sorted and de-duplicated with the RPC's registered options; they cannot
    replace or clear them.
    """

    load_attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    lock_attribute_map_instances: tuple[AttributeLock, ...] = ()
    load_channel_map_instances: tuple[ChannelMapLoad, ...] = ()


class MatchOperator(enum.StrEnum):
    """The comparison of a WaitForAttributeMatch call (GT, GE, LT, LE: int and double only)."""

    EQ = "EQ"
    NE = "NE"
    GT = "GT"
    GE = "GE"
    LT = "LT"
    LE = "LE"
