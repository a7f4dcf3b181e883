"""Schedules: the lag from a scheduled time to its Flow's start, with many Schedules at once.

A thousand Schedules (a hundred with ``--quick``) fire every second (overlap ALLOW_ALL, so
each time starts a Flow) on an in-process Engine over a fresh SQLite file, for a fixed span
of wall-clock time after a warm-up. The Flow has no start Step (starting it is the whole
action), so what is measured is the Schedules' own machinery: finding the due Schedules,
preparing each time's start and committing it with the Schedule's row.

Reported, from the engine's telemetry (``Telemetry.schedule_acted``): the lag p50, p99 and
max over every time started in the span, the Flows started per second, and the times skipped
(a time is skipped only when it is older than the catch-up window when acted on, here one
minute, which would mean the Schedules fell that far behind). Each time must have started
exactly one Flow: the runs with the search field ScheduleId are counted against the starts.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import engine
from bench._common import heading, latency_summary, temp_dir


class Beat(engine.Flow[None]):
    """A Flow without a start Step: its start is all a scheduled action does."""

    def get_steps(self) -> engine.StepList[None]:
        """No Steps: the run stays open, doing nothing."""
        steps: engine.StepList[None] = engine.StepList.empty()
        return steps


class LagRecorder(engine.Telemetry):
    """Keeps every scheduled start's lag and the started and skipped counts."""

    def __init__(self) -> None:
        self.recording = False
        self.lags: list[float] = []
        self.started = 0
        self.skipped = 0

    def schedule_acted(
        self, schedule_id: str, overlap: str, started: int, skipped: int, lags: list[float]
    ) -> None:
        """Record one Schedule's acting, once the warm-up is over."""
        if self.recording:
            self.lags.extend(lags)
            self.started += started
            self.skipped += skipped


def _sizes(quick: bool) -> dict[str, Any]:
    return {"schedules": 100 if quick else 1000, "warmup": 2.0, "span": 5.0 if quick else 15.0}


async def _run(tmp: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    recorder = LagRecorder()
    config = engine.EngineConfig(
        database_url=f"sqlite+aiosqlite:///{tmp / 'schedules.db'}",
        blob_dir=str(tmp / "blobs"),
        telemetry=recorder,
        retention=None,
    )
    async with engine.Engine(engine.Registry([Beat()]), config) as eng:
        count = sizes["schedules"]
        began = time.monotonic()
        for first in range(0, count, 100):
            await asyncio.gather(
                *(
                    eng.create_schedule(
                        engine.ScheduleSpec(
                            f"beat-{n:04d}",
                            Beat,
                            every=timedelta(seconds=1),
                            overlap=engine.OverlapPolicy.ALLOW_ALL,
                        )
                    )
                    for n in range(first, min(count, first + 100))
                )
            )
        created = time.monotonic() - began
        await asyncio.sleep(sizes["warmup"])  # the first times settle in; not measured
        recorder.recording = True
        await asyncio.sleep(sizes["span"])
        recorder.recording = False
        runs = 0
        token = ""
        while True:
            page = await eng.search_flows("ScheduleId STARTS_WITH 'beat-'", 1000, token)
            runs += len(page.flows)
            token = page.next_page_token
            if not token:
                break
        described = await eng.describe_schedule("beat-0000")
    flow_ids = {a.flow_id for a in described.recent_actions}
    assert len(flow_ids) == len(described.recent_actions), "a time started two Flows"
    return {
        "schedules": count,
        "create_seconds": round(created, 2),
        "span_seconds": sizes["span"],
        "lag": latency_summary(recorder.lags),
        "started_per_second": round(recorder.started / sizes["span"], 1),
        "skipped": recorder.skipped,
        "runs": runs,
    }


def main(quick: bool) -> dict[str, Any]:
    """Run the scenario and print its figures."""
    sizes = _sizes(quick)
    with temp_dir("schedules") as tmp:
        figures = asyncio.run(_run(tmp, sizes))
    heading(f"schedules: {figures['schedules']} Schedules every second, SQLite, in process")
    lag = figures["lag"]
    print(
        f"  lag from a scheduled time to its Flow's start over {figures['span_seconds']:.0f} s: "
        f"p50 {lag['p50_ms']:.1f} ms, p99 {lag['p99_ms']:.1f} ms, max {lag['max_ms']:.1f} ms "
        f"({lag['count']} starts)"
    )
    print(
        f"  {figures['started_per_second']:.0f} Flows started per second "
        f"(expected {figures['schedules']}); {figures['skipped']} times skipped; "
        f"{figures['runs']} runs in all; created in {figures['create_seconds']:.1f} s"
    )
    return figures
