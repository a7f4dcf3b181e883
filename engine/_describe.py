"""The registry as data, for listFlowTypes and the playground."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engine import _codec
from engine._specs import FlowSpec
from engine.results import (
    AttributeDescription,
    FlowTypeDescription,
    IndexDescription,
    RPCDescription,
    StepTypeDescription,
    StreamDescription,
)


def _schema(value_type: Any) -> dict[str, Any]:
    if value_type is None:
        return {"type": "null"}
    if value_type is Any or value_type is object:
        return {}
    try:
        return _codec.adapter_for(value_type).json_schema()
    except Exception:  # a type pydantic cannot describe is still usable
        return {}


def describe_flow_type(
    spec: FlowSpec, default_rpc_timeout: timedelta | None = None
) -> FlowTypeDescription:
    """Describe one registered Flow type."""
    return FlowTypeDescription(
        flow_type=spec.flow_type,
        start_step=spec.start_step,
        input_schema=_schema(spec.input_type),
        steps=[
            StepTypeDescription(
                step_type=s.step_type,
                input_schema=_schema(s.input_type),
                has_wait_for=s.has_wait_for,
                wait_for_locks=[lock.key for lock in s.options.wait_for_lock_attributes],
                execute_locks=[lock.key for lock in s.options.execute_lock_attributes],
            )
            for s in spec.steps.values()
        ],
        rpcs=[
            RPCDescription(
                name=r.name,
                input_schema=_schema(r.input_type),
                output_schema=_schema(r.output_type),
                lock_attributes=[lock.key for lock in r.lock_attributes],
                is_transactional=r.transactional,
                # An RPC without its own timeout runs under the server's default.
                timeout_seconds=(
                    r.timeout
                    if r.has_own_timeout or default_rpc_timeout is None
                    else default_rpc_timeout
                ).total_seconds(),
            )
            for r in sorted(spec.rpcs.values(), key=lambda r: r.name)
        ],
        attributes=[
            AttributeDescription(
                name=s.name,
                kind="AttributeMap" if s.is_map else "Attribute",
                schema=_schema(s.value_type),
                hard_delete_on_null=s.hard_delete_on_null,
                index=None
                if s.index is None
                else IndexDescription(type=s.index.type.value, key=s.index_key),
            )
            for s in sorted(spec.states.values(), key=lambda s: s.name)
        ],
        streams=[
            StreamDescription(
                name=st.name,
                schema=_schema(st.value_type),
                stream_capacity_bytes=st.stream_capacity_bytes,
            )
            for st in sorted(spec.streams.values(), key=lambda st: st.name)
        ],
    )
