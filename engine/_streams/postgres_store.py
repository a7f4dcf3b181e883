"""The PostgreSQL Stream Store: messages in UNLOGGED tables every process of a database shares.

``stream_messages`` holds the retained messages; ``stream_state`` one row per (namespace, Flow
type, Stream) with its sequence counter, usage and message count, and one row per namespace
(Flow type and Stream '') with the store's total usage and epoch. UNLOGGED tables skip the
write-ahead log: appends cost no fsync, and after a server crash PostgreSQL empties them, the
epoch row included, so the next process to look stores a new epoch and old tokens restart at
the head, as after a restart of the memory store.

An append is one short transaction: it claims the next sequence and the room in its Stream's
row (the lock that orders a Stream's appends), then in the namespace's row, inserts the
message and sends ``NOTIFY``, delivered when it commits. Every lock is taken in that order, by
trims too, so appends and trims never deadlock. Each store holds one more connection that
``LISTEN``s and wakes this process's readers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from engine._streams.external_store import Appended, ExternalStreamStore, Refused
from engine._streams.store_interface import StoredStreamMessage
from engine.errors import InvalidArgumentError
from engine.stream import StreamStoreConfig

if TYPE_CHECKING:
    from engine.clock import Clock

log = logging.getLogger("dexlite.streams")

#: The NOTIFY channel of appends; payloads name the namespace's Stream and Flow ID.
CHANNEL = "dexlite_stream_appends"
#: Serializes the CREATE ... IF NOT EXISTS of processes starting at once (they can collide).
DDL_LOCK_KEY = 0x64786C73747265  # "dxlstre"
POOL_SIZE = 8
COMMAND_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
RECONNECT_DELAY_SECONDS = 0.5
#: Above every sequence: a page with no anchor reads from the newest message.
NO_ANCHOR = 2**62

SCHEMA = (
    """CREATE UNLOGGED TABLE IF NOT EXISTS stream_state (
        namespace text NOT NULL,
        flow_type text NOT NULL,
        stream_name text NOT NULL,
        capacity bigint NOT NULL DEFAULT 0,
        usage bigint NOT NULL DEFAULT 0,
        messages bigint NOT NULL DEFAULT 0,
        next_seq bigint NOT NULL DEFAULT 1,
        epoch text,
        PRIMARY KEY (namespace, flow_type, stream_name))""",
    """CREATE UNLOGGED TABLE IF NOT EXISTS stream_messages (
        namespace text NOT NULL,
        flow_type text NOT NULL,
        stream_name text NOT NULL,
        seq bigint NOT NULL,
        flow_id text NOT NULL,
        text text NOT NULL,
        source text NOT NULL,
        created_at double precision NOT NULL,
        size bigint NOT NULL,
        PRIMARY KEY (namespace, flow_type, stream_name, seq))""",
    """CREATE INDEX IF NOT EXISTS stream_messages_by_flow_id
        ON stream_messages (namespace, flow_type, stream_name, flow_id, seq)""",
)

# The first append creates the Stream's row; later ones add to it only while the message fits.
CLAIM = """
INSERT INTO stream_state AS s (namespace, flow_type, stream_name, capacity, usage, messages,
                               next_seq)
VALUES ($1, $2, $3, $5, $4, 1, 2)
ON CONFLICT (namespace, flow_type, stream_name) DO UPDATE
SET usage = s.usage + $4, messages = s.messages + 1, next_seq = s.next_seq + 1, capacity = $5
WHERE s.usage + $4 <= $5
RETURNING next_seq - 1 AS seq, usage
"""
# A missing namespace row means the contents were lost (or never existed): a new epoch.
CLAIM_TOTAL = """
INSERT INTO stream_state AS s (namespace, flow_type, stream_name, usage, epoch)
VALUES ($1, '', '', $2, $4)
ON CONFLICT (namespace, flow_type, stream_name) DO UPDATE
SET usage = s.usage + $2
WHERE s.usage + $2 <= $3
RETURNING usage, epoch
"""
TOTAL = "SELECT usage, epoch FROM stream_state WHERE namespace = $1 AND flow_type = ''"
USAGE = """SELECT usage FROM stream_state
WHERE namespace = $1 AND flow_type = $2 AND stream_name = $3"""
INSERT = """
WITH added AS (
    INSERT INTO stream_messages (namespace, flow_type, stream_name, seq, flow_id, text, source,
                                 created_at, size)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
)
SELECT pg_notify($10, $11)
"""
# One row even when no message matches, so every read also reports the stored epoch.
_READ = """
SELECT (SELECT epoch FROM stream_state WHERE namespace = $1 AND flow_type = '') AS epoch,
       m.seq, m.flow_id, m.text, m.source, m.created_at, m.size
FROM (VALUES (1)) AS one (x)
LEFT JOIN LATERAL (
    SELECT seq, flow_id, text, source, created_at, size FROM stream_messages
    WHERE namespace = $1 AND flow_type = $2 AND stream_name = $3 AND flow_id = $4 AND {where}
    ORDER BY seq {order} LIMIT $6
) AS m ON true
ORDER BY m.seq {order}
"""
FIRST_AFTER = _READ.format(where="seq > $5", order="ASC")
PAGE_BEFORE = _READ.format(where="seq < $5", order="DESC")
ENSURE_EPOCH = """INSERT INTO stream_state (namespace, flow_type, stream_name, epoch)
VALUES ($1, '', '', $2) ON CONFLICT (namespace, flow_type, stream_name) DO NOTHING"""
EPOCH = "SELECT epoch FROM stream_state WHERE namespace = $1 AND flow_type = ''"
STATS = """SELECT usage, messages, capacity FROM stream_state
WHERE namespace = $1 AND flow_type = $2 AND stream_name = $3"""
LOCK_STREAM = USAGE + " FOR UPDATE"
# The oldest messages while usage stays above the target: ``before`` is what goes ahead of one.
TRIM = """
WITH oldest AS (
    SELECT seq, sum(size) OVER (ORDER BY seq) - size AS before
    FROM (SELECT seq, size FROM stream_messages
          WHERE namespace = $1 AND flow_type = $2 AND stream_name = $3
          ORDER BY seq LIMIT $4) AS o
)
DELETE FROM stream_messages AS m USING oldest
WHERE m.namespace = $1 AND m.flow_type = $2 AND m.stream_name = $3 AND m.seq = oldest.seq
  AND oldest.before < $5
RETURNING m.size
"""
TRIMMED = """UPDATE stream_state SET usage = usage - $4, messages = messages - $5
WHERE namespace = $1 AND flow_type = $2 AND stream_name = $3"""
TRIMMED_TOTAL = """UPDATE stream_state SET usage = usage - $2
WHERE namespace = $1 AND flow_type = ''"""
USAGES = """SELECT flow_type, stream_name, usage FROM stream_state
WHERE namespace = $1 AND flow_type <> '' AND usage > 0 ORDER BY usage DESC LIMIT 1000"""


class _TotalRefused(Exception):
    """Rolls an append's transaction back when the store-wide limit refuses it."""

    def __init__(self, total: int, epoch: str) -> None:
        self.total = total
        self.epoch = epoch


class PostgresStreamStore(ExternalStreamStore):
    """Stream messages in PostgreSQL, shared by every process of the database."""

    kind = "postgres"
    unreachable = (
        OSError,
        TimeoutError,
        asyncpg.PostgresConnectionError,
        asyncpg.CannotConnectNowError,
        asyncpg.AdminShutdownError,
    )

    def __init__(
        self,
        config: StreamStoreConfig,
        clock: Clock,
        dsn: str,
        on_trim_done: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(config, clock, on_trim_done)
        self._dsn = dsn
        self._pool: Any = None
        self._listener: Any = None
        self._watch: asyncio.Task[None] | None = None

    # -- connections ----------------------------------------------------------------------------

    async def _connect(self) -> None:
        self._pool = await asyncpg.create_pool(
            self._dsn,
            min_size=1,
            max_size=POOL_SIZE,
            command_timeout=COMMAND_TIMEOUT_SECONDS,
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", DDL_LOCK_KEY)
                for statement in SCHEMA:
                    await conn.execute(statement)
            self._epoch = await self._ensure_epoch()
            lost = await self._listen()
        except BaseException:
            await self._pool.close()
            self._pool = None
            raise
        self._watch = asyncio.get_running_loop().create_task(
            self._keep_listening(lost), name="stream-store-listener"
        )

    async def _listen(self) -> asyncio.Event:
        """Open the LISTEN connection; return the event set when it is lost."""
        conn = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_SECONDS)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(CHANNEL, self._on_notify)
        except BaseException:
            conn.terminate()
            raise
        self._listener = conn
        return lost

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        namespace, _, rest = payload.partition("\n")
        if namespace == self.namespace:
            self._heard(rest)

    async def _keep_listening(self, lost: asyncio.Event) -> None:
        """Reconnect the listener whenever it is lost (a server restart, say)."""
        while True:
            await lost.wait()
            self._listener = None
            while True:
                try:
                    # A crash may have emptied the tables: adopt the epoch stored now.
                    self._epoch = await self._ensure_epoch()
                    lost = await self._listen()
                    break
                except Exception as exc:  # keep trying until close(): readers still time out
                    log.warning("the postgres Stream Store's listener reconnects: %s", exc)
                    await asyncio.sleep(RECONNECT_DELAY_SECONDS)
            # Appends while nobody listened went unheard: every reader looks again.
            self.listener_reconnects += 1
            self._wake_all()

    async def _disconnect(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self._listener is not None:
            listener, self._listener = self._listener, None
            try:
                await listener.close(timeout=CONNECT_TIMEOUT_SECONDS)
            except Exception:  # a dead connection cannot say goodbye
                listener.terminate()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), CONNECT_TIMEOUT_SECONDS)
            except (TimeoutError, *self.unreachable):
                pool.terminate()

    # -- primitives -----------------------------------------------------------------------------

    async def append(
        self, flow_type: str, name: str, capacity: int, flow_id: str, source: str, text: str
    ) -> StoredStreamMessage:
        """Append a message (see ExternalStreamStore.append); a source PostgreSQL text cannot
        hold (a NUL character) is an InvalidArgumentError instead of a server error."""
        if "\x00" in source:
            raise InvalidArgumentError(
                "source must not contain NUL characters on the postgres Stream Store",
                field="source",
                operation="writeStream",
            )
        return await super().append(flow_type, name, capacity, flow_id, source, text)

    async def _ensure_epoch(self) -> str:
        async with self._pool.acquire() as conn:
            await conn.execute(ENSURE_EPOCH, self.namespace, self._new_epoch())
            return str(await conn.fetchval(EPOCH, self.namespace))

    async def _append_once(
        self, flow_type: str, name: str, capacity: int, message: StoredStreamMessage
    ) -> Appended | Refused:
        ns, size, config = self.namespace, message.size, self.config
        async with self._pool.acquire() as conn:
            try:
                async with conn.transaction():
                    claimed = await conn.fetchrow(CLAIM, ns, flow_type, name, size, capacity)
                    if claimed is None:
                        usage = await conn.fetchval(USAGE, ns, flow_type, name)
                        return Refused("stream", int(usage), self._epoch)
                    total = await conn.fetchrow(
                        CLAIM_TOTAL, ns, size, config.max_total_bytes, self._new_epoch()
                    )
                    if total is None:
                        found = await conn.fetchrow(TOTAL, ns)
                        raise _TotalRefused(int(found["usage"]), str(found["epoch"]))
                    message.seq = int(claimed["seq"])
                    payload = f"{ns}\n{self._notification(flow_type, name, message.flow_id)}"
                    await conn.execute(
                        INSERT,
                        ns,
                        flow_type,
                        name,
                        message.seq,
                        message.flow_id,
                        message.text,
                        message.source,
                        message.created_at,
                        size,
                        CHANNEL,
                        payload,
                    )
            except _TotalRefused as refused:
                return Refused("total", refused.total, refused.epoch)
        return Appended(message, int(claimed["usage"]), str(total["epoch"]))

    async def _first_after(
        self, flow_type: str, name: str, flow_id: str, after: int
    ) -> tuple[str | None, StoredStreamMessage | None]:
        rows = await self._pool.fetch(
            FIRST_AFTER, self.namespace, flow_type, name, flow_id, after, 1
        )
        epoch, messages = _messages(rows)
        return epoch, messages[0] if messages else None

    async def _page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[str | None, list[StoredStreamMessage]]:
        anchor = NO_ANCHOR if before is None else before
        rows = await self._pool.fetch(
            PAGE_BEFORE, self.namespace, flow_type, name, flow_id, anchor, size
        )
        return _messages(rows)

    async def _stats(self, flow_type: str, name: str) -> tuple[int, int, int] | None:
        row = await self._pool.fetchrow(STATS, self.namespace, flow_type, name)
        if row is None:
            return None
        return int(row["usage"]), int(row["messages"]), int(row["capacity"])

    async def _trim_slice(self, flow_type: str, name: str, target: int, limit: int) -> bool:
        ns = self.namespace
        async with self._pool.acquire() as conn, conn.transaction():
            usage = await conn.fetchval(LOCK_STREAM, ns, flow_type, name)
            if usage is None or usage <= target:
                return False
            rows = await conn.fetch(TRIM, ns, flow_type, name, limit, usage - target)
            if not rows:
                return False
            removed = sum(int(row["size"]) for row in rows)
            await conn.execute(TRIMMED, ns, flow_type, name, removed, len(rows))
            await conn.execute(TRIMMED_TOTAL, ns, removed)
        return bool(usage - removed > target)

    async def _usages(self) -> list[tuple[tuple[str, str], int]]:
        rows = await self._pool.fetch(USAGES, self.namespace)
        return [((str(r["flow_type"]), str(r["stream_name"])), int(r["usage"])) for r in rows]


def _messages(rows: list[Any]) -> tuple[str | None, list[StoredStreamMessage]]:
    """Return the epoch and the messages of a read's rows (one row, message-less, if none)."""
    epoch = None if not rows or rows[0]["epoch"] is None else str(rows[0]["epoch"])
    messages = [
        StoredStreamMessage(
            int(row["seq"]),
            str(row["flow_id"]),
            str(row["text"]),
            str(row["source"]),
            float(row["created_at"]),
            int(row["size"]),
        )
        for row in rows
        if row["seq"] is not None
    ]
    return epoch, messages
