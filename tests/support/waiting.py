"""Waiting for a condition in tests: the one place that polls.

Prefer events (``engine.testing.settle``, a ManualClock, an ``asyncio.Event`` a handler sets);
poll only what has no event to wait on, such as a server in another process.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: How long a condition may take to hold. A passing wait returns as soon as it holds; this is
#: only how long a stalled one takes to fail, and `make test` runs both halves side by side on
#: two cores, where a Step's first commit once took over 10 s to come.
DEFAULT_TIMEOUT = 30.0
INTERVAL = 0.01


async def eventually(
    check: Callable[[], Awaitable[T] | T],
    *,
    within: float = DEFAULT_TIMEOUT,
    interval: float = INTERVAL,
    what: str = "the condition",
) -> T:
    """Call ``check`` until it returns a truthy value (not raising AssertionError); return it.

    ``check`` may be a plain or an async function. After ``timeout`` seconds the last
    AssertionError is raised again, or an AssertionError naming ``what``.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result  # type: ignore[return-value]
            failure: AssertionError | None = None
        except AssertionError as exc:
            failure = exc
        if time.monotonic() >= deadline:
            if failure is not None:
                raise failure
            raise AssertionError(f"{what} did not hold within {within:g} s")
        await asyncio.sleep(interval)


def wait_until(
    check: Callable[[], T],
    *,
    within: float = DEFAULT_TIMEOUT,
    interval: float = INTERVAL,
    what: str = "the condition",
) -> T:
    """The same as :func:`eventually`, for code outside an event loop (subprocesses)."""
    deadline = time.monotonic() + within
    while True:
        try:
            result = check()
            if result:
                return result
            failure: AssertionError | None = None
        except AssertionError as exc:
            failure = exc
        if time.monotonic() >= deadline:
            if failure is not None:
                raise failure
            raise AssertionError(f"{what} did not hold within {within:g} s")
        time.sleep(interval)


async def until_step_waiting(client: Any, flow_id: str) -> None:
    """Return once a Step of ``flow_id`` has committed the start of a wait (STEP_WAITING in
    its history, over HTTP): its wait_for has ended. Its wait_for's locks go a moment later,
    when the engine has the commit's answer (a reader may see the commit first): a call that
    needs them goes through :func:`once_step_locks_released`."""

    async def committed() -> bool:
        response = await client.get(f"/api/v1/flows/{flow_id}/history")
        return any(e["eventType"] == "STEP_WAITING" for e in response.json()["events"])

    await eventually(committed, what=f"a Step of {flow_id} to begin its wait")


async def once_step_locks_released(call: Callable[[], Awaitable[Any]]) -> Any:
    """Make the HTTP request ``call`` until it is not refused for a lock a Step holds (409
    RPC_LOCK_CONFLICT naming a Step), and return its response: the lock's release is the
    event, and the request itself is the only way to see it over HTTP."""

    async def attempt() -> Any:
        response = await call()
        refused = response.status_code == 409 and "locked by a Step" in response.text
        return None if refused else response

    return await eventually(attempt, what="the Step's locks released")
