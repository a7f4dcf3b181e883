"""The README's tour works as written."""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

from engine import EngineConfig, ManualClock
from tests.conftest import running_engine

README = Path(__file__).resolve().parents[2] / "README.md"


def _tour_module() -> types.ModuleType:
    text = README.read_text()
    start = text.index("```python\n") + len("```python\n")
    code = text[start : text.index("```", start)]
    module = types.ModuleType("orders_tour")
    sys.modules[module.__name__] = module  # annotations resolve against the module
    exec(compile(code, str(README), "exec"), module.__dict__)  # noqa: S102 - our own README
    return module


async def test_readme_tour_flow_takes_a_note_and_ships_after_its_timer(
    engine_config: EngineConfig,
) -> None:
    tour = _tour_module()
    clock = ManualClock()
    config = EngineConfig(**{**engine_config.__dict__, "clock": clock})
    async with running_engine([tour.OrderFlow()], config) as eng:
        await eng.start_flow("OrderFlow", "order-7", "7")
        assert await eng.invoke_rpc("add_note", "order-7", "fragile") == "fragile"
        assert (await eng.get_attributes("order-7", ["note"])).values == {"note": "fragile"}
        await asyncio.sleep(0.1)
        clock.advance(30)
        result = await eng.wait_for_flow("order-7", wait_seconds=5)
    assert result.status == "COMPLETED"
    assert result.completions[0].output == "order 7 shipped, note: fragile"
