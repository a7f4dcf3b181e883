"""IDs and names callers pass or the engine makes: checks, new IDs, key forms, stored times."""

from __future__ import annotations

import itertools
import os
import re
import threading
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from uuid6 import uuid7

from engine.errors import InvalidArgumentError

MAX_ID_LENGTH = 256


def new_id() -> str:
    """Return a new time-ordered unique ID (UUIDv7)."""
    return str(uuid7())


def _process_prefix() -> str:
    return f"{uuid7().hex[:16]}{os.urandom(4).hex()}"


_owner_prefix = _process_prefix()
_owner_numbers = itertools.count(1)
# A forked child must not hand out its parent's tokens.
os.register_at_fork(after_in_child=lambda: _reset_owner_tokens())


def _reset_owner_tokens() -> None:
    global _owner_prefix, _owner_numbers
    _owner_prefix, _owner_numbers = _process_prefix(), itertools.count(1)


def new_owner_token() -> str:
    """Return a token unique to this call across processes: who holds a lock, for how long.

    A lock's holder only needs a name no other holder has. A UUIDv7 costs two reads of the
    system's random source, a good part of a small RPC's time; this is one random prefix
    per process and a counter.
    """
    return f"{_owner_prefix}-{next(_owner_numbers)}"


_ordered_lock = threading.Lock()
_last_ordered = 0


def new_ordered_id() -> str:
    """Return a UUIDv7 greater than every one this function returned before in this process.

    Channel message IDs come from here, in commit order, so the IDs of one Channel increase
    in its FIFO order.
    """
    global _last_ordered
    with _ordered_lock:
        value = uuid7().int
        if value <= _last_ordered:
            value = _last_ordered + 1
        _last_ordered = value
    return str(UUID(int=value))


def state_key(name: str, instance: str) -> str:
    """Return the wire form of a state key: ``name`` or ``name/instance``."""
    return f"{name}/{instance}" if instance else name


#: What an ID may not hold: a slash or a control character.
_NOT_IN_ID = re.compile(r"[\x00-\x1f/]")


def step_id_prefix(run_id: str, step_type: str) -> str:
    """Return what every execution ID of ``step_type`` in run ``run_id`` starts with: the
    internal Step ID is ``<run ID>:<StepType>-<n>``, n counting that type's executions in the
    run from 1 (a one-statement commit appends the n it counts to this prefix)."""
    return f"{run_id}:{step_type}-"


def step_id(run_id: str, step_type: str, n: int) -> str:
    """Return the internal ID of the ``n``-th execution of ``step_type`` in run ``run_id``."""
    return f"{step_id_prefix(run_id, step_type)}{n}"


def execution_id(step_id: str) -> str:
    """Return the Step execution ID callers see (``<StepType>-<n>``) of an internal Step ID."""
    _, sep, tail = step_id.partition(":")
    return tail if sep else step_id


def check_id(value: Any, what: str) -> str:
    """Return ``value`` if it is a usable Flow, run or request ID."""
    if not isinstance(value, str) or not value or value.isspace():
        raise InvalidArgumentError(f"{what} must be a non-blank string", field=what)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgumentError(f"{what} must be at most {MAX_ID_LENGTH} characters", field=what)
    if _NOT_IN_ID.search(value):
        raise InvalidArgumentError(f"{what} must not contain '/' or control characters", field=what)
    check_unicode(value, what)
    return value


def check_unicode(value: str, what: str) -> str:
    """Return ``value`` unless it holds lone surrogates, which no database can store."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            f"{what} must be valid Unicode text (no lone surrogates)", field=what
        ) from None
    return value


def check_text(value: str, what: str) -> str:
    """Return ``value`` if every database can store it: valid Unicode, and no U+0000
    (PostgreSQL text holds none)."""
    if "\x00" in value:
        raise InvalidArgumentError(
            f"{what} must not contain the NUL character (U+0000)", field=what
        )
    return check_unicode(value, what)


#: History events are numbered from 1 within their run; a number fits 64 bits.
MAX_EVENT_NUMBER = 2**63 - 1


def check_event_number(value: Any, what: str) -> int:
    """Return ``value`` if it is a history event number: a positive 64-bit integer."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EVENT_NUMBER:
        raise InvalidArgumentError(f"{what} must be a positive event number", field=what)
    return value


def to_datetime(us: int | None) -> datetime | None:
    """Convert stored microseconds to an aware UTC datetime."""
    return None if us is None else moment(us)


def moment(us: int) -> datetime:
    """Convert stored microseconds that are never null to an aware UTC datetime."""
    return datetime.fromtimestamp(us / 1_000_000, UTC)


def to_rfc3339(us: int | None) -> str | None:
    """Return stored microseconds as an RFC 3339 UTC string (``...Z``), as the API writes
    times, for the times a history event's details carry."""
    when = to_datetime(us)
    return None if when is None else when.isoformat().replace("+00:00", "Z")
