"""Pieces the bundled examples' routes share: wire bases, the flowId query, starting a Flow and
retrying RPC lock conflicts.

The Flow ID's default stays on each route (``flow_id: FlowIdQuery = DEFAULT_FLOW_ID``): FastAPI
refuses a default inside ``Annotated``, and mypy accepts no computed type in an annotation, so
one alias serves every module.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Annotated, Any, TypeVar

from fastapi import Query, Request, Response, status
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from engine import (
    AttributeLock,
    Flow,
    FlowAlreadyStartedError,
    FlowClient,
    RPCLockConflictError,
    StartFlowOptions,
)

FlowIdQuery = Annotated[
    str, Query(alias="flowId", min_length=1, max_length=256, description="Target Flow ID")
]
"""The ``flowId`` query parameter naming the target Flow; each route supplies its default."""

PROBLEM: dict[str, Any] = {
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
}
"""Spread into a ``responses`` entry whose body is an ``application/problem+json`` document."""


class Wire(BaseModel):
    """Base of the examples' wire models: snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class RequestBody(Wire):
    """Base of the examples' request bodies, which reject unknown fields and take values
    strictly (``true`` is not an integer, ``"7"`` not a number), as their schema says."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StartResponse(Wire):
    """The run a start route started, or the one already running (``started`` false).

    Each example subclasses it under its own name and docstring, which OpenAPI shows as the
    schema's title and description.
    """

    flow_id: str
    run_id: str
    started: bool


_StartResponseT = TypeVar("_StartResponseT", bound=StartResponse)
_T = TypeVar("_T")

#: The retry backoff of :func:`retry_lock_conflicts`: an RPC holds a lock for milliseconds, so
#: the first retry comes soon; the cap keeps a long hold from leaving the lock idle for long.
FIRST_BACKOFF_SECONDS = 0.002
MAX_BACKOFF_SECONDS = 0.1


def client_of(request: Request) -> FlowClient:
    """Return the FlowClient the app's routes call: its own Engine, or (a front-end process,
    ``DEXLITE_REMOTE_URL``) a Client of the dexlite server that runs the Flows."""
    return request.app.state.client  # type: ignore[no-any-return]


async def start_or_report_running(
    request: Request,
    response: Response,
    model: type[_StartResponseT],
    flow: type[Flow[Any]],
    flow_id: str,
    input: Any = None,
    options: StartFlowOptions | None = None,
) -> _StartResponseT:
    """Start a run of ``flow``: 201 with ``started`` true, or 200 with the run already running.

    Args:
        request: The request whose app holds the FlowClient.
        response: The route's response, whose status code this sets.
        model: The route's start response model.
        flow: The Flow class to start.
        flow_id: The Flow ID to start it under.
        input: The start Step's input; None for a Flow without one.
        options: Start options such as initial Attributes.

    Returns:
        The started run, or the running one (its run ID is empty when the engine did not say).
    """
    try:
        result = await client_of(request).start_flow(flow, flow_id, input, options)
    except FlowAlreadyStartedError as exc:
        response.status_code = status.HTTP_200_OK
        return model(flow_id=flow_id, run_id=exc.run_id or "", started=False)
    response.status_code = status.HTTP_201_CREATED
    return model(flow_id=result.flow_id, run_id=result.run_id, started=True)


async def retry_lock_conflicts(
    request: Request,
    turn: Hashable,
    invoke: Callable[[Callable[[], None]], Awaitable[_T]],
    *,
    lock: AttributeLock,
    flow_id: str,
    operation: str,
) -> _T:
    """Await ``invoke()`` again after each RPC lock conflict, for a bounded time.

    Calls of this app that name the same ``turn`` go one at a time, in arrival order, so a lock
    passes straight from one to the next instead of going to whoever retries at the right
    instant. Conflicts with holders elsewhere (another process, a call that bypassed this
    helper) are retried with full-jitter exponential backoff. The budget is the
    ``lock_retry_seconds`` setting, waiting for the turn included. The turn passes on as soon
    as the invocation released its locks (``invoke`` passes the callback it is given to
    ``Engine.invoke_rpc`` as ``on_locks_released``), which on SQLite is before its commit: the
    next caller's RPC then reads the handed-off state.

    Args:
        request: The request whose app holds the settings and the turns.
        turn: What the calls that contend for the same locks have in common, such as
            ``("profile-upsert", flow_id, partition)``.
        invoke: Makes one RPC invocation, given the callback that passes the turn on.
        lock: The lock a timeout while waiting for the turn reports.
        flow_id: The Flow ID such a timeout reports.
        operation: The operation such a timeout reports.

    Returns:
        The output of the first invocation that got its locks.

    Raises:
        RPCLockConflictError: The budget ran out (409 with ``Retry-After``).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.app.state.settings.lock_retry_seconds
    queue = _turn_lock(request, turn)
    try:
        async with asyncio.timeout_at(deadline):
            await queue.acquire()
    except TimeoutError:
        raise RPCLockConflictError(
            lock.key, "an RPC", flow_id=flow_id, operation=operation
        ) from None
    passed = False

    def pass_turn() -> None:
        """Let the next caller go: the locks are free (their commit may still be on its way)."""
        nonlocal passed
        if not passed:
            passed = True
            queue.release()

    try:
        backoff = FIRST_BACKOFF_SECONDS
        while True:
            try:
                return await invoke(pass_turn)
            except RPCLockConflictError:
                if loop.time() + backoff > deadline:
                    raise
                # Full jitter keeps concurrent callers from retrying in lock-step.
                await asyncio.sleep(random.uniform(0, backoff))
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
    finally:
        pass_turn()


def _turn_lock(request: Request, turn: Hashable) -> asyncio.Lock:
    """Return this app's FIFO lock for ``turn``, kept only while some call holds or awaits it."""
    turns: weakref.WeakValueDictionary[Hashable, asyncio.Lock] | None = getattr(
        request.app.state, "lock_conflict_turns", None
    )
    if turns is None:
        turns = weakref.WeakValueDictionary()
        request.app.state.lock_conflict_turns = turns
    queue = turns.get(turn)
    if queue is None:
        queue = turns[turn] = asyncio.Lock()
    return queue
