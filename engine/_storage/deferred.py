"""Writes a commit unit leaves to its end, where its database may send them together.

A unit's history events and change-log rows, and the close of a Step execution the unit does
not read again, need no answer before the unit ends. A database that pays a round trip per
statement (PostgreSQL) puts a :class:`Deferred` on the unit's connection before the unit runs;
the unit's parts then add their rows to it instead of writing them, and the database writes
them all at the end, in one statement (``postgres/deferred_flush.py``). Where statements cost
microseconds (SQLite's writer runs in this process) there is none, and each part writes at
once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

#: ``conn.info`` key of the running unit's deferred writes.
DEFERRED = "dexlite.deferred"


class Deferred:
    """The rows one unit leaves to its end, in the order it gave them."""

    __slots__ = ("closes", "history", "log")

    def __init__(self) -> None:
        #: History rows (``tables.history`` columns but ``id``): their order gives their IDs.
        self.history: list[dict[str, Any]] = []
        #: Change-log rows (``tables.change_log`` columns).
        self.log: list[dict[str, Any]] = []
        #: Step executions to close: ``id``, ``state``, ``phase``, ``closed_at``,
        #: ``closed_commit``, ``is_completion``, ``output``, ``error_type``, ``error_message``.
        self.closes: list[dict[str, Any]] = []


def deferred_of(conn: Connection) -> Deferred | None:
    """Return where the unit running on ``conn`` leaves its last writes, or None when each
    is written at once."""
    found: Deferred | None = conn.info.get(DEFERRED)
    return found
