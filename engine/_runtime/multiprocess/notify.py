"""Commits made in one process, announced to the others through ``LISTEN/NOTIFY``.

Every commit unit of this process sends, in its own transaction (so only a commit is ever
announced), a short notice of what it changed: per run the Attribute keys written, the Step
executions ended, the queues published to and whether the run closed. The other processes
hand it to their commit followers, which wake the waiters of their own (waitForFlow,
WaitForAttributeMatch, Channel and SubFlow waits) and stop their attempts of ended Steps.
A notice is best effort (a process that was not listening misses it): every wait also reads
once more at its deadline, so a commit made elsewhere is never reported as a miss.

A process alone on the database sends no notices (``dexlite_announce``, migration 0010): its
listener holds the "alone" advisory lock, which it takes only while no other listener holds
that lock shared, as every listener does. A process that joins asks, on ``dexlite_join``, until
the one alone lets go of it, then waits on the "fence" lock for the commits that process made
without a notice; only then does it serve, so it reads every commit it was not told of. A
process whose listener connection is lost loses its locks with it, and its commits announce
themselves again at once.
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
#: The advisory locks of migration 0010 (two-key space, class "dxlt" in ASCII): the fence that
#: commits skipping their notice hold until they end, and the lock of a process alone.
LOCK_CLASS = 1685613684
FENCE, ALONE = 1, 2
#: Where a process that joins asks the one alone on the database to let go of its lock.
JOIN_CHANNEL = "dexlite_join"
#: How long a process that joins asks before it serves regardless (notices are best effort: it
#: asks again every second meanwhile), and how often it asks.
JOIN_SECONDS = 10.0
JOIN_POLL_SECONDS = 0.01
#: How long a process that let another in waits before it tries to be alone again.
LET_IN_HOLD_SECONDS = 2.0
#: Built once: a new ``select(func...)`` per commit cost its construction and its cache key on
#: every RPC.
_ANNOUNCE = text(f"SELECT dexlite_announce('{COMMITS_CHANNEL}', :payload)")


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
        # The listener's session: it holds ALONE shared once joined, and exclusively while
        # this process is alone. Queries on it go one at a time.
        self._session = asyncio.Lock()
        self._joined = False
        self._alone = False
        self._let_in_at = float("-inf")
        self._letting_in: asyncio.Task[None] | None = None

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
        if self._letting_in is not None:
            self._letting_in.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    @property
    def alone(self) -> bool:
        """Whether this process holds the lock of a process alone on the database (its
        commits send no notices)."""
        return self._alone

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        try:
            await conn.add_listener(COMMITS_CHANNEL, self._on_commits)
            await conn.add_listener(JOIN_CHANNEL, self._on_join)
            for channel in self._extra:
                await conn.add_listener(channel, self._on_extra)
            self._joined = self._alone = False
            self._conn = conn
            await self._join(JOIN_SECONDS)
            await self._try_alone()
        except BaseException:
            self._conn = None
            with contextlib.suppress(Exception):
                await conn.close()
            raise

    async def _watch(self) -> None:
        while not self._closing:
            await asyncio.sleep(1.0)
            if self._conn is not None and not self._conn.is_closed():
                with contextlib.suppress(Exception):  # the next turn, or a reconnect, retries
                    if not self._joined:
                        await self._join(JOIN_POLL_SECONDS)
                    await self._try_alone()
                continue
            self._joined = self._alone = False  # the server released the locks
            try:
                await self._connect()
            except Exception:  # the server may be restarting: try again in a second
                log.warning("could not listen on the database; retrying")

    async def _join(self, seconds: float) -> None:
        """Hold ALONE shared (asking a process alone to let go of it for up to ``seconds``),
        then wait for the commits that process made without a notice."""
        conn = self._conn
        assert conn is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            async with self._session:
                if await conn.fetchval(
                    "SELECT pg_try_advisory_lock_shared($1, $2)", LOCK_CLASS, ALONE
                ):
                    break
                if loop.time() >= deadline:
                    if seconds >= JOIN_SECONDS:
                        log.warning(
                            "the process alone on the database has not let this one in yet; "
                            "its commits may reach waiters here late until it does"
                        )
                    return
                await conn.execute(f"NOTIFY {JOIN_CHANNEL}")
            await asyncio.sleep(JOIN_POLL_SECONDS)
        async with self._session:
            # Its commits that skipped their notice hold the fence shared until they end.
            timeout = max(deadline - loop.time(), JOIN_POLL_SECONDS)
            try:
                await conn.execute(
                    "SELECT pg_advisory_lock($1, $2)", LOCK_CLASS, FENCE, timeout=timeout
                )
            except TimeoutError:
                log.warning("commits made without a notice are still running; going on")
            else:
                await conn.execute("SELECT pg_advisory_unlock($1, $2)", LOCK_CLASS, FENCE)
        self._joined = True

    async def _try_alone(self) -> None:
        """Take ALONE exclusively if no other listener holds it (this session's own shared
        hold does not conflict with it)."""
        conn = self._conn
        loop = asyncio.get_running_loop()
        if conn is None or self._alone or not self._joined or self._closing:
            return
        if loop.time() < self._let_in_at + LET_IN_HOLD_SECONDS:
            return
        async with self._session:
            self._alone = bool(
                await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_CLASS, ALONE)
            )

    def _on_join(self, _conn: Any, _pid: int, _channel: str, _payload: str) -> None:
        if self._alone and self._letting_in is None:
            self._letting_in = asyncio.get_running_loop().create_task(self._let_in())

    async def _let_in(self) -> None:
        """Let go of ALONE: commits from now on send their notices."""
        try:
            self._let_in_at = asyncio.get_running_loop().time()
            conn = self._conn
            if conn is not None and self._alone:
                async with self._session:
                    self._alone = False
                    with contextlib.suppress(Exception):  # a lost session released it
                        while await conn.fetchval(
                            "SELECT pg_advisory_unlock($1, $2)", LOCK_CLASS, ALONE
                        ):
                            pass  # until no exclusive hold is left
        finally:
            self._letting_in = None

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
