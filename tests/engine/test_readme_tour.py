"""The README's tour works as written, and so does the testing guide's test of it."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path

from engine import EngineConfig, ManualClock
from engine.testing import settle
from tests.conftest import running_engine

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TESTING_GUIDE = ROOT / "docs" / "guides" / "testing.md"


def _python_blocks(path: Path = README) -> list[str]:
    text = path.read_text()
    blocks, start = [], 0
    while (start := text.find("```python\n", start)) != -1:
        start += len("```python\n")
        blocks.append(text[start : text.index("```", start)])
    return blocks


def _tour_module() -> types.ModuleType:
    module = types.ModuleType("orders_tour")
    sys.modules[module.__name__] = module  # annotations resolve against the module
    code = _python_blocks()[0]
    exec(compile(code, str(README), "exec"), module.__dict__)
    return module


async def test_readme_tour_flow_takes_a_note_and_ships_after_its_timer(
    engine_config: EngineConfig,
) -> None:
    tour = _tour_module()
    clock = ManualClock()  # no retention either: its hourly check would be a deadline too
    config = dataclasses.replace(engine_config, clock=clock, retention=None)
    async with running_engine([tour.OrderFlow()], config) as eng:
        await eng.start_flow("OrderFlow", "order-7", "7")
        assert await eng.invoke_rpc("add_note", "order-7", "fragile") == "fragile"
        assert (await eng.get_attributes("order-7", ["note"])).values == {"note": "fragile"}
        await settle(eng)  # Ship now waits on its 5-second Timer
        assert (await eng.wait_for_flow("order-7")).status == "RUNNING"
        await clock.advance_when_idle(4.9)
        assert (await eng.wait_for_flow("order-7")).status == "RUNNING"
        await clock.advance_when_idle(0.1)
        result = await eng.wait_for_flow("order-7")
    assert result.status == "COMPLETED"
    assert result.completions[0].output == "order 7 shipped, note: fragile"


async def test_the_testing_guides_example_passes_as_written(tmp_path: Path) -> None:
    tour = _tour_module()
    [example] = [block for block in _python_blocks(TESTING_GUIDE) if "engine.testing" in block]
    exec(compile(example, str(TESTING_GUIDE), "exec"), tour.__dict__)
    await tour.test_an_order_ships_once_its_timer_fires(tmp_path)
