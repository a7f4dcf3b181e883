"""Threads for ``def`` handlers: each call answers the event loop's future directly.

A ``def`` Step or RPC handler runs off the event loop so that it may block. Going through
``ThreadPoolExecutor.submit`` and ``asyncio.wrap_future`` made two futures per call (the
concurrent one builds a Condition) and chained them with callbacks, which cost more of the
loop's time than a small handler takes. Here the loop puts the call on a queue and a thread
runs it and hands its outcome to the loop with one ``call_soon_threadsafe``.

Threads start as calls need them, up to the pool's size, and are daemons: a handler still
running when the engine closes cannot keep the process alive, as with the executor before.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


class ThreadCall(Generic[_T]):
    """One call on a handler thread: its result future and whether its thread returned."""

    __slots__ = ("_ended", "_function", "_loop", "_on_end", "future")

    def __init__(
        self,
        function: Callable[[], _T],
        loop: asyncio.AbstractEventLoop,
        on_end: Callable[[], None],
    ) -> None:
        self._function = function
        self._loop = loop
        #: The call's outcome, on the loop. Canceling it does not stop the thread.
        self.future: asyncio.Future[_T] = loop.create_future()
        self._ended = False
        self._on_end: list[Callable[[], None]] = [on_end]

    def done(self) -> bool:
        """True once the thread returned from the call (or the call never started)."""
        return self._ended

    def when_ended(self) -> asyncio.Future[None]:
        """Return a future that resolves once the thread returned from the call."""
        ended: asyncio.Future[None] = self._loop.create_future()
        if self._ended:
            ended.set_result(None)
        else:

            def resolve() -> None:
                if not ended.done():
                    ended.set_result(None)

            self._on_end.append(resolve)
        return ended

    def _run(self) -> None:
        """In the thread: run the call and hand its outcome to the loop."""
        try:
            result: Any = self._function()
            error: BaseException | None = None
        except BaseException as exc:  # the awaiting side decides what an error means
            result, error = None, exc
        self._deliver(result, error)

    def _deliver(self, result: Any, error: BaseException | None) -> None:
        # A loop closed meanwhile raises RuntimeError: nobody waits for the outcome then.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._settle, result, error)

    def _settle(self, result: Any, error: BaseException | None) -> None:
        """On the loop: record the outcome unless the waiter gave up."""
        self._ended = True
        if not self.future.done():
            if error is None:
                self.future.set_result(result)
            elif isinstance(error, asyncio.CancelledError):
                self.future.cancel()
            else:
                self.future.set_exception(error)
        for callback in self._on_end:
            callback()
        self._on_end.clear()


class HandlerThreads:
    """A pool of at most ``size`` threads running ``def`` handlers for one event loop."""

    def __init__(self, size: int, name: str) -> None:
        self._size = max(1, size)
        self._name = name
        self._queue: SimpleQueue[ThreadCall[Any] | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0  # calls queued or running; changed on the loop only
        self._closed = False

    def call(self, function: Callable[[], _T]) -> ThreadCall[_T]:
        """Run ``function`` on a handler thread, in a copy of the caller's context."""
        if self._closed:
            raise RuntimeError(f"{self._name} threads are closed")
        call = ThreadCall(
            functools.partial(contextvars.copy_context().run, function),
            asyncio.get_running_loop(),
            self._ended_one,
        )
        self._busy += 1
        if self._busy > len(self._threads) and len(self._threads) < self._size:
            self._start_thread()
        self._queue.put(call)
        return call

    async def run(self, function: Callable[[], _T]) -> _T:
        """Run ``function`` on a handler thread and return its result."""
        return await self.call(function).future

    def close(self) -> None:
        """Stop the threads once their current calls return; queued calls are canceled."""
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)

    def _ended_one(self) -> None:
        self._busy -= 1

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while (call := self._queue.get()) is not None:
            if self._closed:
                call._deliver(None, asyncio.CancelledError())
            else:
                call._run()
            del call  # its handler's arguments would live on here until the next call
