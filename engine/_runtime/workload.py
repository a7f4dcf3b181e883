"""Whether the engine has work in hand, so tests can wait for it to settle instead of sleeping.

Work counts while it can make progress on its own: a commit on its way to the database, a Step
attempt running its handler, an execution due and not yet handed out, a timer due and not yet
fired, a Flow timeout being applied. A Step waiting for a lock, a future timer or an RPC a
caller has not sent yet is not work: only time or the caller can move it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable


class Workload:
    """Counts the work in hand by kind and wakes waiters when it changes."""

    def __init__(self) -> None:
        self._busy: Counter[str] = Counter()
        self._changed: asyncio.Event | None = None
        self._probes: list[Callable[[], str | None]] = []

    def add_probe(self, probe: Callable[[], str | None]) -> None:
        """Also ask ``probe`` whether work is pending: it names the work, or returns None."""
        self._probes.append(probe)

    def enter(self, kind: str) -> None:
        """Count one piece of work of ``kind`` as started."""
        self._busy[kind] += 1

    def leave(self, kind: str) -> None:
        """Count one piece of work of ``kind`` as done."""
        self._busy[kind] -= 1
        if self._busy[kind] <= 0:
            del self._busy[kind]
        self.touch()

    def touch(self) -> None:
        """Tell waiters that work may have ended (a probe's answer may have changed)."""
        if self._changed is not None:
            self._changed.set()

    def pending(self) -> list[str]:
        """Return what is in hand, e.g. ``["2 Step attempts", "a timer due"]``; empty: idle."""
        found = [f"{count} {kind}" for kind, count in sorted(self._busy.items())]
        found.extend(answer for probe in self._probes if (answer := probe()) is not None)
        return found

    async def wait_idle(self) -> None:
        """Return once nothing is in hand and stays so while the event loop catches up."""
        while True:
            if not self.pending():
                # Callbacks already scheduled (a resolved future's waiter, a worker thread's
                # call_soon_threadsafe) may start more work: let them run, then look again.
                for _ in range(3):
                    await asyncio.sleep(0)
                if not self.pending():
                    return
                continue
            changed = self._changed = self._changed or asyncio.Event()
            changed.clear()
            if self.pending():
                await changed.wait()
