"""The goals table of ``make bench`` (bench/goals.toml judged by bench/_goals.py), on
hand-made figures shaped as the scenarios return them: no database, no process.

Every row PASSes on good figures, FAILs below its bound and when its checks fail, and is
"not run" when its scenario was not chosen, failed or was skipped; every row reads a scenario
that ``python -m bench`` runs.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from bench import _goals
from bench.__main__ import MODULES
from bench._goals import FAIL, NOT_RUN, PASS, Goal, as_json, goals, load_goals, print_goals

KINDS = ("keyword_equality", "int_range", "int_range_second_page", "get_attributes")
IDS = [
    *("1a", "1b", "1c", "2", "3a", "3b", "4a", "4b", "4c", "4d", "5a", "5b", "6a", "6b"),
    *("log1", "log2", "log3"),
    *("pg1", "pg2", "pg3", "pg4", "pg5", "pg6", "pg7", "pg8"),
]


def _plans() -> dict[str, Any]:
    return {kind: [{"plan": ["SEARCH runs USING INDEX ix"], "scans": []}] for kind in KINDS}


def _by_size(p50s: tuple[float, ...]) -> dict[str, Any]:
    return {
        **{kind: {"p50_ms": p50} for kind, p50 in zip(KINDS, p50s, strict=True)},
        "plans": _plans(),
    }


def _results() -> dict[str, Any]:
    """A run whose every figure meets its goal."""
    rounds = [
        {"cut_off_in_flight": 2, "sequences": {"duplicates": 0}},
        {"cut_off_in_flight": 3, "sequences": {"duplicates": 0}},
    ]
    scenarios: dict[str, Any] = {
        "http_register": {
            "sizes": {"small": 300, "large": 20000},
            "sequential": {
                "register@300": {"p50_ms": 2.0, "state_ok": True},
                "register@20000": {"p50_ms": 2.4, "state_ok": True},
            },
            "parallel": {
                "register": {
                    "ok": 12000,
                    "ok_per_second": 1000.0,
                    "state_ok": True,
                    "non_201": {},
                    "rounds": rounds,
                },
                "sqla": {"ok_per_second": 400.0},
                "echo": {"ok_per_second": 2000.0},
            },
            "ratios": {
                "register_p50_20000_over_300": 1.2,
                "register_per_s_over_sqla_commit_per_s": 2.5,
                "register_per_s_over_pydantic_echo_per_s": 0.5,
            },
        },
        "rpc_roundtrip": {
            "parallel": {"rpc": {"ok_per_second": 2000.0}, "sqla": {"ok_per_second": 400.0}},
            "ratios": {"rpc_per_s_over_sqla_commit_per_s": 5.0},
            "checks_ok": True,
        },
        "flow_throughput": {
            "dbos_installed": True,
            "runs": {
                "dexlite async def": {"flows_per_second": 1200.0},
                "dexlite def": {"flows_per_second": 1100.0},
                "DBOS async WAL": {"flows_per_second": 200.0},
                "DBOS def WAL": {"flows_per_second": 200.0},
            },
            "ratios": {
                "dexlite async def / DBOS async WAL: flows_per_second": 6.0,
                "dexlite def / DBOS def WAL: flows_per_second": 5.5,
            },
            "all_completed": True,
        },
        "search": {
            "by_size": {"100k": _by_size((1.0, 2.0, 4.0, 0.5)), "1m": _by_size((1, 2, 5, 0.6))},
            "ratio_name": "search_p50_1m_over_100k",
            "ratios": {
                "search_p50_1m_over_100k": dict(zip(KINDS, (1.0, 1.0, 1.25, 1.2), strict=True))
            },
            "scans": {"100k": [], "1m": []},
            "checks_ok": True,
        },
        "chunked_append": {
            "sizes": {"small": 100, "large": 100000},
            "latency": {"chunked@100": {"p50_ms": 1.0}, "chunked@100000": {"p50_ms": 1.1}},
            "ratios": {"chunked_p50_100000_over_100": 1.1},
            "checks_ok": True,
        },
        "change_log": {
            "register": {
                "on": {"ok_per_second": 950.0},
                "off": {"ok_per_second": 1000.0},
                "state_ok": True,
            },
            "flows": {
                "on": {"flows_per_second": 1000.0},
                "off": {"flows_per_second": 1000.0},
                "ok": True,
            },
            "bytes": {
                "writes": 2000,
                "register": {
                    "added_per_op": {"file_bytes": 200.0},
                    "added_per_write": {"file_bytes": 100.0},
                },
                "counter": {"added_per_op": {"file_bytes": 150.0}},
                "ok": True,
            },
            "ratios": {"register_per_s_on_over_off": 0.95, "flows_per_s_on_over_off": 1.0},
        },
        "postgres": {
            kind: {
                key: {field: rate, "state_ok": True}
                for key, rate in (("pg1", 600.0), ("pg2", 900.0), ("sqlite", 1000.0))
            }
            for kind, field in (
                ("register", "ok_per_second"),
                ("rpc", "ok_per_second"),
                ("flows", "flows_per_second"),
            )
        },
        "costs": {
            "sqlite": {"rpc": {"cpu_us": 400}},
            "postgres": {"rpc": {"cpu_us": 500, "postgres_cpu_us": 150}},
            "round_trips": {"rpc": 3.0, "flow": 6.0},
        },
    }
    scenarios["postgres"]["ratios"] = {
        f"{kind}: {name}": value
        for kind in ("register", "rpc", "flows")
        for name, value in (("pg1_over_sqlite", 0.6), ("pg2_over_pg1", 1.5))
    }
    return {"quick": False, "scenarios": scenarios}


def _memory() -> dict[str, Any]:
    """A full-size ``make bench-memory`` run that met goal 5."""
    return {
        "finished_at": "2025-06-01T10:00:00+00:00",
        "flows": 100000,
        "rpcs": 1000000,
        "minutes": 10,
        "full_size": True,
        "rss_mb": {
            "after_first_phase": 150.0,
            "max": 150.0,
            "final_phase": {"last_minus_first_mb": 1.0, "slope_mb_per_min": 0.05},
        },
        "verdict": {"rss_ok": True, "growth_ok": True},
    }


def _rows(results: dict[str, Any], memory: dict[str, Any] | None = None) -> dict[str, Goal]:
    return {row.goal: row for row in goals(results, memory)}


def _set(figures: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        figures = figures[key]
    figures[path[-1]] = value


# (id, figure, ratio, note) of every row on _results() and _memory(): all PASS.
GOOD = [
    ("1a", "1,000 vs 400 /s", 2.5, ""),
    ("1b", "1,000 vs 2,000 /s", 0.5, ""),
    ("1c", "12,000 201s, 0 other, 0 dup., 5 in flight", None, ""),
    ("2", "2,000 vs 400 /s", 5.0, ""),
    ("3a", "1,200 vs 200 Flows/s", 6.0, ""),
    ("3b", "1,100 vs 200 Flows/s", 5.5, ""),
    ("4a", "1.0 / 2.0 / 4.0 ms", 0.8, ""),
    ("4b", "0.50 ms", 0.5, ""),
    ("4c", "1.00 / 1.00 / 1.25×", 1.25, ""),
    ("4d", "none at 100k and 1m", None, ""),
    ("5a", "150 MB (max 150)", 0.5, "memory.json of 2025-06-01T10:00:00+00:00"),
    ("5b", "+1.0 MB, slope +0.05 MB/min", None, "memory.json of 2025-06-01T10:00:00+00:00"),
    ("6a", "2.40 vs 2.00 ms", 1.2, ""),
    ("6b", "1.10 ms at 100,000 vs 1.00 at 100", 1.1, ""),
    ("log1", "950 vs 1,000 /s", 0.95, ""),
    ("log2", "1,000 vs 1,000 Flows/s", 1.0, ""),
    (
        "log3",
        "200 B/reg. (100/write); 150 B/RPC",
        None,
        "file bytes after 2,000 of each, log on - off",
    ),
    ("pg1", "600 vs 1,000 /s", 0.6, ""),
    ("pg2", "600 vs 1,000 /s", 0.6, ""),
    ("pg3", "600 vs 1,000 /s", 0.6, ""),
    ("pg4", "500 vs 400 µs", 1.25, ""),
    ("pg5", "150 µs", 0.5, ""),
    ("pg6", "3.0", 1.0, ""),
    ("pg7", "2.0", 2 / 3, ""),
    ("pg8", "900 vs 600 /s", 1.5, ""),
]


def test_every_row_passes_on_good_figures() -> None:
    rows = goals(_results(), _memory())
    assert [row.goal for row in rows] == IDS
    got = [(row.goal, row.figure, row.ratio, row.note) for row in rows]
    assert got == GOOD
    assert {row.verdict for row in rows} == {PASS}


# (id, the scenario's figure set past the bound, to, the ratio shown)
PAST_BOUND = [
    ("1a", ("http_register", "ratios", "register_per_s_over_sqla_commit_per_s"), 1.99, 1.99),
    ("1b", ("http_register", "ratios", "register_per_s_over_pydantic_echo_per_s"), 0.2, 0.2),
    ("2", ("rpc_roundtrip", "ratios", "rpc_per_s_over_sqla_commit_per_s"), 3.9, 3.9),
    (
        "3a",
        ("flow_throughput", "ratios", "dexlite async def / DBOS async WAL: flows_per_second"),
        4.9,
        4.9,
    ),
    ("3b", ("flow_throughput", "ratios", "dexlite def / DBOS def WAL: flows_per_second"), 1.0, 1.0),
    ("4a", ("search", "by_size", "100k", "int_range", "p50_ms"), 6.0, 1.2),
    ("4b", ("search", "by_size", "100k", "get_attributes", "p50_ms"), 1.5, 1.5),
    ("4c", ("search", "ratios", "search_p50_1m_over_100k", "keyword_equality"), 2.0, 2.0),
    ("6a", ("http_register", "ratios", "register_p50_20000_over_300"), 1.31, 1.31),
    ("6b", ("chunked_append", "ratios", "chunked_p50_100000_over_100"), 1.4, 1.4),
    ("log1", ("change_log", "ratios", "register_per_s_on_over_off"), 0.89, 0.89),
    ("log2", ("change_log", "ratios", "flows_per_s_on_over_off"), 0.5, 0.5),
    ("pg1", ("postgres", "ratios", "rpc: pg1_over_sqlite"), 0.49, 0.49),
    ("pg2", ("postgres", "ratios", "register: pg1_over_sqlite"), 0.3, 0.3),
    ("pg3", ("postgres", "ratios", "flows: pg1_over_sqlite"), 0.1, 0.1),
    ("pg4", ("costs", "sqlite", "rpc", "cpu_us"), 250, 2.0),
    ("pg5", ("costs", "postgres", "rpc", "postgres_cpu_us"), 450, 1.5),
    ("pg6", ("costs", "round_trips", "rpc"), 4.0, 4 / 3),
    ("pg7", ("costs", "round_trips", "flow"), 9.3, 9.3 / 3 / 3),
    ("pg8", ("postgres", "ratios", "rpc: pg2_over_pg1"), 0.9, 0.9),
]


@pytest.mark.parametrize(
    ("goal", "path", "value", "ratio"), PAST_BOUND, ids=[p[0] for p in PAST_BOUND]
)
def test_a_figure_past_its_bound_fails(
    goal: str, path: tuple[str, ...], value: float, ratio: float
) -> None:
    results = _results()
    _set(results["scenarios"], path, value)
    rows = _rows(results, _memory())
    assert (rows[goal].verdict, rows[goal].note) == (FAIL, "")
    assert rows[goal].ratio == pytest.approx(ratio)
    assert [r.goal for r in rows.values() if r.verdict != PASS] == [goal]


def test_a_bound_itself_passes() -> None:
    results = _results()
    _set(
        results["scenarios"],
        ("http_register", "ratios", "register_per_s_over_sqla_commit_per_s"),
        2.0,
    )
    _set(results["scenarios"], ("costs", "postgres", "rpc", "postgres_cpu_us"), 300)
    rows = _rows(results, _memory())
    assert (rows["1a"].verdict, rows["1a"].ratio) == (PASS, 2.0)
    assert (rows["pg5"].verdict, rows["pg5"].ratio, rows["pg5"].figure) == (PASS, 1.0, "300 µs")


def test_a_nan_ratio_fails() -> None:
    results = _results()
    _set(
        results["scenarios"],
        ("rpc_roundtrip", "ratios", "rpc_per_s_over_sqla_commit_per_s"),
        math.nan,
    )
    row = _rows(results)["2"]
    assert row.verdict == FAIL
    assert row.ratio is not None and math.isnan(row.ratio)


# (id, the check set to false, the rows that FAIL, their note)
FAILED_CHECK = [
    ("1a", ("http_register", "parallel", "register", "state_ok"), ["1a", "1b", "1c"], ""),
    ("2", ("rpc_roundtrip", "checks_ok"), ["2"], "stored counts did not match the 2xx"),
    ("3a", ("flow_throughput", "all_completed"), ["3a", "3b"], "not every Flow completed"),
    ("4a", ("search", "checks_ok"), ["4a", "4b", "4c"], ""),
    ("5a", ("verdict", "rss_ok"), ["5a"], "memory.json of 2025-06-01T10:00:00+00:00"),
    ("5b", ("verdict", "growth_ok"), ["5b"], "memory.json of 2025-06-01T10:00:00+00:00"),
    ("6a", ("http_register", "sequential", "register@300", "state_ok"), ["6a"], ""),
    ("6b", ("chunked_append", "checks_ok"), ["6b"], ""),
    (
        "log1",
        ("change_log", "register", "state_ok"),
        ["log1"],
        "a round's replies, stored state or log did not match",
    ),
    (
        "log2",
        ("change_log", "flows", "ok"),
        ["log2"],
        "not every Flow completed, or the runs' log flag did not match",
    ),
    (
        "log3",
        ("change_log", "bytes", "ok"),
        ["log3"],
        "file bytes after 2,000 of each, log on - off; the stored state or log did not match",
    ),
    ("pg1", ("postgres", "rpc", "pg2", "state_ok"), ["pg1"], "a check failed"),
    ("pg2", ("postgres", "register", "sqlite", "state_ok"), ["pg2"], "a check failed"),
    ("pg3", ("postgres", "flows", "pg1", "state_ok"), ["pg3"], "a check failed"),
]


@pytest.mark.parametrize(
    ("goal", "path", "failing", "note"), FAILED_CHECK, ids=[c[0] for c in FAILED_CHECK]
)
def test_a_failed_check_fails_whatever_the_ratio(
    goal: str, path: tuple[str, ...], failing: list[str], note: str
) -> None:
    results, memory = _results(), _memory()
    _set(memory if goal.startswith("5") else results["scenarios"], path, False)
    rows = _rows(results, memory)
    assert [r.goal for r in rows.values() if r.verdict != PASS] == failing
    assert {(rows[g].verdict, rows[g].note) for g in failing} == {(FAIL, note)}
    assert rows[goal].ratio == dict((g, r) for g, _, r, _ in GOOD)[goal]  # shown all the same


def test_register_counts_every_other_status_duplicate_and_cut_off_reply() -> None:
    results = _results()
    register = results["scenarios"]["http_register"]["parallel"]["register"]
    register["non_201"] = {"409": 3, "500": 2}
    register["rounds"][1]["sequences"]["duplicates"] = 4
    register["state_ok"] = False
    row = _rows(results)["1c"]
    assert (row.figure, row.verdict) == ("12,000 201s, 5 other, 4 dup., 5 in flight", FAIL)


def test_table_scans_and_uncaptured_plans_fail_4d() -> None:
    results = _results()
    search = results["scenarios"]["search"]
    search["scans"] = {"100k": ["SCAN runs"], "1m": ["SCAN attributes", "SCAN runs"]}
    assert (_rows(results)["4d"].figure, _rows(results)["4d"].verdict) == (
        "SCAN attributes; SCAN runs",
        FAIL,
    )
    search["scans"] = {"100k": [], "1m": []}
    search["by_size"]["1m"]["plans"]["get_attributes"] = []
    row = _rows(results)["4d"]
    assert (row.figure, row.verdict) == (
        "none at 100k and 1m; no plan captured: get_attributes at 1m",
        FAIL,
    )


def test_quick_search_sizes_are_noted_and_lack_100k() -> None:
    results = _results()
    search = results["scenarios"]["search"]
    search["by_size"] = {"10k": _by_size((1, 1, 1, 1)), "50k": _by_size((1, 1, 1, 1))}
    search["ratio_name"] = "search_p50_50k_over_10k"
    search["ratios"] = {"search_p50_50k_over_10k": dict.fromkeys(KINDS, 1.0)}
    search["scans"] = {"10k": [], "50k": []}
    rows = _rows(results)
    no_size = (NOT_RUN, "no 100,000-Flow size in this run", "-", None)
    assert (rows["4a"].verdict, rows["4a"].note, rows["4a"].figure, rows["4a"].ratio) == no_size
    assert (rows["4b"].verdict, rows["4b"].note) == no_size[:2]
    assert (rows["4c"].verdict, rows["4c"].note) == (PASS, "quick sizes: 50k / 10k")
    assert (rows["4d"].verdict, rows["4d"].figure) == (PASS, "none at 10k and 50k")


def test_quick_register_sizes_name_its_figures() -> None:
    results = _results()
    register = results["scenarios"]["http_register"]
    register["sizes"] = {"small": 30, "large": 2000}
    register["sequential"] = {
        "register@30": {"p50_ms": 1.0, "state_ok": True},
        "register@2000": {"p50_ms": 1.5, "state_ok": True},
    }
    register["ratios"]["register_p50_2000_over_30"] = 1.5
    rows = _rows(results)
    assert (rows["6a"].figure, rows["6a"].ratio, rows["6a"].verdict) == (
        "1.50 vs 1.00 ms",
        1.5,
        FAIL,
    )


SCENARIO_ROWS = {
    "http_register": ["1a", "1b", "1c", "6a"],
    "rpc_roundtrip": ["2"],
    "flow_throughput": ["3a", "3b"],
    "search": ["4a", "4b", "4c", "4d"],
    "chunked_append": ["6b"],
    "change_log": ["log1", "log2", "log3"],
    "postgres": ["pg1", "pg2", "pg3", "pg8"],
    "costs": ["pg4", "pg5", "pg6", "pg7"],
}


@pytest.mark.parametrize("name", SCENARIO_ROWS)
@pytest.mark.parametrize(
    ("figures", "why"),
    [
        (None, "{name} not chosen"),
        ({"error": "Traceback ..."}, "{name} failed"),
        ({"skipped": "no server at 127.0.0.1:5432"}, "{name} skipped: no server at 127.0.0.1:5432"),
    ],
    ids=["not chosen", "failed", "skipped"],
)
def test_rows_of_a_scenario_without_figures_are_not_run(
    name: str, figures: dict[str, Any] | None, why: str
) -> None:
    results = _results()
    if figures is None:
        del results["scenarios"][name]
    else:
        results["scenarios"][name] = figures
    rows = _rows(results, _memory())
    good = _rows(_results(), _memory())
    for goal in SCENARIO_ROWS[name]:
        what, target = good[goal].what, good[goal].target
        assert rows[goal] == Goal(goal, what, "-", target, None, NOT_RUN, why.format(name=name))
    assert {r.verdict for g, r in rows.items() if g not in SCENARIO_ROWS[name]} == {PASS}


def test_flows_without_dbos_are_not_run() -> None:
    results = _results()
    results["scenarios"]["flow_throughput"]["dbos_installed"] = False
    rows = _rows(results, _memory())
    for goal in ("3a", "3b"):
        assert (rows[goal].verdict, rows[goal].note) == (NOT_RUN, "DBOS Transact not installed")


def test_memory_rows_need_a_full_size_memory_run_to_pass() -> None:
    rows = _rows(_results(), None)
    for goal in ("5a", "5b"):
        assert (rows[goal].verdict, rows[goal].figure, rows[goal].note) == (
            NOT_RUN,
            "-",
            "run make bench-memory",
        )
    memory = _memory()
    memory.update(full_size=False, flows=2000, rpcs=20000, minutes=1.5)
    smaller = (
        "memory.json of 2025-06-01T10:00:00+00:00, a smaller run "
        "(2,000 Flows, 20,000 RPCs, +1.5 min): run make bench-memory"
    )
    rows = _rows(_results(), memory)
    assert (rows["5a"].verdict, rows["5a"].ratio, rows["5a"].note) == (NOT_RUN, 0.5, smaller)
    memory["verdict"]["growth_ok"] = False  # a smaller run can still show a leak
    assert (_rows(_results(), memory)["5b"].verdict, _rows(_results(), memory)["5b"].note) == (
        FAIL,
        smaller,
    )


def test_a_missing_figure_makes_its_row_not_run_and_no_other() -> None:
    results = _results()
    del results["scenarios"]["http_register"]["parallel"]["sqla"]
    rows = _rows(results, _memory())
    assert (rows["1a"].verdict, rows["1a"].figure, rows["1a"].note) == (
        NOT_RUN,
        "-",
        "missing 'parallel.sqla.ok_per_second'",
    )
    assert [g for g, r in rows.items() if r.verdict != PASS] == ["1a"]
    results = _results()
    _set(results["scenarios"], ("costs", "sqlite", "rpc", "cpu_us"), 0)
    assert _rows(results)["pg4"].note == "cannot judge its figures: division by zero"


def test_every_goal_reads_a_scenario_that_make_bench_runs() -> None:
    specs = load_goals()
    assert [s.id for s in specs] == IDS
    for spec in specs:
        assert spec.scenario in MODULES or spec.scenario == _goals.MEMORY, spec.id
    assert {s.id for s in specs if s.scenario == _goals.MEMORY} == {"5a", "5b"}


ROW = 'id = "x"\nwhat = "w"\nscenario = "s"\ntarget = "t"\n'


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ('compare = "above"\nfigure = "f"', "compare"),
        ('compare = "at_least"\nfigure = "f"', "a value and a bound"),
        ('compare = "all"\nfigure = "f"\nbounds = 1', "unknown keys"),
        ('compare = "all"\nfigure = "{a"', "unbalanced"),
        ('compare = "all"\nfigure = "f"\n[goal.values]\nv = { fn = "nope" }', "DERIVED"),
        ('compare = "all"\nfigure = "f"\n[goal.values]\nv = { mean = "a.*" }', "one of"),
    ],
    ids=["compare", "no bound", "unknown key", "template", "function", "operation"],
)
def test_a_mistake_in_the_goals_file_is_refused_on_reading(
    tmp_path: Path, toml: str, error: str
) -> None:
    path = tmp_path / "goals.toml"
    path.write_text("[[goal]]\n" + ROW + toml + "\n")
    with pytest.raises(ValueError, match=error):
        load_goals(path)


def test_the_table_prints_every_row_under_a_heading_naming_no_issue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = goals(_results(), None)
    info = {
        "nproc": 2,
        "cpu_model": "cpu",
        "python": "3.11",
        "sqlite": "3.45",
        "load_average": [0.5],
        "versions": {"wrk": "4.2"},
    }
    print_goals(rows, True, info)
    out = capsys.readouterr().out
    assert "== goals: each figure against its target -- QUICK" in out
    assert "issue" not in out
    assert "23 PASS, 0 FAIL, 2 not run" in out
    assert as_json(rows)[0] == {
        "goal": "1a",
        "what": "register on one Flow over HTTP (32 conn.) / SQLAlchemy insert+commit",
        "figure": "1,000 vs 400 /s",
        "target": "≥ 2×",
        "ratio": 2.5,
        "verdict": PASS,
        "note": "",
    }


def test_judging_leaves_the_results_unchanged() -> None:
    results, memory = _results(), _memory()
    before = copy.deepcopy((results, memory))
    goals(results, memory)
    assert (results, memory) == before
