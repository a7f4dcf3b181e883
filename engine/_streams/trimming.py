"""Background trimming, the same for every Stream Store: one job per Stream, and room made
in the whole store by trimming the largest Streams.

A store supplies two primitives: ``trim_slice`` removes up to a number of a Stream's oldest
messages while its usage is above a target (one transaction, script or loop step, so appends
are never held up for long), and ``usages`` lists the Streams' usages. :class:`Trimming`
decides the rest: a request for a Stream that is being trimmed only lowers its target, at most
``workers`` Streams are trimmed at once, and a store-wide shortage cuts the largest Streams down
to one common level (:func:`plan_room`), with one such planner running at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger("dexlite.streams")

K = TypeVar("K")
#: A Stream: (Flow type, Stream name).
Key = tuple[str, str]
#: Removes up to ``limit`` oldest messages while usage is above ``target``; answers whether
#: usage is still above it with messages left.
TrimSlice = Callable[[str, str, int, int], Awaitable[bool]]
#: Lists ((Flow type, Stream), usage) of the largest Streams.
Usages = Callable[[], Awaitable[list[tuple[Key, int]]]]

#: Messages one slice removes: short enough not to hold up appends.
TRIM_SLICE = 512


def plan_room(usages: list[tuple[K, int]], need: int) -> dict[K, int]:
    """Return trim targets that free ``need`` bytes from the largest Streams.

    The largest Streams are cut down to one common level, as high as frees enough: with
    usages 600 and 300 and 150 bytes needed, the first is trimmed to 450 and the second kept.
    """
    ordered = sorted((usage, i) for i, (_, usage) in enumerate(usages) if usage > 0)[::-1]
    chosen: list[int] = []
    above = 0  # the usage of the chosen Streams
    for position, (usage, i) in enumerate(ordered):
        chosen.append(i)
        above += usage
        below = ordered[position + 1][0] if position + 1 < len(ordered) else 0
        if above - len(chosen) * below >= need:
            level = max(0, (above - need) // len(chosen))
            return {usages[j][0]: level for j in chosen}
    return {usages[j][0]: 0 for j in chosen}


class Trimming:
    """The trim jobs of one Stream Store in this process."""

    def __init__(
        self,
        *,
        workers: int,
        trim_slice: TrimSlice,
        usages: Usages,
        on_done: Callable[[], None],
        kind: str,
        unreachable: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._slots = asyncio.Semaphore(workers)
        self._trim_slice = trim_slice
        self._usages = usages
        # Told when a job ends, so whoever waits for the engine to settle looks again.
        self._on_done = on_done
        self._kind = kind
        self._unreachable = unreachable
        #: Each Stream's target while its job runs.
        self._targets: dict[Key, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._making_room = False
        self._closed = False
        #: How many trim jobs were started (tests and operators).
        self.started = 0

    def running(self) -> int:
        """Return how many trim jobs and room planners are under way."""
        return len(self._tasks)

    def trimming(self, flow_type: str, name: str) -> bool:
        """Return True while a job trims the Stream."""
        return (flow_type, name) in self._targets

    def request(self, flow_type: str, name: str, target: int) -> None:
        """Bring the Stream's usage down to ``target``: start its job, or lower its target."""
        target = max(0, target)
        key = (flow_type, name)
        current = self._targets.get(key)
        if current is not None:
            self._targets[key] = min(current, target)
            return
        if self._closed:
            return
        self._targets[key] = target
        self.started += 1
        self._start(self._trim(key), f"stream-trim-{flow_type}-{name}")

    def make_room(self, need: int) -> None:
        """Trim the largest Streams until ``need`` bytes are free (one planner at a time)."""
        if self._making_room or self._closed:
            return
        self._making_room = True
        self._start(self._plan(need), "stream-make-room")

    async def close(self) -> None:
        """Stop every job and wait for them to unwind (they may hold connections)."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _start(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._on_done()

    async def _trim(self, key: Key) -> None:
        try:
            async with self._slots:
                while not self._closed:
                    target = self._targets[key]
                    more = await self._trim_slice(key[0], key[1], target, TRIM_SLICE)
                    # Done unless a lower target arrived while that slice ran.
                    if not more and self._targets[key] >= target:
                        break
        except self._unreachable as exc:
            # Best effort: the next append past the trigger, or refused, asks again.
            log.warning(
                "trimming %s stopped: the %s store is unreachable: %s", key, self._kind, exc
            )
        except Exception:
            log.exception("trimming Stream %s of the %s store failed", key, self._kind)
        finally:
            del self._targets[key]

    async def _plan(self, need: int) -> None:
        try:
            for (flow_type, name), target in plan_room(await self._usages(), need).items():
                self.request(flow_type, name, target)
        except self._unreachable as exc:
            log.warning("could not plan trimming: the %s store is unreachable: %s", self._kind, exc)
        except Exception:
            log.exception("planning the trimming of the %s store failed", self._kind)
        finally:
            self._making_room = False
