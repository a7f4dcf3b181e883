"""Helpers for testing Flows without sleeping.

``await settle(engine)`` returns once the engine has nothing left to do at the current time: no
Step attempt running, no commit in flight, no execution or timer due. Pair it with a
:class:`~engine.clock.ManualClock` to skip time, as Temporal's time-skipping test environment
does::

    clock = ManualClock()
    async with Engine(registry, EngineConfig(clock=clock, ...)) as eng:
        await eng.start_flow(OrderFlow, "order-7", "7")
        await settle(eng)                        # the Step is now waiting on its Timer
        await clock.advance_when_idle(30)        # fire it, and everything it leads to
        assert (await eng.wait_for_flow("order-7")).status == "COMPLETED"

A Step waiting for a lock, a future timer, or an RPC the test has not sent yet is idle: only
the test (or time) can move it. A handler blocked on something the test releases later keeps
the engine busy, so release it before settling. Long-polling client calls (waitForFlow,
WaitForAttributeMatch, readStream) wait on real time; :func:`waiting_calls` tells a test when
one is registered, so the write meant to answer it comes after.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.clock import ManualClock, wait_idle
from engine.engine import Engine

__all__ = ["ManualClock", "WaitingCalls", "announces_commits", "settle", "waiting_calls"]


@dataclass(frozen=True)
class WaitingCalls:
    """The long-polling client calls an engine holds open right now.

    A test that starts such a call in a task can wait until the call is registered before it
    makes the write that should answer it (``eventually(lambda: waiting_calls(eng).x == 1)``).
    """

    #: waitForFlow calls waiting for their run to close.
    flow_results: int
    #: WaitForAttributeMatch calls no commit has matched yet.
    attribute_matches: int
    #: readStream calls waiting for a message.
    stream_reads: int


def announces_commits(engine: Engine) -> bool:
    """Whether ``engine`` sends notices of its commits to other processes: never on SQLite
    (its process is the only one), and on PostgreSQL unless it is alone on the database."""
    return engine._announces_commits()


def waiting_calls(engine: Engine) -> WaitingCalls:
    """Return how many long-polling calls ``engine`` holds open."""
    return WaitingCalls(*engine._waiting_calls())


async def settle(engine: Engine, *, give_up_after: float = 30.0) -> None:
    """Return once no Step, commit or timer of ``engine`` is due.

    Raises TimeoutError naming the work still in hand after ``give_up_after`` seconds of real
    time (a handler that never returns, say).
    """
    await wait_idle(engine._idle_probe(), give_up_after)
