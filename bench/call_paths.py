"""How many of the engine's modules one RPC and one Step pass through on their way to COMMIT.

``python -m bench.call_paths [--url URL]`` traces, with ``sys.setprofile``, every Python call
made in the engine's own modules while one locked RPC that writes an Attribute is invoked,
and while one Flow of one Step runs from its start to its close (the Step's attempt, its
commit and the run's close), on a warmed-up engine. It prints, for each: the modules entered,
how many times the path entered a module from another one (the passes), and the modules
entered more than once with their counts. The codec modules are counted apart.

It reads only public names of ``engine``, so the same script measures any build of it (run it
with ``PYTHONPATH`` pointing at another checkout to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

from engine import (
    Attribute,
    Context,
    Engine,
    EngineConfig,
    Flow,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    graceful_complete,
    rpc,
)


class Bump(Step[int]):
    """Writes the counter and completes."""

    def execute(self, context: Context, input: int) -> StepDecision:
        self.flow.count.set(context, input)  # type: ignore[attr-defined]
        return graceful_complete(input)


class OneStepFlow(Flow[int]):
    """One Step that writes an Attribute and completes the run."""

    count = Attribute("count", int)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Bump())


class CountFlow(Flow[None]):
    """An RPC-only Flow: a counter behind a locked RPC."""

    count = Attribute("count", int)

    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    @rpc(lock_attributes=(count.lock(),))
    def add(self, context: Context, input: int) -> RPCResult[int]:
        value = (self.count.get(context) or 0) + input
        self.count.set(context, value)
        return RPCResult(value)


class CallPath:
    """The modules one traced stretch of work entered, in order, and the call stacks that
    entered a module again on their way down (a module, then another, then the first)."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.reentered: Counter[tuple[str, ...]] = Counter()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("engine"):
            return
        caller = frame.f_back
        came_from = caller.f_globals.get("__name__", "") if caller is not None else ""
        if came_from == module:
            return
        self.entries.append(module)
        stack = _modules_of(frame)
        if len(set(stack)) < len(stack):
            self.reentered[tuple(stack)] += 1


#: Where a commit's follow-ups begin: each listener the Notifier calls starts a path of its own
#: (it may well enter the module that made the commit: the scheduler queues the next Step).
FOLLOW_UPS = "engine._runtime.notifier"


def _modules_of(frame: FrameType | None) -> list[str]:
    """The engine modules on ``frame``'s stack, outermost first, each run of one module once,
    from the last commit follow-up's start on."""
    found: list[str] = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == FOLLOW_UPS:
            break
        if module.startswith("engine") and (not found or found[-1] != module):
            found.append(module)
        frame = frame.f_back
    return found[::-1]


async def traced(work: Callable[[], Awaitable[Any]]) -> CallPath:
    path = CallPath()
    sys.setprofile(path.profile)
    try:
        await work()
    finally:
        sys.setprofile(None)
    return path


def report(name: str, path: CallPath) -> dict[str, Any]:
    entered = Counter(path.entries)
    codec = sum(n for module, n in entered.items() if "codec" in module)
    again = {m for stack in path.reentered for m in stack if stack.count(m) > 1}
    print(
        f"\n{name}: {len(entered)} modules, {len(path.entries)} passes ({codec} in the "
        f"codec); {sum(path.reentered.values())} calls down a stack that entered a module "
        f"again ({', '.join(sorted(again)) or 'none'})"
    )
    for module, n in entered.most_common():
        print(f"  {n:3d}  {module}")
    for stack, n in path.reentered.most_common(3):
        print(f"  again x{n}: {' > '.join(m.removeprefix('engine.') for m in stack)}")
    return {
        "modules": len(entered),
        "passes": len(path.entries),
        "codec": codec,
        "reentering_calls": sum(path.reentered.values()),
    }


async def main(url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = EngineConfig(
            database_url=url or f"sqlite+aiosqlite:///{Path(tmp) / 'paths.db'}",
            blob_dir=str(Path(tmp) / "blobs"),
        )
        counter, one_step = CountFlow(), OneStepFlow()
        engine = Engine(Registry([counter, one_step]), config)
        await engine.start()
        try:
            await engine.start_flow(CountFlow, "counter", None)
            for n in range(5):  # warm up: caches, prepared statements, plans
                await engine.invoke_rpc(counter.add, "counter", n)
                await _one_flow(engine, f"warm-{n}")
            rpc_path = await traced(lambda: engine.invoke_rpc(counter.add, "counter", 1))
            step_path = await traced(lambda: _one_flow(engine, "traced"))
        finally:
            await engine.close()
    return {"rpc": report("one locked RPC", rpc_path), "step": report("one 1-Step Flow", step_path)}


async def _one_flow(engine: Engine, flow_id: str) -> None:
    await engine.start_flow(OneStepFlow, flow_id, 1)
    await engine.wait_for_flow(flow_id, wait_seconds=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="a database URL (default: a new SQLite file)")
    args = parser.parse_args()
    asyncio.run(main(args.url))
