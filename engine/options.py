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
    """What an application adds to one RPC invocation: AttributeMap instance loads and locks,
    ChannelMap instance loads (``map.load_messages(key)``), and how long to retry lock
    conflicts.

    The loads and locks are unioned, sorted and de-duplicated with the RPC's registered
    options; they cannot replace or clear them.

    ``lock_retry``: an invocation whose locks are held fails at once with RPCLockConflictError
    (RPCs never queue for locks). With ``lock_retry`` the engine tries it again until it gets
    them, for at most that long: the invocations of this process that retry for the same keys
    take turns in the order they came, each as soon as the one before released them (which
    may be before its commit ended: a handoff), and a conflict with a holder elsewhere (a
    Step, another process) is tried again after a jittered, growing pause. When the time is
    up the invocation fails with the last RPCLockConflictError. Up to 60 seconds.
    """

    load_attribute_map_instances: tuple[AttributeMapLoad, ...] = ()
    lock_attribute_map_instances: tuple[AttributeLock, ...] = ()
    load_channel_map_instances: tuple[ChannelMapLoad, ...] = ()
    lock_retry: timedelta | None = None


class MatchOperator(enum.StrEnum):
    """The comparison of a WaitForAttributeMatch call (GT, GE, LT, LE: int and double only)."""

    EQ = "EQ"
    NE = "NE"
    GT = "GT"
    GE = "GE"
    LT = "LT"
    LE = "LE"
