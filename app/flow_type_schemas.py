"""Wire schemas of listFlowTypes: each served Flow type with its Steps, RPCs and their JSON
Schemas, Attributes, indexes and Streams."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import engine
from app.schemas import JsonSchema, Wire


class StepTypeInfo(Wire):
    """A Step type: its input schema, whether it waits, and the locks of each phase."""

    step_type: str
    input_schema: JsonSchema
    has_wait_for: bool
    wait_for_locks: list[str]
    execute_locks: list[str]


class RPCInfo(Wire):
    """An RPC: its input and output JSON schemas, locks, transactionality and timeout."""

    name: str
    input_schema: JsonSchema
    output_schema: JsonSchema
    lock_attributes: list[str]
    is_transactional: bool
    timeout_seconds: float


class IndexInfo(Wire):
    """How an Attribute is searchable: its index type and key."""

    type: engine.IndexType
    key: str | None


class AttributeInfo(Wire):
    """An Attribute or AttributeMap with its value schema and index."""

    name: str
    kind: Literal["Attribute", "AttributeMap"]
    value_schema: JsonSchema = Field(alias="schema")
    hard_delete_on_null: bool
    index: IndexInfo | None


class StreamInfo(Wire):
    """A Stream with its value schema and declared capacity (null: the server's default)."""

    name: str
    value_schema: JsonSchema = Field(alias="schema")
    stream_capacity_bytes: int | None


class FlowTypeInfo(Wire):
    """A registered Flow type: its start Step, Steps, RPCs, Attributes and Streams."""

    flow_type: str
    start_step: str | None
    input_schema: JsonSchema
    steps: list[StepTypeInfo]
    rpcs: list[RPCInfo]
    attributes: list[AttributeInfo]
    streams: list[StreamInfo]

    @classmethod
    def of(cls, described: engine.FlowTypeDescription) -> FlowTypeInfo:
        """Return the wire form of a described Flow type."""
        return cls.model_validate(described, from_attributes=True)


class FlowTypesResponse(Wire):
    """The registry: Flow types with Steps, RPCs (with JSON schemas), state and indexes."""

    flow_types: list[FlowTypeInfo]


# -- Channels -----------------------------------------------------------------------------------
