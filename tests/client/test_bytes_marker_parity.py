"""A ``{"$bytes": "<base64>"}`` object reads the same through the Client as in process.

The marker means bytes only where the declared type may hold bytes at its place; elsewhere
(a ``dict[str, str]`` that has the key ``$bytes``, a model's ``dict[str, Any]`` field) it is an
object like any other. Each test runs once on the Engine and once on ``app.client.Client``
over a server process of the same Flow, and asserts the exact values (bytes or dict), so the
same declared type and data give the same value, or the same error, on both sides.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from engine import (
    Attribute,
    Channel,
    Context,
    Flow,
    InvalidArgumentError,
    StartFlowOptions,
    Stream,
    rpc,
)
from tests.support.flow_clients import ServeFlows

#: An object whose one key is the marker, and the bytes it would stand for ("hi").
MARKER = {"$bytes": "aGk="}
HI = b"hi"


class Tagged(BaseModel):
    """A model with a bytes field next to fields that may hold a marker-shaped dict."""

    labels: dict[str, str]
    extra: dict[str, Any]
    data: bytes


class Markers(Flow[None]):
    """Attributes, a Channel, a Stream and RPCs whose declared types may or may not hold bytes
    where a marker-shaped object stands."""

    labels = Attribute("labels", dict[str, str])
    blobs = Attribute("blobs", dict[str, bytes])
    raw = Attribute("raw", bytes)
    anything = Attribute("anything", Any)
    tagged = Attribute("tagged", Tagged)
    notes = Channel("notes", dict[str, str])
    progress = Stream("progress", dict[str, str])

    @rpc
    def labels_of(self, context: Context, input: dict[str, str]) -> dict[str, str]:
        return input

    @rpc
    def blobs_of(self, context: Context, input: dict[str, bytes]) -> dict[str, bytes]:
        return input

    @rpc
    def raw_of(self, context: Context, input: bytes) -> bytes:
        return input

    @rpc
    def tagged_of(self, context: Context, input: Tagged) -> Tagged:
        return input


def _exactly(value: Any, expected: Any) -> None:
    """Assert ``value == expected`` with the same types throughout (bytes is not a dict)."""
    assert value == expected
    assert type(value) is type(expected)
    if isinstance(expected, dict):
        for key, inner in expected.items():
            _exactly(value[key], inner)
    elif isinstance(expected, BaseModel):
        for name in type(expected).model_fields:
            _exactly(getattr(value, name), getattr(expected, name))


async def test_attributes_with_a_marker_shaped_object_read_back_as_in_process(
    serve_flows: ServeFlows,
) -> None:
    tagged = Tagged(labels=MARKER, extra=MARKER, data=HI)
    async with serve_flows([Markers()]) as flows:
        initial = {
            "labels": MARKER,
            "blobs": {"$bytes": HI},
            "raw": HI,
            "anything": MARKER,
            "tagged": tagged,
        }
        await flows.start_flow(Markers, "m", None, StartFlowOptions(initial_attributes=initial))
        values = (await flows.get_attributes("m", list(initial))).values
    _exactly(values["labels"], MARKER)  # a dict[str, str] may have the key "$bytes"
    _exactly(values["blobs"], {"$bytes": HI})  # a key like any other; its value is bytes
    _exactly(values["raw"], HI)
    _exactly(values["anything"], HI)  # under Any, a marker is bytes
    _exactly(values["tagged"], tagged)


async def test_rpc_inputs_and_outputs_with_a_marker_shaped_object_are_as_in_process(
    serve_flows: ServeFlows,
) -> None:
    tagged = Tagged(labels=MARKER, extra=MARKER, data=HI)
    async with serve_flows([Markers()]) as flows:
        await flows.start_flow(Markers, "m")
        _exactly(await flows.invoke_rpc("labels_of", "m", MARKER), MARKER)
        _exactly(await flows.invoke_rpc("raw_of", "m", MARKER), HI)
        # The dict is at a dict's place, so its value "aGk=" is JSON text for bytes.
        _exactly(await flows.invoke_rpc("blobs_of", "m", MARKER), {"$bytes": b"aGk="})
        _exactly(await flows.invoke_rpc("blobs_of", "m", {"$bytes": HI}), {"$bytes": HI})
        _exactly(await flows.invoke_rpc("tagged_of", "m", tagged), tagged)
        wire = {"labels": MARKER, "extra": MARKER, "data": MARKER}
        _exactly(await flows.invoke_rpc("tagged_of", "m", wire), tagged)
        # Where bytes may stand, a marker must hold base64 (the same refusal on both sides).
        with pytest.raises(InvalidArgumentError, match="base64"):
            await flows.invoke_rpc("raw_of", "m", {"$bytes": "aGk"})
        with pytest.raises(InvalidArgumentError, match="input of RPC labels_of"):
            await flows.invoke_rpc("labels_of", "m", {"$bytes": HI})


async def test_channel_and_stream_messages_with_a_marker_shaped_object_are_as_in_process(
    serve_flows: ServeFlows,
) -> None:
    async with serve_flows([Markers()]) as flows:
        await flows.start_flow(Markers, "m")
        await flows.publish_to_channel("m", "notes", MARKER)
        page = await flows.list_channel_messages("m", "notes")
        await flows.write_stream("m", "progress", MARKER, source="test", flow_type=Markers)
        message = await flows.read_stream("m", "progress", flow_type=Markers)
        listed = await flows.list_stream_messages("m", "progress", flow_type=Markers)
    assert len(page.messages) == 1
    _exactly(page.messages[0].value, MARKER)
    assert message is not None
    _exactly(message.value, MARKER)
    _exactly(listed.messages[0].value, MARKER)
