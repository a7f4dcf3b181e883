"""What a running Step sends besides its decision: Stream writes and heartbeats.

A ``def`` Step may be a generator yielding what ``Stream.write`` or ``context.heartbeat``
return; it runs on a worker thread and its writes reach the event loop through
``call_soon_threadsafe``. Buffered text writers of ``async def`` Steps are flushed by a timer
task here, on the engine's clock.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from engine._runtime.cancellation import StepCanceled
from engine._staging import FlushableWriter, StreamRef
from engine.clock import Clock
from engine.errors import DefinitionError, InvalidStepResultError
from engine.outputs import Heartbeat, StepOutput, StreamWrite
from engine.stream import Stream

log = logging.getLogger("dexlite.streams")

#: ``append(flow_type, stream, flow_id, source, text)``: hand a Step's message to the store.
Appender = Callable[[str, Stream[Any], str, str, str], None]


class StepIO:
    """What one Step invocation sends while it runs: Stream writes and heartbeats.

    Writes go to the store at once (from a worker thread through the event loop). Every write
    is an implicit heartbeat that keeps the last explicit heartbeat's details.
    """

    def __init__(
        self,
        append: Appender,
        streams: Mapping[str, Stream[Any]],
        *,
        flow_type: str,
        flow_id: str,
        step_execution_id: str,
        clock: Clock,
        is_async: bool,
    ) -> None:
        self._append = append
        self._streams = streams
        self.flow_type = flow_type
        self.flow_id = flow_id
        self.source = f"#{step_execution_id}"
        self.is_async = is_async
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._lock = threading.Lock()
        self._writers: list[FlushableWriter] = []
        self._timers: list[asyncio.Task[None]] = []
        self.heartbeat_details: Any = None
        self.last_heartbeat_at: float | None = None
        self.heartbeats = 0
        self.writes = 0

    @property
    def clock(self) -> Clock:
        """Return the engine's clock (buffered writers measure their interval on it)."""
        return self._clock

    def check(self, stream: StreamRef) -> None:
        """Raise unless ``stream`` is declared by this invocation's Flow."""
        if self._streams.get(stream.name) is not stream:
            raise DefinitionError(f"{stream!r} is not declared by Flow {self.flow_type}")

    def deliver(self, output: StepOutput) -> None:
        """Send a write or record a heartbeat, once per output."""
        with self._lock:
            if not output.mark_delivered():
                return
        if isinstance(output, StreamWrite):
            stream = self._streams.get(output.stream_name)
            if stream is None:
                raise DefinitionError(
                    f"Stream {output.stream_name!r} is not declared by Flow {self.flow_type}"
                )
            self._send(stream, output.text)
            self._beat(None, explicit=False)
        elif isinstance(output, Heartbeat):
            self._beat(output.details, explicit=True)

    def _beat(self, details: Any, *, explicit: bool) -> None:
        with self._lock:
            if explicit:
                self.heartbeat_details = details
            self.last_heartbeat_at = self._clock.now()
            self.heartbeats += 1

    def _send(self, stream: Stream[Any], text: str) -> None:
        args = (self.flow_type, stream, self.flow_id, self.source, text)
        with self._lock:
            self.writes += 1
        if threading.get_ident() == self._loop_thread:
            self._append(*args)
            return
        try:
            self._loop.call_soon_threadsafe(self._append, *args)
        except RuntimeError:  # the engine closed its loop: a best-effort write is dropped
            log.info("dropped a message of %s: the event loop is closed", self.source)

    def register_writer(self, writer: FlushableWriter) -> None:
        """Track a buffered writer; flush it on a timer when the handler is ``async def``."""
        self._writers.append(writer)
        if self.is_async:
            self._timers.append(
                self._loop.create_task(self._flush_on_timer(writer), name=f"flush-{self.source}")
            )

    async def _flush_on_timer(self, writer: FlushableWriter) -> None:
        """Emit a writer's due batches on the engine clock (``async def`` Steps only)."""
        clock = self._clock
        while not writer.closed:
            await clock.sleep(writer.next_flush_at - clock.now())
            try:
                writer.flush_if_due()
            except StepCanceled:
                return
            except Exception:  # a best-effort batch must not crash the timer task
                log.exception("could not flush a buffered Stream writer of %s", self.source)
                return

    def finish(self) -> None:
        """Flush every buffered writer and stop their timers: the invocation has ended."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        for writer in self._writers:
            try:
                writer.close()
            except StepCanceled:
                pass
            except Exception:  # a best-effort flush must not change the Step's outcome
                log.exception("could not flush a buffered Stream writer of %s", self.source)
        self._writers.clear()


def deliver_yielded(io: StepIO | None, item: Any) -> None:
    """Send what a sync generator Step yielded: StepOutputs, or an iterable of them."""
    items: Iterable[Any] = item if isinstance(item, list | tuple) else (item,)
    for one in items:
        if not isinstance(one, StepOutput):
            raise InvalidStepResultError(
                f"a sync generator Step yielded {one!r}; yield what Stream.write, "
                "context.heartbeat or a buffered writer returned"
            )
        if io is not None:
            io.deliver(one)


class GeneratorContext(Protocol):
    """What driving a generator Step needs of its Context."""

    @property
    def step_io(self) -> StepIO | None: ...

    def is_cancellation_requested(self) -> bool: ...


def run_generator(fn: Callable[..., Any], context: GeneratorContext, value: Any) -> Any:
    """Drive a sync generator handler in a worker thread; return its ``return`` value."""
    generator = fn(context, value)
    try:
        while True:
            item = next(generator)
            deliver_yielded(context.step_io, item)
            if context.is_cancellation_requested():
                generator.close()
                raise StepCanceled()
    except StopIteration as stop:
        return stop.value


def is_generator_handler(fn: Any) -> bool:
    """Return True for a sync generator function (bound methods included)."""
    return inspect.isgeneratorfunction(fn)
