"""The DBOS Transact side of the flow_throughput and channels scenarios.

Importing this module needs the ``bench`` extra (``pip install -e '.[bench]'``). The decorators
only register the functions; the workers construct and launch DBOS themselves. flow_throughput's
workflow does the same arithmetic as the dexlite Flow (A: x + 1, B: x * 2, C: x - 1), so results
can be checked; channels' workflow loops on ``DBOS.recv`` as the dexlite Step loops on its wait.
"""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOS

#: Topic the channels scenario sends on; a negative message ends the receiving workflow.
INBOX_TOPIC = "inbox"
RECV_TIMEOUT_S = 60.0

#: (workflow ID, message) -> time.perf_counter() when the workflow's code first handled it.
#: The channels worker reads it (same process) for the publish → handled latency split.
HANDLED: dict[tuple[str, int], float] = {}


@DBOS.step()
async def async_step_a(x: int) -> int:
    """Step A (``async def``)."""
    return x + 1


@DBOS.step()
async def async_step_b(x: int) -> int:
    """Step B (``async def``)."""
    return x * 2


@DBOS.step()
async def async_step_c(x: int) -> int:
    """Step C (``async def``)."""
    return x - 1


@DBOS.workflow()
async def three_step_async(x: int) -> int:
    """A → B → C, each a checkpointed step, run on the caller's event loop."""
    return await async_step_c(await async_step_b(await async_step_a(x)))


@DBOS.step()
def sync_step_a(x: int) -> int:
    """Step A (``def``)."""
    return x + 1


@DBOS.step()
def sync_step_b(x: int) -> int:
    """Step B (``def``)."""
    return x * 2


@DBOS.step()
def sync_step_c(x: int) -> int:
    """Step C (``def``)."""
    return x - 1


@DBOS.workflow()
def three_step_sync(x: int) -> int:
    """A → B → C, each a checkpointed step, run in DBOS's executor threads."""
    return sync_step_c(sync_step_b(sync_step_a(x)))


@DBOS.workflow()
async def leaf_async(x: int, operation: str) -> int:
    """A child workflow of one checkpointed step: ``operation`` applied to x."""
    return await async_leaf_step(x, operation)


@DBOS.step()
async def async_leaf_step(x: int, operation: str) -> int:
    """The child's step (``async def``)."""
    return {"add_one": x + 1, "double": x * 2, "sub_one": x - 1}[operation]


@DBOS.workflow()
async def fan_out_async(x: int) -> int:
    """Start three child workflows, then complete with the sum of their results (the same
    arithmetic as dexlite's FanOutFlow)."""
    handles = [
        await DBOS.start_workflow_async(leaf_async, x, operation)
        for operation in ("add_one", "double", "sub_one")
    ]
    return sum([await handle.get_result() for handle in handles])


@DBOS.workflow()
def inbox_loop(ack: bool) -> dict[str, Any]:
    """Receive messages on INBOX_TOPIC until a negative one (or a timeout); tally them.

    Each ``DBOS.recv`` is a durable operation (it consumes the message and records it). With
    ``ack`` every message is acknowledged with ``DBOS.set_event(f"ack-{value}")``, the way a
    client can observe a DBOS workflow's progress.
    """
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    seen: set[int] = set()
    count = total = out_of_order = duplicates = 0
    timed_out = False
    while True:
        value = DBOS.recv(INBOX_TOPIC, timeout_seconds=RECV_TIMEOUT_S)
        if value is None:
            timed_out = True
            break
        if value < 0:
            break
        HANDLED.setdefault((workflow_id, value), time.perf_counter())
        out_of_order += value != count
        duplicates += value in seen
        seen.add(value)
        count += 1
        total += value
        if ack:
            DBOS.set_event(f"ack-{value}", value)
    return {
        "count": count,
        "sum": total,
        "out_of_order": out_of_order,
        "duplicates": duplicates,
        "timed_out": timed_out,
    }
