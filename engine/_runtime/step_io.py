"""What a running Step sends besides its decision: Stream writes and heartbeats.

A ``def`` Step may be a generator yielding what ``Stream.write`` or ``context.heartbeat``
return; it runs on a worker thread and its writes reach the event loop through
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from engine._runtime.signals import StepCanceled
from engine.errors import DefinitionError, InvalidStepResultError
from engine.stream import Heartbeat, StepOutput, Stream, StreamWrite

if TYPE_CHECKING:
    from engine._streams import StreamService
    from engine.context import Context
    from engine.stream import BufferedTextWriter

log = logging.getLogger("dexlite.streams")


class StepIO:
    """What one Step invocation sends while it runs: Stream writes and heartbeats.

    Writes go to the store at once (from a worker thread through the event loop). Every write
    is an implicit heartbeat that keeps the last explicit heartbeat's details.
    """

    def __init__(
        self,
        service: StreamService,
        streams: Mapping[str, Stream[Any]],
        flow_type: str,
        flow_id: str,
        step_execution_id: str,
        *,
        is_async: bool,
    ) -> None:
        self._service = service
        self._streams = streams
        self.flow_type = flow_type
        self.flow_id = flow_id
        self.source = f"#{step_execution_id}"
        self.is_async = is_async
        self.clock = service.clock
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._lock = threading.Lock()
        self._writers: list[BufferedTextWriter] = []
        self.heartbeat_details: Any = None
        self.last_heartbeat_at: float | None = None
        self.heartbeats = 0
        self.writes = 0

    def check(self, stream: Stream[Any]) -> None:
        """Raise unless ``stream`` is declared by this invocation's Flow."""
        if self._streams.get(stream.name) is not stream:
            raise DefinitionError(f"{stream!r} is not declared by Flow {self.flow_type}")

    def deliver(self, output: StepOutput) -> None:
        """Send a write or record a heartbeat, once per output."""
        with self._lock:
            if output._delivered:
                return
            output._delivered = True
        if isinstance(output, StreamWrite):
            self.check(output.stream)
            self._send(output)
            self._beat(None, explicit=False)
        elif isinstance(output, Heartbeat):
            self._beat(output.details, explicit=True)

    def _beat(self, details: Any, *, explicit: bool) -> None:
        with self._lock:
            if explicit:
                self.heartbeat_details = details
            self.last_heartbeat_at = self.clock.now()
            self.heartbeats += 1

    def _send(self, output: StreamWrite) -> None:
        args = (self.flow_type, output.stream, self.flow_id, self.source, output.text)
        with self._lock:
            self.writes += 1
        if threading.get_ident() == self._loop_thread:
            self._service.append_from_step(*args)
            return
        try:
            self._loop.call_soon_threadsafe(self._service.append_from_step, *args)
        except RuntimeError:  # the engine closed its loop: a best-effort write is dropped
            log.info("dropped a message of %s: the event loop is closed", self.source)

    def register_writer(self, writer: BufferedTextWriter) -> asyncio.Task[None] | None:
        """Track a buffered writer; start its timer when the handler is ``async def``."""
        self._writers.append(writer)
        if not self.is_async:
            return None
        return self._loop.create_task(writer.run_timer(), name=f"stream-flush-{self.source}")

    def finish(self) -> None:
        """Flush every buffered writer: the invocation has ended."""
        for writer in self._writers:
            try:
                writer.close()
            except StepCanceled:
                pass
            except Exception:  # a best-effort flush must not change the Step's outcome
                log.exception("could not flush a buffered Stream writer of %s", self.source)
        self._writers.clear()


def deliver_yielded(context: Context, item: Any) -> None:
    """Send what a sync generator Step yielded: StepOutputs, or an iterable of them."""
    io: StepIO | None = getattr(context, "step_io", None)
    items: Iterable[Any] = item if isinstance(item, list | tuple) else (item,)
    for one in items:
        if not isinstance(one, StepOutput):
            raise InvalidStepResultError(
                f"a sync generator Step yielded {one!r}; yield what Stream.write, "
                "context.heartbeat or a buffered writer returned"
            )
        if io is not None:
            io.deliver(one)


def run_generator(fn: Callable[..., Any], context: Context, value: Any) -> Any:
    """Drive a sync generator handler in a worker thread; return its ``return`` value."""
    generator = fn(context, value)
    try:
        while True:
            item = next(generator)
            deliver_yielded(context, item)
            if context.is_cancellation_requested():
                generator.close()
                raise StepCanceled()
    except StopIteration as stop:
        return stop.value


def is_generator_handler(fn: Any) -> bool:
    """Return True for a sync generator function (bound methods included)."""
    return inspect.isgeneratorfunction(fn)
