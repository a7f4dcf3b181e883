"""Commits made in one process, announced to the others through ``LISTEN/NOTIFY``.

Once a commit of this process has committed, a short notice of what it changed goes to the
other processes: per run the Attribute keys written, the Step executions ended, the queues
published to and whether the run closed. They hand it to their commit followers, which wake
the waiters of their own (waitForFlow, WaitForAttributeMatch, Channel and SubFlow waits) and
stop their attempts of ended Steps. One sender sends the notices of the commits that ended
while it sent the last ones, several to a ``NOTIFY`` transaction: under load a transaction
carries many, where each commit used to send its own inside its transaction.
A notice is best effort (a process that was not listening misses it, one that stops may not
send it): every wait also reads once more at its deadline, so a commit made elsewhere is never
reported as a miss.

A process alone on the database sends no notices. Its listener holds the "alone" advisory lock
exclusively, which it can take only while no other listener holds that lock shared, as every
listener does. A process that starts beside it asks, on ``dexlite_join``, until the one alone
lets go of it; only then does it serve. The one alone stops dropping notices before it lets go,
so a commit either ended before (and the new process reads it) or is announced. A process
whose listener connection is lost loses the lock with it and announces its commits again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from engine._runtime.notifier import LocalNotifier
from engine._storage.records import CommitResult, RunChange

log = logging.getLogger("dexlite.notify")

COMMITS_CHANNEL = "dexlite_commits"
#: PostgreSQL refuses a payload of 8000 bytes or more; past this a notice names only the runs.
MAX_PAYLOAD = 7900
ALL = "*"
#: The advisory lock of a process alone on the database (two-key space, class "dxlt" in ASCII,
#: apart from the one-key locks of Flows and schema changes).
LOCK_CLASS = 1685613684
ALONE = 2
#: Where a process that joins asks the one alone on the database to let go of its lock.
JOIN_CHANNEL = "dexlite_join"
#: How long a process that joins asks before it serves regardless (notices are best effort: it
#: asks again every second meanwhile), and how often it asks.
JOIN_SECONDS = 10.0
JOIN_POLL_SECONDS = 0.01
#: How long a process that let another in waits before it tries to be alone again.
LET_IN_HOLD_SECONDS = 2.0
#: One NOTIFY per notice, all in one transaction.
_SEND = "SELECT pg_notify($1, n) FROM unnest($2::text[]) AS n"


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


def _entry(change: RunChange) -> dict[str, Any] | None:
    """What a notice says of ``change``, or None when it changed nothing another process
    follows."""
    if not (change.writes or change.ended_step_ids or change.published or change.closed_status):
        return None
    return {
        "f": change.flow_id,
        "r": change.run_id,
        "w": sorted({(w.name, w.instance) for w in change.writes}),
        "e": list(change.ended_step_ids),
        "p": [list(q) for q in change.published],
        "c": change.closed_status is not None,
    }


def _fitting(entry: dict[str, Any], room: int) -> str:
    """``entry`` as JSON in at most ``room`` bytes: whole, else naming only its run's writes
    and queues as ALL, else only its run (as closed: the listener reads it all again)."""
    for shown in (
        entry,
        {**entry, "w": ALL, "p": ALL},
        {"f": entry["f"], "r": entry["r"], "w": ALL, "e": [], "p": ALL, "c": True},
    ):
        text = json.dumps(shown, separators=(",", ":"))  # ASCII: its length is its size
        if len(text) <= room:
            return text
    return text


def _notices(process_id: str, changes: Iterable[RunChange]) -> list[str]:
    """The payloads that announce ``changes``, each under PostgreSQL's limit (MAX_PAYLOAD)."""
    head = '{"from":' + json.dumps(process_id) + ',"c":['
    room = MAX_PAYLOAD - len(head) - 2
    payloads: list[str] = []
    parts: list[str] = []
    used = 0
    for change in changes:
        entry = _entry(change)
        if entry is None:
            continue
        text = _fitting(entry, room)
        if parts and used + 1 + len(text) > room:
            payloads.append(head + ",".join(parts) + "]}")
            parts, used = [], 0
        used += len(text) + (1 if parts else 0)
        parts.append(text)
    if parts:
        payloads.append(head + ",".join(parts) + "]}")
    return payloads


def _changes(payload: str) -> tuple[str, list[RemoteChange]]:
    notice = json.loads(payload)
    found = []
    for e in notice["c"]:
        written = e["w"] if e["w"] == ALL else tuple((n, i) for n, i in e["w"])
        published = e["p"] if e["p"] == ALL else tuple((c, i) for c, i in e["p"])
        found.append(RemoteChange(e["f"], e["r"], written, tuple(e["e"]), published, bool(e["c"])))
    return notice["from"], found


class PostgresNotifier(LocalNotifier):
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
        # The changes of commits not announced yet, and the task sending them.
        self._outbox: list[RunChange] = []
        self._sender: asyncio.Task[None] | None = None

    def publish(self, result: CommitResult) -> None:
        """Deliver ``result`` here, and announce it to the other processes, if any."""
        super().publish(result)
        if self._alone or self._closing or not result.changes:
            return
        self._outbox.extend(result.changes)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())

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
        for task in (self._letting_in, self._sender):
            if task is not None:
                task.cancel()
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
        """Hold ALONE shared, asking a process alone to let go of it for up to ``seconds``."""
        conn = self._conn
        assert conn is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            async with self._session:
                if await conn.fetchval(
                    "SELECT pg_try_advisory_lock_shared($1, $2)", LOCK_CLASS, ALONE
                ):
                    self._joined = True
                    return
                if loop.time() >= deadline:
                    if seconds >= JOIN_SECONDS:
                        log.warning(
                            "the process alone on the database has not let this one in yet; "
                            "its commits may reach waiters here late until it does"
                        )
                    return
                await conn.execute(f"NOTIFY {JOIN_CHANNEL}")
            await asyncio.sleep(JOIN_POLL_SECONDS)

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

    async def _send(self) -> None:
        """Send the notices of the commits in the outbox until it stays empty."""
        try:
            while self._outbox:
                changes, self._outbox = self._outbox, []
                conn = self._conn
                # Alone since (nobody to tell), or not listening (the notices are lost).
                if self._alone or conn is None or conn.is_closed():
                    continue
                payloads = _notices(self._process_id, changes)
                if not payloads:
                    continue
                try:
                    async with self._session:
                        await conn.execute(_SEND, COMMITS_CHANNEL, payloads)
                except Exception as exc:  # best effort: waits read again at their deadlines
                    log.warning("%d commit notices were not sent: %s", len(payloads), exc)
        finally:
            self._sender = None

    def _on_commits(self, conn: Any, pid: int, _channel: str, payload: str) -> None:
        if pid == conn.get_server_pid():
            return  # this process's own notices, sent on this connection
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
