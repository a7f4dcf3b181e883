"""Commits made in one process, announced to the others through ``LISTEN/NOTIFY``.

Every commit unit of this process sends, in its own transaction (so only a commit is ever
announced), a short notice of what it changed: per run the Attribute keys written, the Step
executions ended, the queues published to and whether the run closed. The other processes
hand it to their commit followers, which wake the waiters of their own (waitForFlow,
WaitForAttributeMatch, Channel and SubFlow waits) and stop their attempts of ended Steps.
A notice is best effort (a process that was not listening misses it): every wait also reads
once more at its deadline, so a commit made elsewhere is never reported as a miss.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
from sqlalchemy import Connection, text

from engine._runtime.notifier import LocalNotifier
from engine._storage.commits import Unit
from engine._storage.records import CommitResult, RunChange
from engine._storage.tail import tail_of

log = logging.getLogger("dexlite.notify")

COMMITS_CHANNEL = "dexlite_commits"
#: PostgreSQL refuses a payload of 8000 bytes or more; past this a notice names only the runs.
MAX_PAYLOAD = 7900
ALL = "*"
#: Built once: a new ``select(func.pg_notify(...))`` per commit cost its construction and its
#: cache key on every RPC.
_ANNOUNCE = text(f"SELECT pg_notify('{COMMITS_CHANNEL}', :payload)")


@dataclass(frozen=True)
class RemoteChange:
    """What a commit of another process changed in one run (``ALL``: anything may have)."""

    flow_id: str
    run_id: str
    written: tuple[tuple[str, str], ...] | str
    ended_step_ids: tuple[str, ...]
    published: tuple[tuple[str, str], ...] | str
    closed: bool


RemoteListener = Callable[[RemoteChange], None]


def _notice(process_id: str, changes: tuple[RunChange, ...]) -> str | None:
    entries = [
        {
            "f": c.flow_id,
            "r": c.run_id,
            "w": sorted({(w.name, w.instance) for w in c.writes}),
            "e": list(c.ended_step_ids),
            "p": [list(q) for q in c.published],
            "c": c.closed_status is not None,
        }
        for c in changes
        if c.writes or c.ended_step_ids or c.published or c.closed_status is not None
    ]
    if not entries:
        return None
    text = json.dumps({"from": process_id, "c": entries}, separators=(",", ":"))
    if len(text.encode()) <= MAX_PAYLOAD:
        return text
    brief = [
        {"f": e["f"], "r": e["r"], "w": ALL, "e": e["e"], "p": ALL, "c": e["c"]} for e in entries
    ]
    text = json.dumps({"from": process_id, "c": brief}, separators=(",", ":"))
    if len(text.encode()) <= MAX_PAYLOAD:
        return text
    bare = [{"f": e["f"], "r": e["r"], "w": ALL, "e": [], "p": ALL, "c": True} for e in entries]
    return json.dumps({"from": process_id, "c": bare[:40]}, separators=(",", ":"))


def _changes(payload: str) -> tuple[str, list[RemoteChange]]:
    notice = json.loads(payload)
    found = []
    for e in notice["c"]:
        written = e["w"] if e["w"] == ALL else tuple((n, i) for n, i in e["w"])
        published = e["p"] if e["p"] == ALL else tuple((c, i) for c, i in e["p"])
        found.append(RemoteChange(e["f"], e["r"], written, tuple(e["e"]), published, bool(e["c"])))
    return notice["from"], found


class SharedNotifier(LocalNotifier):
    """Delivers commits here and announces them to the other processes of the database."""

    def __init__(self, process_id: str, dsn: str) -> None:
        super().__init__()
        self._process_id = process_id
        self._dsn = dsn
        self._remote: list[RemoteListener] = []
        self._conn: asyncpg.Connection | None = None
        self._extra: dict[str, Callable[[str], None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def within(self, unit: Unit) -> Unit:
        """Return ``unit`` sending its notice in its own transaction."""

        def announced(conn: Connection) -> CommitResult:
            result = unit(conn)
            payload = _notice(self._process_id, result.changes)
            if payload is not None:
                tail = tail_of(conn)
                if tail is not None:
                    tail.notify(COMMITS_CHANNEL, payload)  # with the unit's last writes
                else:
                    conn.execute(_ANNOUNCE, {"payload": payload})
            return result

        return announced

    def notice(self, result: CommitResult) -> tuple[str, str] | None:
        """Return the (channel, payload) a commit of ``result`` sends, for a commit made
        without :meth:`within` (one statement of its own)."""
        payload = _notice(self._process_id, result.changes)
        return None if payload is None else (COMMITS_CHANNEL, payload)

    def subscribe_remote(self, listener: RemoteListener) -> None:
        """Call ``listener`` with every run another process's commit changed."""
        self._remote.append(listener)

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Also call ``callback`` with the payload of every notification on ``channel``."""
        self._extra[channel] = callback

    async def start(self) -> None:
        """Connect and listen (reconnecting whenever the connection is lost)."""
        await self._connect()
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="dexlite-listen")

    async def close(self) -> None:
        """Stop listening."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        await conn.add_listener(COMMITS_CHANNEL, self._on_commits)
        for channel in self._extra:
            await conn.add_listener(channel, self._on_extra)
        self._conn = conn

    async def _watch(self) -> None:
        while not self._closing:
            await asyncio.sleep(1.0)
            if self._conn is not None and not self._conn.is_closed():
                continue
            try:
                await self._connect()
            except Exception:  # the server may be restarting: try again in a second
                log.warning("could not listen on the database; retrying")

    def _on_commits(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            sender, changes = _changes(payload)
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed commit notice")
            return
        if sender == self._process_id:
            return  # this process followed up on its own commit already
        for change in changes:
            for listener in self._remote:
                try:
                    listener(change)
                except Exception:
                    log.exception("a remote commit listener failed")

    def _on_extra(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        callback = self._extra.get(channel)
        if callback is not None:
            callback(payload)
