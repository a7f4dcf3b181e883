"""The Channel calls of the client API: list queues and messages, publish, delete by ID."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engine import _codec
from engine._ids import check_id, state_key
from engine._limits import check_page_size
from engine._runtime.committer import Committer
from engine._runtime.ports import Database
from engine._runtime.snapshots import Snapshots
from engine._specs import FlowSpec
from engine._storage import reads, units
from engine._storage.records import ChannelDeletion, ChannelPublication, LoadPlan, RunInfo
from engine._tokens import seal, unseal
from engine.attribute import check_instance_key
from engine.channel import ChannelMessage, _Channel, check_message_id
from engine.clock import Clock, to_micros
from engine.errors import (
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    InvalidArgumentError,
    InvalidPageTokenError,
)
from engine.registry import Registry
from engine.results import ChannelInfo, ChannelList, ChannelMessagePage

_SIZES = LoadPlan(names=(), channel_sizes=True)

ChannelRef = _Channel[Any] | str


class ChannelCalls:
    """listChannels, listChannelMessages, publishToChannel and deleteChannelMessage."""

    def __init__(
        self,
        *,
        registry: Registry,
        database: Database,
        snapshots: Snapshots,
        committer: Committer,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._database = database
        self._snapshots = snapshots
        self._committer = committer
        self._clock = clock

    async def list_channels(self, flow_id: str, run_id: str | None) -> ChannelList:
        """Return every Channel and every non-empty ChannelMap instance of the current (or
        latest) run, with its pending count."""
        check_id(flow_id, "flowId")
        snapshot = await self._snapshots.read(flow_id, run_id, _SIZES)
        if snapshot is None:
            raise FlowNotFoundError(
                f"Flow {flow_id} was not found", flow_id=flow_id, operation="listChannels"
            )
        spec = self._registry.spec(snapshot.run.flow_type)
        found: list[ChannelInfo] = []
        for name, channel in sorted(spec.channels.items()):
            if not channel.is_map:
                found.append(ChannelInfo(name, None, snapshot.sizes.get((name, ""), 0)))
                continue
            instances = sorted(i for (n, i) in snapshot.sizes if n == name)
            found.extend(ChannelInfo(name, i, snapshot.sizes[(name, i)]) for i in instances)
        return ChannelList(flow_id, snapshot.run.run_id, found)

    async def list_messages(
        self,
        flow_id: str,
        channel: ChannelRef,
        instance: str | None,
        run_id: str | None,
        page_size: int,
        page_token: str,
    ) -> ChannelMessagePage:
        """Return pending messages of one queue of the current (or latest) run, oldest first."""
        check_id(flow_id, "flowId")
        check_page_size(page_size)
        run = await self._run(flow_id, run_id, "listChannelMessages", active=False)
        declared, key = self._queue(self._registry.spec(run.flow_type), channel, instance)
        after = _decode_token(page_token, run.run_id, state_key(*key))
        rows = await reads.channel_page(self._database, run.run_id, *key, after, page_size + 1)
        more = len(rows) > page_size
        rows = rows[:page_size]
        messages = [
            ChannelMessage(
                m.message_id,
                _codec.decode(declared.value_type, m.value),
                datetime.fromtimestamp(m.published_at / 1_000_000, UTC),
            )
            for _, m in rows
        ]
        token = _encode_token(run.run_id, state_key(*key), rows[-1][0]) if more else ""
        return ChannelMessagePage(flow_id, run.run_id, messages, token)

    async def publish(
        self, flow_id: str, channel: ChannelRef, value: Any, instance: str | None
    ) -> str:
        """Publish ``value`` to a queue of the Flow's active run; return the message ID."""
        check_id(flow_id, "flowId")
        run = await self._run(flow_id, None, "publishToChannel", active=True)
        declared, key = self._queue(self._registry.spec(run.flow_type), channel, instance)
        value = _codec.validate_client_value(declared.value_type, value, what="value")
        publication = ChannelPublication(*key, _codec.encode(value, declared.value_type))
        result = await self._committer.commit(
            units.publish_message(
                flow_id=flow_id,
                run_id=run.run_id,
                publication=publication,
                now=to_micros(self._clock.now()),
            )
        )
        message_id: str = result.value
        return message_id

    async def delete(
        self, flow_id: str, channel: ChannelRef, message_id: str, instance: str | None
    ) -> None:
        """Delete a pending message of the Flow's active run, or raise
        ChannelMessageNotFoundError when it is not pending."""
        check_id(flow_id, "flowId")
        message_id = check_message_id(message_id)
        run = await self._run(flow_id, None, "deleteChannelMessage", active=True)
        _, key = self._queue(self._registry.spec(run.flow_type), channel, instance)
        await self._committer.commit(
            units.delete_message(
                flow_id=flow_id,
                run_id=run.run_id,
                deletion=ChannelDeletion(*key, message_id),
                now=to_micros(self._clock.now()),
            )
        )

    async def _run(
        self, flow_id: str, run_id: str | None, operation: str, *, active: bool
    ) -> RunInfo:
        run = await reads.load_run(self._database, flow_id, run_id)
        if run is None or (active and not run.is_running):
            error = FlowNotActiveOrNotFoundError if active else FlowNotFoundError
            raise error(
                f"Flow {flow_id} has no {'active ' if active else ''}run",
                flow_id=flow_id,
                operation=operation,
            )
        return run

    @staticmethod
    def _queue(
        spec: FlowSpec, channel: ChannelRef, instance: str | None
    ) -> tuple[_Channel[Any], tuple[str, str]]:
        """Return the declaration and the (name, instance) queue ``channel`` addresses."""
        name = channel.name if isinstance(channel, _Channel) else channel
        declared = spec.channels.get(name) if isinstance(name, str) else None
        if declared is None or (isinstance(channel, _Channel) and channel is not declared):
            raise InvalidArgumentError(
                f"Flow type {spec.flow_type} declares no Channel or ChannelMap named {name!r}",
                field="channel",
            )
        if declared.is_map:
            return declared, (name, check_instance_key(instance, "instance"))
        if instance not in (None, ""):
            raise InvalidArgumentError(
                f"{name!r} is a Channel, not a ChannelMap; omit instance", field="instance"
            )
        return declared, (name, "")


def _encode_token(run_id: str, queue: str, seq: int) -> str:
    raw = json.dumps({"r": run_id, "q": queue, "s": seq}, separators=(",", ":")).encode()
    return seal(raw)


def _decode_token(token: str, run_id: str, queue: str) -> int:
    if not token:
        return 0
    try:
        data = json.loads(unseal(token))
        seq = data["s"]
        if data["r"] != run_id or data["q"] != queue or not isinstance(seq, int) or seq < 0:
            raise ValueError
        return seq
    except (ValueError, KeyError, TypeError, RecursionError):
        raise InvalidPageTokenError(
            "pageToken is malformed or belongs to another run or Channel", field="pageToken"
        ) from None
