"""The DBOS Transact side of the flow_throughput scenario: one workflow of three steps.

Importing this module needs the ``bench`` extra (``pip install -e '.[bench]'``). The decorators
only register the functions; the worker constructs and launches DBOS itself. The arithmetic is
the same as the dexlite Flow's (A: x + 1, B: x * 2, C: x - 1), so results can be checked.
"""

from __future__ import annotations

from dbos import DBOS


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
