"""RPCs, Attributes, attribute matches and Channels over REST."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import engine
from app.client.base import ClientBase, segment
from app.client.decoding import decode_value, parse_time, validate_value, without_nones
from app.client.flow_types import FlowTypeInfo, RPCTypes, flow_type_name

ChannelRef = engine.Channel[Any] | engine.ChannelMap[Any] | str

#: Errors answered after the invocation held its locks (the handler ran, or began to).


class StateCalls(ClientBase):
    """The RPC, Attribute and Channel calls of :class:`app.client.Client`."""

    async def invoke_rpc(
        self,
        rpc: Any,
        flow_id: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        options: engine.RPCInvokeOptions | None = None,
        flow_type: str | None = None,
    ) -> Any:
        """Invoke an RPC on the Flow's current (or given) run and return its output
        (invokeRpc); see ``Engine.invoke_rpc``.

        ``rpc`` is a Flow's RPC method (``flow.get_page``) or its name. Where the RPC's
        declaration is known (the method's Flow, or the Registry and the run's Flow type)
        the input is validated here as the engine validates it and the output decoded to the
        declared type; otherwise both stay JSON data. A ``lock_retry`` option is the server's
        to honour: its invocations take turns there.
        """
        declared = await self._rpc_types(rpc, flow_id, run_id, flow_type)
        name = rpc if isinstance(rpc, str) else declared.name if declared else ""
        if not isinstance(rpc, str):
            # A method names its Flow type: a run of another type is not this RPC's.
            flow_type = flow_type_name(rpc.__self__)
        if declared is not None and options is not None:
            declared.check_options(options)
        if declared is None:
            data = engine.to_json_data(input)
        elif not declared.takes_input or declared.input_type is None:
            if input is not None:
                raise engine.InvalidArgumentError(
                    f"RPC {declared.name} takes a null input", field="input"
                )
            data = None
        else:
            data = validate_value(declared.input_type, input, what=f"input of RPC {name}")
        body = without_nones(
            {"input": data, "runId": run_id, "options": _options(options), "flowType": flow_type}
        )
        answer = await self._call(
            "POST",
            f"/api/v1/flows/{segment(flow_id)}/rpcs/{segment(name)}",
            "invokeRpc",
            body=body,
        )
        output = answer.get("output")
        if declared is None:
            return output
        if declared.output_type is None:
            return None
        return decode_value(declared.output_type, output)

    async def _rpc_types(
        self, rpc: Any, flow_id: str, run_id: str | None, flow_type: str | None
    ) -> RPCTypes | None:
        """Return the declaration of ``rpc`` where the client can know it."""
        if isinstance(rpc, str):
            if flow_type is not None:
                known = self._types.get(flow_type)
                return None if known is None else known.rpcs.get(rpc)
            info = await self._info_of_run(flow_id, run_id)
            return None if info is None else info.rpcs.get(rpc)
        owner = getattr(rpc, "__self__", None)
        function = getattr(rpc, "__func__", None)
        info = self._types.get(owner) if isinstance(owner, engine.Flow) else None
        found = None if info is None or function is None else info.rpc_of(function)
        if found is None:
            raise engine.InvalidArgumentError(
                f"{rpc!r} is not an RPC method of a registered Flow instance", field="rpc"
            )
        return found

    # -- Attributes -----------------------------------------------------------------------------

    async def get_attributes(
        self,
        flow_id: str,
        names: Iterable[str] = (),
        run_id: str | None = None,
        *,
        as_of_event_id: int | None = None,
    ) -> engine.AttributeValues:
        """Read Attribute values from one committed state (getAttributes).

        Each value is decoded with its definition where the run's Flow type is known (the
        Registry, or a Flow class the client started it with), else it stays JSON data.
        """
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}/attributes",
            "getAttributes",
            params=without_nones(
                {"name": list(names) or None, "runId": run_id, "asOfEventId": as_of_event_id}
            ),
        )
        values: dict[str, Any] = data["values"]
        info = await self._info_of_run(data["flowId"], data["runId"]) if values else None
        return engine.AttributeValues(
            data["flowId"], data["runId"], _decoded(info, values, lambda i: i.states)
        )

    async def set_attributes(
        self, flow_id: str, values: Mapping[str, Any], run_id: str | None = None
    ) -> tuple[str, str]:
        """Write Attributes of the active run, None deleting (setAttributes); return (flow
        ID, run ID)."""
        data = await self._call(
            "PUT",
            f"/api/v1/flows/{segment(flow_id)}/attributes",
            "setAttributes",
            body=without_nones(
                {
                    "runId": run_id,
                    "values": {k: engine.to_json_data(v) for k, v in dict(values).items()},
                }
            ),
        )
        return str(data["flowId"]), str(data["runId"])

    async def wait_for_attribute_match(
        self,
        flow_id: str,
        name: str,
        operator: engine.MatchOperator | str,
        value: Any,
        *,
        instance: str | None = None,
        wait_seconds: float = 0.0,
    ) -> engine.AttributeMatch:
        """Wait up to ``wait_seconds`` until an Attribute compares true with ``value``
        (waitForAttributeMatch)."""
        body = without_nones(
            {
                "name": name,
                "instance": instance,
                "operator": str(operator),
                "value": engine.to_json_data(value),
                "waitSeconds": wait_seconds,
            }
        )
        body.setdefault("value", None)
        data = await self._call(
            "POST",
            f"/api/v1/flows/{segment(flow_id)}/attribute-matches",
            "waitForAttributeMatch",
            body=body,
            wait_seconds=wait_seconds,
        )
        return engine.AttributeMatch(bool(data["matched"]), data.get("value"))

    # -- Channels -------------------------------------------------------------------------------

    async def list_channels(self, flow_id: str, run_id: str | None = None) -> engine.ChannelList:
        """List the run's Channels and non-empty ChannelMap instances (listChannels)."""
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}/channels",
            "listChannels",
            params={"runId": run_id} if run_id else None,
        )
        return engine.ChannelList(
            data["flowId"],
            data["runId"],
            [engine.ChannelInfo(c["name"], c.get("instance"), c["size"]) for c in data["channels"]],
        )

    async def list_channel_messages(
        self,
        flow_id: str,
        channel: ChannelRef,
        *,
        instance: str | None = None,
        run_id: str | None = None,
        page_size: int = 100,
        page_token: str = "",
    ) -> engine.ChannelMessagePage:
        """Return pending messages of a Channel, oldest first (listChannelMessages); values
        decoded with the Channel's type where it is known."""
        name = _channel_name(channel)
        data = await self._call(
            "GET",
            f"/api/v1/flows/{segment(flow_id)}/channels/{segment(name)}/messages",
            "listChannelMessages",
            params=without_nones(
                {
                    "instance": instance,
                    "runId": run_id,
                    "pageSize": page_size,
                    "pageToken": page_token or None,
                }
            ),
        )
        value_type: Any = getattr(channel, "value_type", None)
        if value_type is None and data["messages"]:
            info = await self._info_of_run(data["flowId"], data["runId"])
            value_type = None if info is None else info.channels.get(name)
        return engine.ChannelMessagePage(
            data["flowId"],
            data["runId"],
            [
                engine.ChannelMessage(
                    m["messageId"],
                    decode_value(Any if value_type is None else value_type, m.get("value")),
                    parse_time(m["publishedAt"]),
                )
                for m in data["messages"]
            ],
            data.get("nextPageToken") or "",
        )

    async def publish_to_channel(
        self, flow_id: str, channel: ChannelRef, value: Any, *, instance: str | None = None
    ) -> str:
        """Publish ``value`` to a Channel of the Flow's active run; return the message ID
        (publishToChannel)."""
        data = await self._call(
            "POST",
            f"/api/v1/flows/{segment(flow_id)}/channels/{segment(_channel_name(channel))}/messages",
            "publishToChannel",
            body=without_nones({"value": engine.to_json_data(value), "instance": instance}),
        )
        return str(data["messageId"])

    async def delete_channel_message(
        self, flow_id: str, channel: ChannelRef, message_id: str, *, instance: str | None = None
    ) -> None:
        """Delete a pending Channel message by ID (deleteChannelMessage)."""
        name = _channel_name(channel)
        await self._call(
            "DELETE",
            f"/api/v1/flows/{segment(flow_id)}/channels/{segment(name)}/messages/"
            f"{segment(message_id)}",
            "deleteChannelMessage",
            params={"instance": instance} if instance else None,
        )


def _channel_name(channel: ChannelRef) -> str:
    return channel if isinstance(channel, str) else channel.name


def _options(options: engine.RPCInvokeOptions | None) -> dict[str, Any] | None:
    """Return the body's ``options``: each load or lock as ``map/instance``, and the lock
    retry in seconds."""
    if options is None:
        return None
    body: dict[str, Any] = {
        "loadAttributeMapInstances": [load.key for load in options.load_attribute_map_instances],
        "lockAttributeMapInstances": [lock.key for lock in options.lock_attribute_map_instances],
        "loadChannelMapInstances": [load.key for load in options.load_channel_map_instances],
    }
    if options.lock_retry is not None:
        body["lockRetrySeconds"] = options.lock_retry.total_seconds()
    return body


def _decoded(
    info: FlowTypeInfo | None,
    values: dict[str, Any],
    declared: Callable[[FlowTypeInfo], dict[str, Any]],
) -> dict[str, Any]:
    """Return wire values (``name`` or ``map/instance`` keys) decoded by their definitions."""
    if info is None:
        return values
    types = declared(info)
    return {
        key: decode_value(types.get(key.partition("/")[0], Any), value)
        for key, value in values.items()
    }
