"""The bounds every engine call shares, and their checks, in one place.

A page is 1 to ``MAX_PAGE_SIZE`` items, a long poll waits 0 to ``MAX_WAIT_SECONDS``, and an RPC
retries lock conflicts for at most ``MAX_LOCK_RETRY``; the server's settings can lower these
for HTTP callers, never raise them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engine.errors import InvalidArgumentError

MAX_PAGE_SIZE = 1000
"""The largest page of any listing (pageSize) and of a travel by query (limit)."""
MAX_WAIT_SECONDS = 60.0
"""The longest wait, in seconds, of any long poll (waitSeconds)."""
MAX_LOCK_RETRY = timedelta(seconds=60)
"""The longest an RPC invocation may keep retrying lock conflicts (lockRetry)."""


def check_page_size(page_size: Any, field: str = "pageSize", largest: int = MAX_PAGE_SIZE) -> None:
    """Raise InvalidArgumentError naming ``field`` unless ``page_size`` is an int from 1 to
    ``largest`` (a Boolean is not a number here)."""
    if (
        isinstance(page_size, bool)
        or not isinstance(page_size, int)
        or not 1 <= page_size <= largest
    ):
        raise InvalidArgumentError(f"{field} must be between 1 and {largest}", field=field)


def check_wait_seconds(wait_seconds: Any) -> None:
    """Raise InvalidArgumentError unless ``wait_seconds`` is a number from 0 to 60."""
    if (
        isinstance(wait_seconds, bool)
        or not isinstance(wait_seconds, int | float)
        or not 0 <= wait_seconds <= MAX_WAIT_SECONDS
    ):
        raise InvalidArgumentError(
            f"waitSeconds must be between 0 and {MAX_WAIT_SECONDS:g}", field="waitSeconds"
        )


def check_lock_retry(lock_retry: Any) -> float:
    """Return ``lock_retry`` in seconds, or raise InvalidArgumentError naming ``lockRetry``
    unless it is a duration above 0 and at most ``MAX_LOCK_RETRY``."""
    if not isinstance(lock_retry, timedelta) or not timedelta(0) < lock_retry <= MAX_LOCK_RETRY:
        raise InvalidArgumentError(
            f"lockRetry must be a duration above 0 and at most "
            f"{MAX_LOCK_RETRY.total_seconds():g} s, got {lock_retry!r}",
            field="lockRetry",
        )
    return lock_retry.total_seconds()
