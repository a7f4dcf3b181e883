"""Turning what a handler staged into the StagedEffects one commit applies.

Writes are encoded here (an indexed write carries its search value); hard-delete values go to
the blob store now, before the commit, as Dex does: one stored value per Flow ID and key,
overwritten in place, so a failed attempt's write can be observed.
"""

from __future__ import annotations

import asyncio
import enum
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from engine import _codec
from engine._ids import state_key
from engine._reuse import reuse_of
from engine._runtime.invocation import InvocationContext
from engine._runtime.ports import BlobStore
from engine._specs import FlowSpec
from engine._storage.indexes import index_write
from engine._storage.records import NOT_DECODED, AttributeWrite, QueuedStep, StagedEffects
from engine.errors import InvalidArgumentError, InvalidStepResultError
from engine.step import Step, StepMovement


async def encode_writes(
    blobs: BlobStore,
    spec: FlowSpec,
    flow_id: str,
    writes: Mapping[tuple[str, str], Any],
    texts: Mapping[tuple[str, str], str] | None = None,
    *,
    store_blobs: bool = True,
) -> tuple[AttributeWrite, ...]:
    """Encode staged writes, reusing ``texts`` a Context already encoded.

    Hard-delete values are written to (or erased from) the blob store before this returns;
    with ``store_blobs`` False the stored values are left as they are.
    """
    staged: list[AttributeWrite] = []
    blob_ops: list[tuple[str, str | None]] = []
    texts = texts or {}
    for (name, instance), value in writes.items():
        state = spec.states[name]
        if state.hard_delete_on_null and _number_or_boolean(value):
            # Its declaration (Any, object, an Enum of numbers) let it through: its value may not.
            key = state_key(name, instance)
            raise InvalidArgumentError(
                f"hard-delete Attribute {key} holds string or object values only, not a number "
                f"or a Boolean (got {type(value).__name__} {value!r})",
                field=key,
            )
        text = (
            None
            if value is None
            else (texts.get((name, instance)) or _codec.encode(value, state.value_type))
        )
        if state.hard_delete_on_null:
            blob_ops.append((state_key(name, instance), text))
            staged.append(
                AttributeWrite(name, instance, None, blob=text is not None, hard_delete=True)
            )
            continue
        index = None
        if state.index is not None and state.index_key is not None:
            index = index_write(state.index_key, state.index.type, value, state_key(name, instance))
        # The validated value, which no handler holds, goes along for the next holder of the
        # locks, when its type lets readers share it.
        decoded = NOT_DECODED if value is None or reuse_of(state.value_type) is None else value
        staged.append(AttributeWrite(name, instance, text, index=index, decoded=decoded))
    if blob_ops and store_blobs:

        def apply() -> None:
            for key, text in blob_ops:
                if text is None:
                    blobs.delete(flow_id, key)
                else:
                    blobs.put(flow_id, key, text)

        await asyncio.to_thread(apply)
    return tuple(staged)


async def stage(
    blobs: BlobStore, spec: FlowSpec, context: InvocationContext, **more: Any
) -> StagedEffects:
    """Return the Attribute writes and Channel work a handler staged on ``context``, with
    ``more`` of the StagedEffects fields (what the handler's result decided)."""
    return StagedEffects(
        writes=await encode_writes(
            blobs, spec, context.flow_id, context.staged_writes, context.staged_texts
        ),
        channel_deletions=context.staged_deletions,
        channel_publications=context.staged_publications,
        **more,
    )


def next_steps(
    spec: FlowSpec,
    *,
    run_id: str,
    flow_id: str,
    movements: Iterable[StepMovement],
) -> tuple[QueuedStep, ...]:
    """Validate movements against the Flow's Steps and turn them into new executions."""
    created: list[QueuedStep] = []
    for movement in movements:
        step_type = spec.step_classes.get(movement.step)
        if step_type is None:
            raise InvalidStepResultError(
                f"{movement.step.__name__} is not a Step of Flow {spec.flow_type}"
            )
        target = spec.steps[step_type]
        value = _codec.validate(
            target.input_type, movement.input, what=f"input of {step_type}", strict=False
        )
        created.append(
            QueuedStep(
                id="",  # numbered by the commit that creates it
                run_id=run_id,
                flow_id=flow_id,
                flow_type=spec.flow_type,
                step_type=step_type,
                input=_codec.encode(value),
                phase=target.first_phase,
            )
        )
    return tuple(created)


def step_type_names(spec: FlowSpec, classes: Iterable[type[Step[Any]]]) -> tuple[str, ...]:
    """Return the Step type names of ``classes`` (classes of no Step of this Flow select
    nothing)."""
    return tuple(sorted({spec.step_classes[c] for c in classes if c in spec.step_classes}))


def _number_or_boolean(value: Any) -> bool:
    """Return True for a number or a Boolean (bool is an int), or an Enum member of one."""
    if isinstance(value, enum.Enum):
        value = value.value
    return isinstance(value, numbers.Number)
