"""Streams over REST: client writes, long-polling reads and newest-first listing."""

from __future__ import annotations

from typing import Any

import engine
from app.client.base import ClientBase, segment
from app.client.decoding import stream_message, without_nones
from app.client.flow_types import FlowRef, flow_type_name

StreamRef = engine.Stream[Any] | str


class StreamCalls(ClientBase):
    """The Stream calls of :class:`app.client.Client`."""

    def _stream_path(self, flow_id: str, stream: StreamRef, flow_type: FlowRef | None) -> str:
        """Return the Stream's path; a declaration one known Flow type declares needs no
        ``flow_type`` (as with the engine), a name does."""
        if flow_type is not None:
            self._types.get(flow_type)  # a Flow class teaches the client its Stream types
            kind = flow_type_name(flow_type)
        elif isinstance(stream, engine.Stream):
            owners = [
                i.flow_type for i in self._types.all() if i.streams.get(stream.name) is stream
            ]
            if len(owners) != 1:
                raise engine.StreamNotFoundError(
                    f"{stream!r} is declared by {len(owners)} registered Flow types; "
                    "pass flow_type to choose one"
                    if owners
                    else f"{stream!r} is not declared by a registered Flow type"
                )
            kind = owners[0]
        else:
            raise engine.InvalidArgumentError(
                "flow_type is needed when the Stream is given by name", field="flowType"
            )
        name = stream.name if isinstance(stream, engine.Stream) else stream
        return f"/api/v1/streams/{segment(kind)}/{segment(flow_id)}/{segment(name)}"

    def _value_type(self, stream: StreamRef, flow_type: FlowRef | None) -> Any:
        if isinstance(stream, engine.Stream):
            return stream.value_type
        info = self._types.get(flow_type)
        found = None if info is None else info.streams.get(stream)
        return Any if found is None else found.value_type

    async def write_stream(
        self,
        flow_id: str,
        stream: StreamRef,
        value: Any,
        *,
        source: str,
        flow_type: FlowRef | None = None,
    ) -> str:
        """Append ``value`` to a Flow's Stream as a client; return its resume token
        (writeStream)."""
        data = await self._call(
            "POST",
            self._stream_path(flow_id, stream, flow_type) + "/messages",
            "writeStream",
            body={"source": source, "value": engine.to_json_data(value)},
        )
        return str(data["resumeToken"])

    async def read_stream(
        self,
        flow_id: str,
        stream: StreamRef,
        resume_token: str = "",
        *,
        wait_seconds: float = 0.0,
        flow_type: FlowRef | None = None,
    ) -> engine.StreamMessage[Any] | None:
        """Return the message after ``resume_token``, waiting up to ``wait_seconds`` for one
        (readStream); None when none came."""
        data = await self._call(
            "GET",
            self._stream_path(flow_id, stream, flow_type) + "/next",
            "readStream",
            params=without_nones(
                {"resumeToken": resume_token or None, "waitSeconds": wait_seconds}
            ),
            wait_seconds=wait_seconds,
        )
        message = data.get("message")
        if message is None:
            return None
        return stream_message(message, self._value_type(stream, flow_type))

    async def list_stream_messages(
        self,
        flow_id: str,
        stream: StreamRef,
        page_size: int | None = None,
        before_page_token: str = "",
        *,
        flow_type: FlowRef | None = None,
    ) -> engine.StreamMessagePage[Any]:
        """Return a page of a Stream's retained messages, newest first
        (listStreamMessages)."""
        data = await self._call(
            "GET",
            self._stream_path(flow_id, stream, flow_type) + "/messages",
            "listStreamMessages",
            params=without_nones(
                {"pageSize": page_size, "beforePageToken": before_page_token or None}
            ),
        )
        value_type = self._value_type(stream, flow_type)
        return engine.StreamMessagePage(
            [stream_message(m, value_type) for m in data["messages"]],
            data.get("nextPageToken") or "",
        )
