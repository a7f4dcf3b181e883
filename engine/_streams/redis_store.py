"""The Redis Stream Store: messages in Redis Streams every process reaching the server shares.

Keys start with ``<namespace>:streams:``. Per (Flow type, Stream) ``S`` = ``<flow type>/<name>``:
``meta:S`` (a hash: the last sequence, usage, message count, capacity), ``order:S`` (a Redis
Stream of every Flow ID's messages by sequence, for trimming oldest first) and ``msgs:S/<flow
ID>`` (a Redis Stream of one Flow ID's messages; entry ID ``<seq>-0``, so XRANGE reads after a
sequence). Store-wide: ``epoch``, ``total`` and ``usage`` (a sorted set of Streams by usage).

Appends and trim slices are Lua scripts, atomic on the server, so processes never interleave
inside one. An append PUBLISHes on ``<namespace>:streams:appended``; each store subscribes on
one connection to wake its readers. The epoch key is written only when missing, so a flushed
or restarted Redis without persistence gets a new epoch from the first process that looks.
Scripts touch keys derived inside them, so this store needs a single Redis server (not
Cluster); use ``noeviction`` so Redis never drops part of the contents on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from engine._streams.external_store import Appended, ExternalStreamStore, Refused
from engine._streams.store_interface import StoredStreamMessage
from engine.stream import StreamStoreConfig

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub

    from engine.clock import Clock

log = logging.getLogger("dexlite.streams")

SOCKET_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
RECONNECT_DELAY_SECONDS = 0.5
#: How long one wait for a published message lasts before the listener looks at its state.
LISTEN_POLL_SECONDS = 5.0

# KEYS: epoch, total, usage, meta, order, messages.
# ARGV: candidate epoch, capacity, size, store limit, flow ID, text, source, created at,
#       Stream member, channel, payload.
APPEND = """
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = ARGV[1]
  redis.call('SET', KEYS[1], epoch)
end
local capacity, size = tonumber(ARGV[2]), tonumber(ARGV[3])
local usage = tonumber(redis.call('HGET', KEYS[4], 'usage') or '0')
if usage + size > capacity then
  return {'stream', epoch, usage}
end
local total = tonumber(redis.call('GET', KEYS[2]) or '0')
if total + size > tonumber(ARGV[4]) then
  return {'total', epoch, total}
end
local seq = redis.call('HINCRBY', KEYS[4], 'seq', 1)
local id = seq .. '-0'
redis.call('XADD', KEYS[6], id, 't', ARGV[6], 's', ARGV[7], 'c', ARGV[8], 'z', size)
redis.call('XADD', KEYS[5], id, 'f', ARGV[5], 'z', size)
usage = redis.call('HINCRBY', KEYS[4], 'usage', size)
redis.call('HINCRBY', KEYS[4], 'messages', 1)
redis.call('HSET', KEYS[4], 'capacity', capacity)
redis.call('INCRBY', KEYS[2], size)
redis.call('ZINCRBY', KEYS[3], size, ARGV[9])
redis.call('PUBLISH', ARGV[10], ARGV[11])
return {'ok', epoch, seq, usage}
"""

# KEYS: total, usage, meta, order. ARGV: target, limit, Stream member, Flow ID key prefix.
# Removes the oldest messages while usage is above the target; returns {usage, removed}.
TRIM = """
local usage = tonumber(redis.call('HGET', KEYS[3], 'usage') or '0')
local target = tonumber(ARGV[1])
if usage <= target then
  return {usage, 0}
end
local entries = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', ARGV[2])
local removed, count, last = 0, 0, 0
local newest = {}
for _, entry in ipairs(entries) do
  if usage - removed <= target then
    break
  end
  local seq = tonumber(string.match(entry[1], '^(%d+)'))
  local fields = entry[2]
  removed = removed + tonumber(fields[4])
  count = count + 1
  last = seq
  newest[fields[2]] = seq
end
if count == 0 then
  return {usage, 0}
end
redis.call('XTRIM', KEYS[4], 'MINID', (last + 1) .. '-0')
for flow_id, seq in pairs(newest) do
  local key = ARGV[4] .. flow_id
  redis.call('XTRIM', key, 'MINID', (seq + 1) .. '-0')
  if redis.call('XLEN', key) == 0 then
    redis.call('DEL', key)
  end
end
usage = redis.call('HINCRBY', KEYS[3], 'usage', -removed)
redis.call('HINCRBY', KEYS[3], 'messages', -count)
redis.call('INCRBY', KEYS[1], -removed)
if usage <= 0 then
  redis.call('ZREM', KEYS[2], ARGV[3])
else
  redis.call('ZADD', KEYS[2], usage, ARGV[3])
end
return {usage, count}
"""


class RedisStreamStore(ExternalStreamStore):
    """Stream messages in Redis, shared by every process reaching the server."""

    kind = "redis"
    unreachable = (OSError, TimeoutError, RedisConnectionError, RedisTimeoutError)

    def __init__(
        self,
        config: StreamStoreConfig,
        clock: Clock,
        on_trim_done: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(config, clock, on_trim_done)
        self.prefix = f"{config.namespace}:streams:"
        self.channel = self.prefix + "appended"
        self._client: aioredis.Redis | None = None
        self._listener: aioredis.Redis | None = None
        self._pubsub: PubSub | None = None
        self._watch: asyncio.Task[None] | None = None
        self._append_script: Any = None
        self._trim_script: Any = None

    # -- keys -----------------------------------------------------------------------------------

    def _member(self, flow_type: str, name: str) -> str:
        # Stream names hold no '/', so the last '/' splits a member back into its two parts.
        return f"{flow_type}/{name}"

    def _messages_key(self, flow_type: str, name: str, flow_id: str) -> str:
        return f"{self.prefix}msgs:{flow_type}/{name}/{flow_id}"

    @property
    def client(self) -> aioredis.Redis:
        """Return the open client."""
        assert self._client is not None, "the Redis Stream Store is not open"
        return self._client

    # -- connections ----------------------------------------------------------------------------

    async def _connect(self) -> None:
        url = self.config.redis_url
        common: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "health_check_interval": 30,
            # Operators (and tests) find this store's connections in CLIENT LIST.
            "client_name": f"dexlite-streams-{self.origin}",
        }
        client = aioredis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_SECONDS, **common)
        # No retries on the subscription: a drop must reach ``_listen``, which wakes every
        # reader once it is back (the client's own reconnect would hide the gap).
        listener = aioredis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **common)
        self._client, self._listener = client, listener
        try:
            await client.ping()
            self._append_script = client.register_script(APPEND)
            self._trim_script = client.register_script(TRIM)
            self._epoch = await self._ensure_epoch()
            self._pubsub = await self._subscribe()
        except BaseException:
            await _closed(client)
            await _closed(listener)
            self._client = self._listener = None
            raise
        self._watch = asyncio.get_running_loop().create_task(
            self._listen(), name="stream-store-listener"
        )

    async def _subscribe(self) -> PubSub:
        """Subscribe on a connection of its own; return once Redis confirmed it."""
        assert self._listener is not None, "the Redis Stream Store is not open"
        pubsub = self._listener.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CONNECT_TIMEOUT_SECONDS
            while True:
                message = await pubsub.get_message(timeout=max(0.0, deadline - loop.time()))
                if message is not None and message["type"] == "subscribe":
                    return pubsub
                if loop.time() >= deadline:
                    raise TimeoutError("Redis did not confirm the subscription")
        except BaseException:
            await _closed(pubsub)
            raise

    async def _listen(self) -> None:
        """Wake readers for each published append; resubscribe when the connection drops."""
        while True:
            pubsub = self._pubsub
            try:
                assert pubsub is not None
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=LISTEN_POLL_SECONDS
                )
                if message is not None and message["type"] == "message":
                    self._heard(str(message["data"]))
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep trying until close(): readers still time out
                log.warning("the redis Stream Store's listener reconnects: %s", exc)
            self._pubsub = None
            if pubsub is not None:
                await _closed(pubsub)
            while self._pubsub is None:
                try:
                    # A flushed or restarted Redis lost the contents: adopt the epoch now.
                    self._epoch = await self._ensure_epoch()
                    self._pubsub = await self._subscribe()
                except Exception as exc:
                    log.warning("the redis Stream Store's listener reconnects: %s", exc)
                    await asyncio.sleep(RECONNECT_DELAY_SECONDS)
            # Appends while nobody listened went unheard: every reader looks again.
            self.listener_reconnects += 1
            self._wake_all()

    async def _disconnect(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self._pubsub is not None:
            pubsub, self._pubsub = self._pubsub, None
            await _closed(pubsub)
        for client in (self._client, self._listener):
            if client is not None:
                await _closed(client)
        self._client = self._listener = None

    # -- primitives -----------------------------------------------------------------------------

    async def _ensure_epoch(self) -> str:
        key = self.prefix + "epoch"
        await self.client.set(key, self._new_epoch(), nx=True)
        epoch = await self.client.get(key)
        if epoch is None:  # flushed between the two calls: try once more
            return await self._ensure_epoch()
        return str(epoch)

    async def _append_once(
        self, flow_type: str, name: str, capacity: int, message: StoredStreamMessage
    ) -> Appended | Refused:
        p, member = self.prefix, self._member(flow_type, name)
        keys = [
            p + "epoch",
            p + "total",
            p + "usage",
            f"{p}meta:{member}",
            f"{p}order:{member}",
            self._messages_key(flow_type, name, message.flow_id),
        ]
        args = [
            self._new_epoch(),
            capacity,
            message.size,
            self.config.max_total_bytes,
            message.flow_id,
            message.text,
            message.source,
            repr(message.created_at),
            member,
            self.channel,
            self._notification(flow_type, name, message.flow_id),
        ]
        result = await self._append_script(keys=keys, args=args)
        if result[0] != "ok":
            return Refused(result[0], int(result[2]), str(result[1]))
        message.seq = int(result[2])
        return Appended(message, int(result[3]), str(result[1]))

    async def _first_after(
        self, flow_type: str, name: str, flow_id: str, after: int
    ) -> tuple[str | None, StoredStreamMessage | None]:
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.get(self.prefix + "epoch")
            pipe.xrange(self._messages_key(flow_type, name, flow_id), str(after + 1), "+", 1)
            epoch, entries = await pipe.execute()
        found = _entries(flow_id, entries)
        return epoch, found[0] if found else None

    async def _page(
        self, flow_type: str, name: str, flow_id: str, before: int | None, size: int
    ) -> tuple[str | None, list[StoredStreamMessage]]:
        # An ID without its "-N" part names the whole millisecond: "7" is up to "7-<max>".
        newest = "+" if before is None else str(before - 1)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.get(self.prefix + "epoch")
            if before is None or before > 1:
                pipe.xrevrange(self._messages_key(flow_type, name, flow_id), newest, "-", size)
            epoch, *entries = await pipe.execute()
        return epoch, _entries(flow_id, entries[0] if entries else [])

    async def _stats(self, flow_type: str, name: str) -> tuple[int, int, int] | None:
        found = await self.client.hmget(
            f"{self.prefix}meta:{self._member(flow_type, name)}", ["usage", "messages", "capacity"]
        )
        if found[0] is None:
            return None
        usage, messages, capacity = (int(value or 0) for value in found)
        return usage, messages, capacity

    async def _trim_slice(self, flow_type: str, name: str, target: int, limit: int) -> bool:
        p, member = self.prefix, self._member(flow_type, name)
        keys = [p + "total", p + "usage", f"{p}meta:{member}", f"{p}order:{member}"]
        flow_prefix = f"{p}msgs:{member}/"
        usage, removed = await self._trim_script(
            keys=keys, args=[target, limit, member, flow_prefix]
        )
        return bool(int(removed) > 0 and int(usage) > target)

    async def _usages(self) -> list[tuple[tuple[str, str], int]]:
        found: Any = await self.client.zrevrange(self.prefix + "usage", 0, 999, withscores=True)
        usages = []
        for member, score in found:
            flow_type, _, name = str(member).rpartition("/")
            usages.append(((flow_type, name), int(score)))
        return usages


def _entries(flow_id: str, entries: list[Any]) -> list[StoredStreamMessage]:
    """Return the messages of XRANGE or XREVRANGE entries of one Flow ID, in their order."""
    return [
        StoredStreamMessage(
            int(str(entry_id).partition("-")[0]),
            flow_id,
            str(fields["t"]),
            str(fields["s"]),
            float(fields["c"]),
            int(fields["z"]),
        )
        for entry_id, fields in entries
    ]


async def _closed(connection: Any) -> None:
    """Close a client or a subscription, which may fail on a connection already gone."""
    try:
        await connection.aclose()
    except Exception as exc:
        log.debug("closing a Redis connection failed: %s", exc)
