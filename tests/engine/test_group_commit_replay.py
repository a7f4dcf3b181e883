"""A unit replayed after its group commit rolled back creates its Step executions again.

Found by the soak test. When a unit of a SQLite group commit fails (here a start refused with
FLOW_ALREADY_STARTED, which is decided inside its unit), the batch is rolled back and its other
units are replayed. A replayed unit that created a Step execution kept the ID it was given the
first time (``rows.insert_steps`` sets it on the in-memory record), so the replay skipped the
per-run counter: the counter ended one short, and the next execution of that Step type in that
run got the same ID. Its commit then failed with ``UNIQUE constraint failed:
step_executions.id`` on every retry, for good: a Step looping on a Channel (ChannelFlow's
HandlePrioritizedMessage) stopped consuming, and an RPC that starts a Step
(``hold_counter_lock``) answered 500. A unit now numbers again, on replay, the executions it
numbered the first time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import engine
from engine import FlowAlreadyStartedError
from patterns.primitives.channel.flow import ChannelFlow
from patterns.primitives.rpc.flow import CounterFlow
from tests.conftest import running_engine
from tests.support.waiting import eventually

MESSAGES = 40


async def test_refused_starts_in_the_same_group_commit_never_stop_a_looping_step(
    engine_config: engine.EngineConfig,
) -> None:
    """Every message published while other callers' starts are refused is consumed."""
    # FULL makes commits slow enough that concurrent units queue up and share a transaction.
    config = dataclasses.replace(engine_config, sqlite_synchronous="FULL")
    async with running_engine([ChannelFlow(), CounterFlow()], config) as eng:
        await eng.start_flow(ChannelFlow, "consumer")
        await eng.start_flow(CounterFlow, "taken")

        async def start_taken_again() -> None:
            """Start a running Flow ID: refused inside its commit unit."""
            with contextlib.suppress(FlowAlreadyStartedError):
                await eng.start_flow(CounterFlow, "taken")

        for n in range(MESSAGES):
            await asyncio.gather(
                eng.publish_to_channel("consumer", "prioritized-messages", f"m{n}"),
                *(start_taken_again() for _ in range(3)),
            )

        async def all_handled() -> bool:
            """Assert the Step has recorded every message."""
            found = await eng.get_attributes("consumer", ["primitive-channel-handled"])
            handled = found.values.get("primitive-channel-handled") or []
            assert len(handled) == MESSAGES, f"{len(handled)} of {MESSAGES} messages handled"
            return True

        await eventually(all_handled, within=10, interval=0.2)
