"""Turns: the RPC invocations of this process that retry lock conflicts on the same keys.

RPCs never queue for locks: an invocation whose keys are held fails at once. An invocation
that asks to retry (``RPCInvokeOptions.lock_retry``) is tried again, and the ones of this
process that want the same keys take turns in the order they came, each as soon as the one
before released them, instead of retrying at random and leaving the keys to whoever tries at
the right instant. The keys often go from one to the next before the first's commit ended (a
handoff), so a Flow's serialized RPCs run at the pace of their commits, batched. A conflict
with a holder this process does not know (a Step, another process) is tried again after a
full-jitter exponential pause, within the same time limit.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from engine.errors import RPCLockConflictError

T = TypeVar("T")

#: The pauses between tries after a conflict with a holder elsewhere: an RPC holds a lock for
#: milliseconds, so the first comes soon; the cap keeps a long hold from leaving the lock idle
#: for long once it is free.
FIRST_PAUSE_SECONDS = 0.002
MAX_PAUSE_SECONDS = 0.1


class _Turn:
    """The invocations waiting for one Flow's keys, in arrival order."""

    __slots__ = ("lock", "waiting")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()  # asyncio's Lock wakes its waiters first come, first served
        self.waiting = 0


class LockTurns:
    """The turns of this process's retrying invocations, one per Flow ID and set of keys."""

    def __init__(self) -> None:
        self._turns: dict[tuple[str, tuple[str, ...]], _Turn] = {}

    async def retrying(
        self,
        flow_id: str,
        keys: tuple[str, ...],
        seconds: float,
        attempt: Callable[[Callable[[], None], Callable[[], bool]], Awaitable[T]],
    ) -> T:
        """Run ``attempt`` in its turn, again after each RPCLockConflictError, for at most
        ``seconds``; return its result, or raise the last conflict when the time is up.

        ``attempt(release, followed)`` calls ``release`` once its keys are free (the turn
        passes on then) and may ask ``followed()`` whether another invocation waits for them.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        key = (flow_id, keys)
        turn = self._turns.get(key)
        if turn is None:
            turn = self._turns[key] = _Turn()
        turn.waiting += 1
        try:
            async with asyncio.timeout_at(deadline):
                await turn.lock.acquire()
        except TimeoutError:
            raise RPCLockConflictError(
                keys[0], "an RPC", flow_id=flow_id, operation="invokeRpc"
            ) from None
        finally:
            turn.waiting -= 1
        passed = False

        def release() -> None:
            nonlocal passed
            if not passed:
                passed = True
                turn.lock.release()

        def followed() -> bool:
            return turn.waiting > 0

        try:
            pause = FIRST_PAUSE_SECONDS
            while True:
                try:
                    return await attempt(release, followed)
                except RPCLockConflictError:
                    # Only a conflict taking the keys is tried again: one found at the commit
                    # (the keys were lost meanwhile) comes after the handler ran.
                    if passed or loop.time() + pause > deadline:
                        raise
                    # Full jitter: callers elsewhere do not retry in step with this one.
                    await asyncio.sleep(random.uniform(0, pause))
                    pause = min(pause * 2, MAX_PAUSE_SECONDS)
        finally:
            release()
            if turn.waiting == 0 and not turn.lock.locked():
                self._turns.pop(key, None)
