"""A small part of the shared Stream Stores: readers parked per Flow ID."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


class Waiter:
    """One event every reader of one Flow ID's Stream parks on until the next append."""

    __slots__ = ("event", "count")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.count = 0


class Waiters:
    """The parked readers of this process, by (Flow type, Stream, Flow ID).

    A wake-up sets the current event and forgets it, so readers that arrive later park on a
    fresh one; a reader woken for nothing simply reads and parks again.
    """

    def __init__(self) -> None:
        self._by_key: dict[Hashable, Waiter] = {}

    def enter(self, key: Hashable) -> Waiter:
        """Register a reader of ``key`` and return the waiter to park on."""
        waiter = self._by_key.get(key)
        if waiter is None:
            waiter = self._by_key[key] = Waiter()
        waiter.count += 1
        return waiter

    def leave(self, key: Hashable, waiter: Waiter) -> None:
        """Unregister a reader that ``enter`` returned ``waiter`` to."""
        waiter.count -= 1
        if waiter.count == 0 and self._by_key.get(key) is waiter:
            del self._by_key[key]

    def wake(self, key: Hashable) -> None:
        """Wake every reader of ``key``."""
        waiter = self._by_key.pop(key, None)
        if waiter is not None:
            waiter.event.set()

    def wake_all(self) -> None:
        """Wake every reader (a lost connection, or the store is closing)."""
        for waiter in self._by_key.values():
            waiter.event.set()
        self._by_key.clear()

    def count(self) -> int:
        """Return how many readers are registered (woken ones count until they leave)."""
        return sum(waiter.count for waiter in self._by_key.values())
