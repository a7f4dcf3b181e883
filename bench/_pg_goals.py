"""PostgreSQL's goals (rows ``pg1``-``pg8`` of the goals table), read from the ``postgres``
and ``costs`` scenarios' figures of the same run.

- pg1-pg3: one server process on PostgreSQL against the SQLite one, over HTTP (locked RPCs on
  distinct Flows, registrations on one Flow) and in process (3-Step Flows): at least 0.5× each.
- pg4-pg5: CPU per locked RPC (in process, ``costs``): the dexlite process at most 1.5× the
  SQLite figure, PostgreSQL's own at most 300 µs.
- pg6-pg7: round trips counted on the wire, at most three per locked RPC and per Step (a
  3-Step Flow's round trips, its start and its result's read included, over its three Steps).
- pg8: two server processes on one database not slower than one (locked RPCs over HTTP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bench._goals import FAIL, NOT_RUN, PASS, Goal, scenario


def _bound(value: float, bound: float, *, at_most: bool) -> str:
    return PASS if (value <= bound if at_most else value >= bound) else FAIL


def _throughput(results: Mapping[str, Any]) -> list[Goal]:
    rows = [
        ("pg1", "rpc", "locked RPCs on distinct Flows over HTTP, PG 1 proc / SQLite"),
        ("pg2", "register", "registrations on one Flow over HTTP, PG 1 proc / SQLite"),
        ("pg3", "flows", "3-Step Flows in process, PG 1 proc / SQLite"),
    ]
    got, why = scenario(results, "postgres")
    if got is None:
        return [
            *(Goal(g, w, "-", "≥ 0.5×", None, NOT_RUN, why) for g, _, w in rows),
            Goal(
                "pg8",
                "locked RPCs over HTTP, PG 2 procs / PG 1 proc",
                "-",
                "≥ 1.0×",
                None,
                NOT_RUN,
                why,
            ),
        ]
    out = []
    for goal, kind, what in rows:
        value = float(got["ratios"][f"{kind}: pg1_over_sqlite"])
        ok = all(f["state_ok"] for f in got[kind].values())
        figure = _rates(got[kind], kind)
        out.append(Goal(goal, what, figure, "≥ 0.5×", value, _bound(value, 0.5, at_most=False)))
        if not ok:
            out[-1] = Goal(goal, what, figure, "≥ 0.5×", value, FAIL, "a check failed")
    value = float(got["ratios"]["rpc: pg2_over_pg1"])
    out.append(
        Goal(
            "pg8",
            "locked RPCs over HTTP, PG 2 procs / PG 1 proc",
            _rates(got["rpc"], "rpc", ("pg2", "pg1")),
            "≥ 1.0×",
            value,
            _bound(value, 1.0, at_most=False),
        )
    )
    return out


def _rates(by_key: Mapping[str, Any], kind: str, keys: tuple[str, str] = ("pg1", "sqlite")) -> str:
    field = "flows_per_second" if kind == "flows" else "ok_per_second"
    return f"{by_key[keys[0]][field]:,.0f} vs {by_key[keys[1]][field]:,.0f} /s"


def _costs(results: Mapping[str, Any]) -> list[Goal]:
    rows = [
        ("pg4", "CPU per locked RPC in process, dexlite on PG / on SQLite", "≤ 1.5×"),
        ("pg5", "PostgreSQL's CPU per locked RPC", "≤ 300 µs"),
        ("pg6", "round trips per locked RPC (on the wire)", "≤ 3"),
        ("pg7", "round trips per Step (a 3-Step Flow's / 3)", "≤ 3"),
    ]
    got, why = scenario(results, "costs")
    if got is None:
        return [Goal(g, w, "-", t, None, NOT_RUN, why) for g, w, t in rows]
    sqlite, pg, trips = got["sqlite"]["rpc"], got["postgres"]["rpc"], got["round_trips"]
    cpu = pg["cpu_us"] / sqlite["cpu_us"]
    per_step = trips["flow"] / 3
    figures: list[tuple[str, float | None, Callable[[], str]]] = [
        (
            f"{pg['cpu_us']:,} vs {sqlite['cpu_us']:,} µs",
            cpu,
            lambda: _bound(cpu, 1.5, at_most=True),
        ),
        (
            f"{pg['postgres_cpu_us']:,} µs",
            pg["postgres_cpu_us"] / 300,
            lambda: _bound(pg["postgres_cpu_us"], 300, at_most=True),
        ),
        (f"{trips['rpc']}", trips["rpc"] / 3, lambda: _bound(trips["rpc"], 3, at_most=True)),
        (f"{per_step:.1f}", per_step / 3, lambda: _bound(per_step, 3, at_most=True)),
    ]
    return [
        Goal(goal, what, figure, target, ratio, verdict())
        for (goal, what, target), (figure, ratio, verdict) in zip(rows, figures, strict=True)
    ]


def pg_goals(results: Mapping[str, Any]) -> list[Goal]:
    """Return the PostgreSQL rows, in order."""
    rows = _throughput(results)
    return [*rows[:3], *_costs(results), rows[3]]
