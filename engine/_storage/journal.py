"""Commit numbers, history and the change log of one commit unit.

Every unit that changes a run gives that change the run's next commit number
(``runs.commit_seq``): the statement that locks the run takes it (``rows.lock_run``), or,
for a run locked otherwise, one UPDATE on first need. History
events, Step executions' transitions and the change log's rows carry it, so the state of a run
right after any of its commits can be read back: the Attribute values, pending Channel
messages and pending Step executions of that moment (time travel, as-of reads).

The unit's history events and change-log rows are kept here and written when the unit ends,
each table in one statement. ``units.journaled`` gives a unit its journal; a row-level
helper reaches it through the connection (:func:`journal`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, insert

from engine._storage import tables as t
from engine._storage.deferred import deferred_of
from engine._storage.prepared import Prepared
from engine._storage.unit_statements import _TAKE_RUN

#: ``conn.info`` key of the running unit's journal.
JOURNAL = "dexlite.journal"

#: Change-log kinds: an Attribute write, a Channel publication, a deletion, a consumption.
WRITE, PUBLISH, DELETE, CONSUME = "W", "P", "D", "C"

_INSERT_HISTORY = Prepared(insert(t.history))
_INSERT_LOG = Prepared(insert(t.change_log))


class Journal:
    """The commit numbers one unit took, and the history and log rows it will write."""

    __slots__ = ("_history", "_log", "_runs", "external")

    def __init__(self, *, external: bool = False) -> None:
        #: The unit applies what came from outside the Flow (an RPC, a client's call): its
        #: writes, publications and deletions are logged as external (a travel reapplies them).
        self.external = external
        self._runs: dict[str, list[Any]] = {}  # run ID -> [commit number, logged, next pos]
        self._history: list[dict[str, Any]] = []
        self._log: list[dict[str, Any]] = []

    def numbered(self, run_id: str) -> bool:
        """Return True once the run has this unit's commit number."""
        found = self._runs.get(run_id)
        return found is not None and found[0] is not None

    def known(self, run_id: str, logged: bool) -> None:
        """Note whether a run the unit locked keeps a change log (before it takes a number)."""
        if run_id not in self._runs:
            self._runs[run_id] = [None, logged, 0]

    def number(self, conn: Connection, run_id: str) -> int:
        """Return this unit's commit number for ``run_id`` (the caller locked the run).

        A run that keeps no change log takes none (0): nothing reads its commit numbers.
        """
        found = self._runs.get(run_id)
        if found is None or found[0] is None:
            if found is not None and not found[1]:
                found[0] = 0
                return 0
            row = _TAKE_RUN.first(conn, {"b_run_id": run_id})
            if row is None:
                raise LookupError(f"run {run_id} does not exist")
            self.took(run_id, row.commit_seq, bool(row.change_log))
            found = self._runs[run_id]
        return int(found[0])

    def took(self, run_id: str, commit: int, logged: bool) -> None:
        """Note the number this unit took for the run (the statement that locked it, or the
        insert of a run it creates); a run that keeps no change log takes none (0)."""
        self._runs[run_id] = [commit if logged else 0, logged, 0]

    def history(
        self,
        conn: Connection,
        run_id: str,
        events: Iterable[tuple[str, dict[str, Any]]],
        now: int,
    ) -> None:
        """Queue events for the run's history, in order."""
        rows = self._history
        commit: int | None = None
        for kind, details in events:
            if commit is None:
                commit = self.number(conn, run_id)
            rows.append(
                {
                    "run_id": run_id,
                    "event_type": kind,
                    "at": now,
                    "details": json.dumps(details, separators=(",", ":"), default=str),
                    "commit_seq": commit,
                }
            )

    def log(
        self,
        conn: Connection,
        run_id: str,
        kind: str,
        name: str,
        instance: str,
        *,
        message_id: str | None = None,
        value: str | None = None,
        at: int | None = None,
    ) -> None:
        """Queue one change of the run's state for its change log (kept only if it logs)."""
        commit = self.number(conn, run_id)
        found = self._runs[run_id]
        if not found[1]:
            return
        found[2] += 1
        self._log.append(
            {
                "run_id": run_id,
                "commit_seq": commit,
                "pos": found[2],
                "kind": kind,
                "name": name,
                "instance": instance,
                "message_id": message_id,
                "value": value,
                "at": at,
                "external": self.external and kind != CONSUME,
            }
        )

    def flush(self, conn: Connection) -> None:
        """Write the queued history events and log rows (each table in one statement), or
        leave them to the end of the unit (see ``deferred``)."""
        deferred = deferred_of(conn)
        if deferred is not None:
            deferred.history.extend(self._history)
            deferred.log.extend(self._log)
            self._history, self._log = [], []
            return
        if self._history:
            _INSERT_HISTORY.many(conn, self._history)
            self._history = []
        if self._log:
            _INSERT_LOG.many(conn, self._log)
            self._log = []


def journal(conn: Connection) -> Journal:
    """Return the journal of the unit running on ``conn``."""
    found: Journal | None = conn.info.get(JOURNAL)
    if found is None:
        raise RuntimeError("a change to a run outside a journaled commit unit")
    return found
