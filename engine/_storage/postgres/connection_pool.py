"""A small pool of asyncpg connections, for statements that each take one for a moment.

asyncpg's own pool is general: every check-out and check-in runs under an ``asyncio.timeout``,
goes through a queue and a proxy object, and resets the session on release. For the engine's
one-statement transactions (``statement_pool``) that cost as much CPU as the statement's own
work on the client. Here a check-out of an idle connection is a list pop with no await; a
caller only waits, under the pool timeout, when every connection is in use.

A connection goes back to the pool only when it is known to be clean: its statement ended
(with a result or with the server's error) and it is open and outside a transaction. One that
was lost, or whose statement was interrupted (a canceled caller), is closed instead: asyncpg
may still be canceling its statement on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

#: An asyncpg Connection (asyncpg ships no type information).
Connection = Any


class PoolTimeoutError(TimeoutError):
    """Every connection stayed in use for the whole pool timeout."""


class ConnectionPool:
    """Up to ``size`` connections made by ``connect``, handed out one caller at a time; a
    caller waits at most ``wait_seconds`` for one to come free."""

    def __init__(
        self, connect: Callable[[], Awaitable[Connection]], size: int, wait_seconds: float
    ) -> None:
        self._connect = connect
        self._size = size
        self._wait_seconds = wait_seconds
        self._idle: list[Connection] = []
        #: Connections open, being opened, or promised to a waiter that will open one.
        self._count = 0
        #: Callers waiting for a connection: each gets one, or None to open its own.
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()
        self._closed = False

    async def take(self) -> Connection:
        """Return a connection for the caller's sole use; raise PoolTimeoutError when none
        came free in time."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        idle = self._idle
        while idle:
            connection = idle.pop()
            if not connection.is_closed():  # the server may have closed it while it sat here
                return connection
            self._count -= 1
        if self._count >= self._size:
            found = await self._wait()
            if found is not None:
                return found
        else:
            self._count += 1
        try:
            return await self._connect()
        except BaseException:
            self._forget()
            raise

    async def _wait(self) -> Connection | None:
        """Wait for a connection a caller gives back, or for leave to open one (None)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Connection | None] = loop.create_future()
        self._waiters.append(waiter)
        # A bare timer rather than asyncio.timeout: under load most statements wait here
        # briefly, and the timeout's own machinery cost more than the wait.
        timer = loop.call_at(loop.time() + self._wait_seconds, _expire, waiter, self._wait_seconds)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Given a connection (or leave to open one) just as it was canceled: hand it
                # on.
                found = waiter.result()
                if found is None:
                    self._forget()
                else:
                    self.give(found)
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise
        finally:
            timer.cancel()

    def give(self, connection: Connection) -> None:
        """Take back a connection whose statement ended normally."""
        if self._closed or connection.is_closed() or connection.is_in_transaction():
            self.discard(connection)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self._idle.append(connection)

    def discard(self, connection: Connection) -> None:
        """Close a connection that was lost or interrupted, and free its place."""
        connection.terminate()
        self._forget()

    def _forget(self) -> None:
        """One connection fewer: a waiter, if any, may open one in its place."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._count -= 1

    async def close(self) -> None:
        """Close the idle connections; those in use are closed as they are given back."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            self._count -= 1
            try:
                await asyncio.wait_for(connection.close(), timeout=5)
            except Exception:  # a server already gone: nothing to say goodbye to
                connection.terminate()


def _expire(waiter: asyncio.Future[Any], seconds: float) -> None:
    """Fail a take still waiting when its time is up."""
    if not waiter.done():
        waiter.set_exception(PoolTimeoutError(f"no connection came free within {seconds} s"))
