"""Durable waits on Channel and SubFlow conditions: a Wait's spec, and completing it.

A Step whose Wait has Channel or SubFlow conditions is parked here after the commit that
records the wait (and starts its children). Its wait is tried (a commit unit that decides
readiness under the run's lock and consumes in the same transaction) when it begins, whenever
a commit publishes to one of its queues or closes one of its children, and at each of its
Timers' deadlines. Nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine._runtime.committer import Committer
from engine._runtime.ports import TimerHandle, TimerQueue
from engine._runtime.workload import Workload
from engine._storage import durable_waits, units
from engine._storage.records import StartRequest, WaitingStep
from engine.channel import ChannelCondition, _Channel
from engine.clock import Clock, to_micros
from engine.errors import DefinitionError, InvalidStepResultError
from engine.subflow import SubFlowCondition
from engine.timer import Timer
from engine.wait import Wait

log = logging.getLogger("dexlite.waits")

TRIES = "durable waits being tried"


def wait_spec(
    wait: Wait,
    channels: Mapping[str, _Channel[Any]],
    started_at: int,
    children: Sequence[StartRequest] = (),
) -> dict[str, Any]:
    """Return the JSON spec of ``wait``, begun at ``started_at`` (µs).

    ``children`` are the start requests of the wait's SubFlows, by index (argument order,
    depth first). Raises InvalidStepResultError when a condition names a Channel the Flow does
    not declare.
    """
    indexes = itertools.count()

    def node(condition: Any) -> dict[str, Any]:
        if isinstance(condition, SubFlowCondition):
            index = next(indexes)
            child = children[index]
            return {"subflow": index, "flowType": child.flow_type, "flowId": child.flow_id}
        if isinstance(condition, Timer):
            return {"timer": to_micros(condition.duration.total_seconds())}
        if isinstance(condition, ChannelCondition):
            channel = condition.channel
            if channels.get(channel.name) is not channel:
                raise InvalidStepResultError(
                    f"the wait condition on {channel!r} names a Channel this Flow does not declare"
                )
            if channel.is_map != bool(condition.instance):
                raise DefinitionError(f"a condition on {channel!r} needs an instance key")
            return {
                "channel": channel.name,
                "instance": condition.instance,
                "atLeast": condition.at_least,
                "atMost": condition.at_most,
            }
        assert isinstance(condition, Wait)
        return {"mode": condition.mode.value, "conditions": [node(c) for c in condition.conditions]}

    return {"startedAt": started_at, "root": node(wait)}


@dataclass(eq=False)
class _Watched:
    waiting: WaitingStep
    queues: set[tuple[str, str]]
    children: set[str]
    timers: list[TimerHandle] = field(default_factory=list)


class ChannelWaits:
    """The Step executions of this process waiting on Channel or SubFlow conditions."""

    def __init__(
        self, *, committer: Committer, timers: TimerQueue, workload: Workload, clock: Clock
    ) -> None:
        self._committer = committer
        self._timers = timers
        self._workload = workload
        self._clock = clock
        self._watched: dict[str, _Watched] = {}
        self._by_queue: dict[tuple[str, str, str], set[str]] = {}
        self._by_child: dict[str, set[str]] = {}
        self._trying: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def watch(self, waiting: WaitingStep) -> None:
        """Watch a Step execution that began (or, after a restart, still has) a durable wait;
        try it at once, since its messages may already be there."""
        step_id = waiting.step.id
        self.forget(step_id)
        children = {n["runId"] for n in durable_waits.subflows(waiting.spec) if n.get("runId")}
        watched = _Watched(waiting, durable_waits.queues(waiting.spec), children)
        self._watched[step_id] = watched
        for channel, instance in watched.queues:
            self._by_queue.setdefault((waiting.step.run_id, channel, instance), set()).add(step_id)
        for child in children:
            self._by_child.setdefault(child, set()).add(step_id)
        now = to_micros(self._clock.now())
        for deadline in durable_waits.deadlines(waiting.spec):
            if deadline > now:
                handle = self._timers.call_at(deadline / 1_000_000, lambda: self._try(step_id))
                watched.timers.append(handle)
        self._try(step_id)

    def published(self, run_id: str, queues: Iterable[tuple[str, str]]) -> None:
        """Try the waits on queues a commit just published to."""
        for channel, instance in queues:
            for step_id in list(self._by_queue.get((run_id, channel, instance), ())):
                self._try(step_id)

    def published_any(self, run_id: str) -> None:
        """Try every wait of ``run_id`` on a queue (a commit elsewhere published to some)."""
        for (run, _channel, _instance), step_ids in list(self._by_queue.items()):
            if run == run_id:
                for step_id in list(step_ids):
                    self._try(step_id)

    def closed(self, run_id: str) -> None:
        """Try the waits on a child run a commit just closed."""
        for step_id in list(self._by_child.get(run_id, ())):
            self._try(step_id)

    def forget(self, step_id: str) -> None:
        """Stop watching an execution whose wait completed, or which ended."""
        watched = self._watched.pop(step_id, None)
        if watched is None:
            return
        for handle in watched.timers:
            handle.cancel()
        run_id = watched.waiting.step.run_id
        for channel, instance in watched.queues:
            ids = self._by_queue.get((run_id, channel, instance))
            if ids is not None:
                ids.discard(step_id)
                if not ids:
                    del self._by_queue[(run_id, channel, instance)]
        for child in watched.children:
            ids = self._by_child.get(child)
            if ids is not None:
                ids.discard(step_id)
                if not ids:
                    del self._by_child[child]

    async def close(self) -> None:
        """Stop trying waits; they are tried again on the next start."""
        for step_id in list(self._watched):
            self.forget(step_id)
        tasks = list(self._trying.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    def _try(self, step_id: str) -> None:
        if step_id not in self._watched:
            return
        if step_id in self._trying:
            self._again.add(step_id)  # a commit published while the last try was under way
            return
        self._workload.enter(TRIES)
        task = asyncio.get_running_loop().create_task(self._tries(step_id))
        self._trying[step_id] = task

    async def _tries(self, step_id: str) -> None:
        try:
            while (watched := self._watched.get(step_id)) is not None:
                self._again.discard(step_id)
                unit = units.complete_wait(
                    step=watched.waiting.step, now=to_micros(self._clock.now())
                )
                result = await self._committer.commit(unit)
                if result.value is None:
                    self.forget(step_id)  # it ended or was canceled meanwhile
                if step_id not in self._again:
                    return
        except Exception:  # a failed try must not stop others; the next publish tries again
            log.exception("could not try the wait of Step %s", step_id)
        finally:
            self._trying.pop(step_id, None)
            self._workload.leave(TRIES)
