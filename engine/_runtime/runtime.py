"""Shared runtime state: storage handles, locks, timers, run watchers and commit follow-up."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from uuid6 import uuid7

from engine import _codec
from engine._runtime.locks import LockManager
from engine._runtime.matches import MatchWaiters
from engine._runtime.timers import TimerHandle, Timers
from engine._storage import commits, reads
from engine._storage.blobs import BlobStore
from engine._storage.database import Database
from engine._storage.indexes import index_write
from engine._storage.records import (
    PHASE_EXECUTE,
    PHASE_WAIT_FOR,
    TIMED_OUT,
    AttributeWrite,
    CommitResult,
    NewStep,
    Snapshot,
)
from engine.attribute import _State
from engine.clock import Clock, to_micros
from engine.context import Context
from engine.errors import EngineError, InvalidStepResultError
from engine.registry import FlowSpec, Registry
from engine.step import StepMovement

if TYPE_CHECKING:
    from engine._runtime.scheduler import Scheduler

log = logging.getLogger("dexlite.runtime")


def new_id() -> str:
    """Return a new time-ordered unique ID (UUIDv7)."""
    return str(uuid7())


def state_key(name: str, instance: str) -> str:
    """Return the wire form of a state key: ``name`` or ``name/instance``."""
    return f"{name}/{instance}" if instance else name


class Runtime:
    """Everything the scheduler, the RPC executor and the client facade share."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        blobs: BlobStore,
        clock: Clock,
        step_threads: int,
    ) -> None:
        self.registry = registry
        self.db = database
        self.blobs = blobs
        self.clock = clock
        self.locks = LockManager()
        self.timers = Timers(clock)
        self.matches = MatchWaiters()
        self.step_threads = step_threads
        self.scheduler: Scheduler | None = None
        self._closed_events: dict[str, asyncio.Event] = {}
        self._timeouts: dict[str, TimerHandle] = {}

    def now_us(self) -> int:
        """Return the clock's time in integer microseconds."""
        return to_micros(self.clock.now())

    # -- values -------------------------------------------------------------------------------

    async def build_context(
        self,
        spec: FlowSpec,
        snapshot: Snapshot,
        *,
        loaded_maps: Iterable[str] = (),
        loaded_instances: Iterable[tuple[str, str]] = (),
        **identity: Any,
    ) -> Context:
        """Decode a snapshot (resolving hard-delete blobs) into a handler Context."""
        values = await self.decode_values(spec, snapshot)
        return Context(
            flow_id=snapshot.run.flow_id,
            run_id=snapshot.run.run_id,
            flow_type=spec.flow_type,
            states=spec.states,
            snapshot=values,
            loaded_maps=frozenset(loaded_maps),
            loaded_instances=frozenset(loaded_instances),
            **identity,
        )

    async def resolve_texts(self, flow_id: str, snapshot: Snapshot) -> dict[tuple[str, str], str]:
        """Return the JSON text of each stored value; deleted hard-delete values are absent."""
        texts: dict[tuple[str, str], str] = {}
        blob_keys: list[tuple[str, str]] = []
        for key, stored in snapshot.values.items():
            if stored.blob:
                blob_keys.append(key)
            elif stored.value is not None:
                texts[key] = stored.value
        if blob_keys:

            def load() -> dict[tuple[str, str], str | None]:
                return {k: self.blobs.get(flow_id, state_key(*k)) for k in blob_keys}

            for key, text in (await asyncio.to_thread(load)).items():
                if text is not None:
                    texts[key] = text
        return texts

    async def decode_values(self, spec: FlowSpec, snapshot: Snapshot) -> dict[tuple[str, str], Any]:
        """Return the snapshot's values decoded with their declared types."""
        values: dict[tuple[str, str], Any] = {}
        for (name, instance), text in (
            await self.resolve_texts(snapshot.run.flow_id, snapshot)
        ).items():
            state = spec.states.get(name)
            if state is not None:
                values[(name, instance)] = _codec.decode(state.value_type, text)
        return values

    async def stage_writes(
        self,
        spec: FlowSpec,
        flow_id: str,
        writes: Mapping[tuple[str, str], Any],
        texts: Mapping[tuple[str, str], str] | None = None,
    ) -> list[AttributeWrite]:
        """Encode staged writes (reusing ``texts`` already encoded by the Context); hard-delete
        values go to the blob store now, before commit."""
        staged: list[AttributeWrite] = []
        blob_ops: list[tuple[str, str | None]] = []
        texts = texts or {}
        for (name, instance), value in writes.items():
            state: _State[Any] = spec.states[name]
            text = (
                None
                if value is None
                else (texts.get((name, instance)) or _codec.encode(value, state.value_type))
            )
            if state.hard_delete_on_null:
                blob_ops.append((state_key(name, instance), text))
                staged.append(AttributeWrite(name, instance, None, blob=text is not None))
            else:
                # An indexed write carries its search value, committed with it.
                index = (
                    None
                    if state.index is None or state.index_key is None
                    else index_write(
                        state.index_key, state.index.type, value, state_key(name, instance)
                    )
                )
                staged.append(AttributeWrite(name, instance, text, index=index))
        if blob_ops:

            def apply() -> None:
                for key, text in blob_ops:
                    if text is None:
                        self.blobs.delete(flow_id, key)
                    else:
                        self.blobs.put(flow_id, key, text)

            await asyncio.to_thread(apply)
        return staged

    def new_steps(self, spec: FlowSpec, movements: Iterable[StepMovement]) -> list[NewStep]:
        """Validate movements against the Flow's Steps and turn them into new executions."""
        created: list[NewStep] = []
        for movement in movements:
            step_type = spec.step_classes.get(movement.step)
            if step_type is None:
                raise InvalidStepResultError(
                    f"{movement.step.__name__} is not a Step of Flow {spec.flow_type}"
                )
            target = spec.steps[step_type]
            value = _codec.validate(
                target.input_type, movement.input, what=f"input of {step_type}", strict=False
            )
            created.append(
                NewStep(
                    id=new_id(),
                    step_type=step_type,
                    input=_codec.encode(value),
                    phase=PHASE_WAIT_FOR if target.has_wait_for else PHASE_EXECUTE,
                )
            )
        return created

    def step_type_names(self, spec: FlowSpec, classes: Iterable[type[Any]]) -> list[str]:
        """Return the Step type names of ``classes`` (unknown classes select nothing)."""
        return sorted({spec.step_classes[c] for c in classes if c in spec.step_classes})

    # -- after a commit -----------------------------------------------------------------------

    def after_commit(
        self,
        result: CommitResult | None,
        flow_id: str,
        flow_type: str,
        writes: Iterable[AttributeWrite] = (),
    ) -> None:
        """Act on a commit: stop canceled attempts, start new Steps, wake run watchers and
        WaitForAttributeMatch waiters (with the commit's Attribute ``writes``)."""
        if result is None:
            return
        self.matches.notify(result.run_id, writes, closed=result.closed_status is not None)
        scheduler = self.scheduler
        assert scheduler is not None
        for step_id in result.canceled_step_ids:
            scheduler.cancel(step_id)
        for step in result.new_steps:
            scheduler.submit_new(step, run_id=result.run_id, flow_id=flow_id, flow_type=flow_type)
        if result.closed_status is not None:
            self.run_closed(result.run_id)

    def run_closed(self, run_id: str) -> None:
        """Wake everyone waiting for ``run_id`` to close."""
        handle = self._timeouts.pop(run_id, None)
        if handle is not None:
            handle.cancel()
        event = self._closed_events.pop(run_id, None)
        if event is not None:
            event.set()
        if self.scheduler is not None:
            self.scheduler.forget_run(run_id)

    def closed_event(self, run_id: str) -> asyncio.Event:
        """Return an event set when ``run_id`` closes."""
        event = self._closed_events.get(run_id)
        if event is None:
            event = self._closed_events[run_id] = asyncio.Event()
        return event

    # -- Flow timeouts --------------------------------------------------------------------------

    def schedule_timeout(self, run_id: str, flow_id: str, flow_type: str, at_us: int) -> None:
        """Time the run out at ``at_us`` unless it closes first."""

        def fire() -> None:
            self._timeouts.pop(run_id, None)
            asyncio.get_running_loop().create_task(self._time_out(run_id, flow_id, flow_type))

        self._timeouts[run_id] = self.timers.call_at(at_us / 1_000_000, fire)

    async def _time_out(self, run_id: str, flow_id: str, flow_type: str) -> None:
        try:
            writes = await self._run_timeout_handler(run_id, flow_id, flow_type)
            result = await self.db.write(
                commits.stop_run(
                    flow_id=flow_id,
                    run_id=run_id,
                    status=TIMED_OUT,
                    reason="the Flow timed out",
                    now=self.now_us(),
                    only_if_running=True,
                    writes=writes,
                )
            )
        except Exception:  # the timer task must survive a failed write
            log.exception("could not time out run %s", run_id)
            return
        self.after_commit(result, flow_id, flow_type, writes=writes)

    async def _run_timeout_handler(
        self, run_id: str, flow_id: str, flow_type: str
    ) -> list[AttributeWrite]:
        """Run the Flow's ``handle_timeout`` on a snapshot; return its staged writes.

        A handler that raises is logged and the run still times out, without its writes.
        """
        try:
            spec = self.registry.spec(flow_type)
        except EngineError:
            return []
        handler = spec.timeout_handler
        if handler is None:
            return []
        options = spec.timeout_options
        maps = [m.name for m in options.load_attribute_maps]
        exact = [(load.name, load.instance) for load in options.load_attribute_map_instances]
        snapshot = await self.snapshot(flow_id, run_id, whole_maps=maps, instances=exact)
        if snapshot is None or not snapshot.run.is_running:
            return []
        context = await self.build_context(spec, snapshot, loaded_maps=maps, loaded_instances=exact)
        try:
            if inspect.iscoroutinefunction(handler):
                await handler(context)
            else:
                await asyncio.to_thread(handler, context)
            return await self.stage_writes(
                spec, flow_id, context.staged_writes, context.staged_texts
            )
        except Exception:  # the timeout still closes the run
            log.exception("handle_timeout of %s %s raised", flow_type, flow_id)
            return []

    async def snapshot(self, flow_id: str, run_id: str | None, **loads: Any) -> Snapshot | None:
        """Read a run snapshot (see ``reads.load_snapshot``)."""
        return await reads.load_snapshot(self.db, flow_id, run_id, **loads)
