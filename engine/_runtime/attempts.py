"""One attempt of a Step execution running in this process, and when a canceled one has
really stopped (its locks are held until then, or until the grace ends)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from engine._runtime.handler_threads import ThreadCall
from engine._runtime.handoff import HandedOff
from engine._runtime.invocation import InvocationContext
from engine._storage.records import QueuedStep


@dataclass(eq=False)
class Attempt:
    """One attempt of a Step execution, running in this process."""

    step: QueuedStep
    canceled: bool = False
    task: asyncio.Task[None] | None = None
    #: A ``def`` handler's run on the thread pool: it keeps running after a cancel.
    thread: ThreadCall[Any] | None = field(default=None, repr=False)
    context: InvocationContext | None = field(default=None, repr=False)
    #: The handed-off RPC units whose writes its snapshot read: it commits only after them.
    after: tuple[HandedOff, ...] = field(default=(), repr=False)

    def cancel(self) -> None:
        """Stop the attempt; anything it returns later is discarded."""
        self.canceled = True
        if self.context is not None:
            self.context.request_cancellation()
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()


def still_running(attempt: Attempt) -> asyncio.Future[Any] | None:
    """Return what ends when a canceled attempt has really stopped: its ``def`` handler's
    thread, or its task (one that is not the caller: an attempt ended by its own commit is
    finishing). None when it has stopped already."""
    thread = attempt.thread
    if thread is not None and not thread.done():
        return thread.when_ended()
    task = attempt.task
    if task is not None and not task.done() and task is not asyncio.current_task():
        return task
    return None
