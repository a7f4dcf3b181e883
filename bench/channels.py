"""Channel throughput and latency vs DBOS Transact's send → recv, on the same SQLite file system.

The consumer is one per Flow and takes one message at a time, in a loop:

- dexlite: a Flow whose only Step waits with ``Wait.until(inbox.for_one())`` and whose
  ``execute`` records the message (Attributes Count, Sum and OutOfOrder) then goes to the same
  Step again; clients publish with ``Engine.publish_to_channel``. An in-process engine.Engine
  on a SQLite file with the server's defaults (WAL, synchronous=FULL, group commit).
- DBOS Transact for Python (the ``bench`` extra): a ``def`` workflow looping on
  ``DBOS.recv(topic)``, clients ``DBOS.send`` to it from threads; its system database on SQLite
  switched to WAL (still synchronous=FULL) before DBOS opens it. On SQLite DBOS has no push:
  ``recv`` and ``get_event`` learn of new rows from a listener thread polling every
  ``notification_listener_polling_interval_sec`` (1 s by default). The ``poll 10 ms`` rows set
  it to 10 ms, the ``poll 1 s`` rows run DBOS as shipped.

Figures:

- latency: one Flow (workflow), sequential: publish, then wait until the client sees the
  consumer's committed record of it: dexlite ``wait_for_attribute_match(Count GE n)`` (woken by
  the commit of the Step's execute, no polling), DBOS ``get_event`` on a ``set_event`` the
  workflow makes per message. p50/p99 of that round trip, and of publish → the consumer's code
  handled it (the ``perf_counter`` the Step's execute, or the workflow after ``recv``, notes
  first in a dict of the process: no I/O, so the split costs nothing).
- throughput: F Flows at once (1 and 16), one sequential publisher per Flow
  sending its share back to back while its consumer drains; messages per second from the first
  publish to the last message handled (that noted stamp, so the end is not blurred by how the
  client observes it).

Every run is a fresh interpreter (``python -m bench._channel_worker``) on a fresh temp
directory; the latency phase warms up on its first round trips, each throughput phase on Flows
of its own. The dexlite and ``poll 10 ms`` variants alternate, in one round (``make bench`` has
ten minutes for everything; with more rounds each figure is its best round); ``poll 1 s`` runs
once with few latency samples (each takes about 2 s). Correctness, checked per Flow after each
phase, warm-ups included: the consumer's count and sum show each message consumed once, with no
duplicate; dexlite's history lists each published message ID consumed exactly once and its
inbox ends empty; DBOS's notifications table holds every message consumed and none pending.
Order is reported apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from bench._channel_worker import MARKER
from bench._common import REPO, heading, latency_summary, ratio, temp_dir
from bench.flow_throughput import INSTALL_HINT, dbos_available

RUN_TIMEOUT_S = 600.0
DEXLITE = "dexlite"
DBOS_FAST = "DBOS poll 10 ms"
DBOS_DEFAULT = "DBOS poll 1 s"

#: (label, side, extra worker arguments, runs in every round), in this order.
VARIANTS: list[tuple[str, str, tuple[str, ...], bool]] = [
    (DEXLITE, "dexlite", (), True),
    (DBOS_FAST, "dbos", ("--poll", "0.01"), True),
    (DBOS_DEFAULT, "dbos", ("--poll", "1.0"), False),
]


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "rounds": 1,
            "latency": 60,
            "latency_warmup": 10,
            "latency_budget_s": 6.0,
            "throughput": [(1, 100), (16, 20)],  # (Flows, messages per Flow)
            "throughput_warmup": 3,
            "slow_latency": 3,  # poll 1 s: measured round trips, after one warm-up
        }
    return {
        "rounds": 1,
        "latency": 150,
        "latency_warmup": 10,
        "latency_budget_s": 8.0,
        "throughput": [(1, 150), (16, 25)],
        "throughput_warmup": 3,
        "slow_latency": 3,
    }


def _run_worker(side: str, extra: tuple[str, ...], sizes: dict[str, Any], slow: bool) -> Any:
    latency = (
        ("1", str(sizes["slow_latency"]))
        if slow
        else (
            str(sizes["latency_warmup"]),
            str(sizes["latency"]),
        )
    )
    budget = 60.0 if slow else sizes["latency_budget_s"]
    with temp_dir(f"channels-{side}") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "bench._channel_worker",
            side,
            str(tmp),
            "--latency-warmup",
            latency[0],
            "--latency",
            latency[1],
            "--budget",
            str(budget),
            "--throughput-warmup",
            str(sizes["throughput_warmup"]),
            *(a for flows, per in sizes["throughput"] for a in ("--throughput", f"{flows}:{per}")),
            *extra,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        load = os.getloadavg()[0]
        out = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
    for line in out.stdout.splitlines():
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER) :])
            data["load_before"] = round(load, 2)
            return data
    tail = "\n".join((out.stdout + out.stderr).splitlines()[-30:])
    raise RuntimeError(f"{' '.join(cmd[1:])} printed no result (rc {out.returncode}):\n{tail}")


def _summarize(data: dict[str, Any]) -> dict[str, Any]:
    """Turn one worker's raw figures into a round: latencies, rates, correctness."""
    checks = data.pop("checks")
    sent = sum(c["sent"] for c in checks)
    bad = [f"{c['flow']}: {'; '.join(c['problems'])}" for c in checks if not c["ok"]]
    # Every DBOS workflow also consumed the one negative message that ended it.
    expected = sent + len(checks)
    stored = (data.get("stored_consumed"), data.get("stored_pending"))
    if data["side"] == "dbos" and stored != (expected, 0):
        bad.append(
            f"notifications table: {data['stored_consumed']} consumed (expected {expected}), "
            f"{data['stored_pending']} pending"
        )
    handled = [s for s in data.pop("to_handled_s") if s == s]  # NaN: never handled
    latency = latency_summary(data.pop("latencies_s"))
    return {
        **data,
        "latency": latency,
        "to_handled": latency_summary(handled),
        "rates": {str(p["flows"]): round(p["messages_per_second"], 1) for p in data["throughput"]},
        "messages_checked": sent,
        "flows_checked": len(checks),
        "all_in_order": all(c["in_order"] for c in checks),
        "problems": bad[:10],
        "all_consumed_once": not bad,
    }


def _best(done: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's best round (the machine is shared): the highest rate per Flow count, the
    round with the lowest latency p50 for the latencies."""
    fastest = min(done, key=lambda r: r["latency"]["p50_ms"])
    rates = {flows: max(r["rates"][flows] for r in done) for flows in done[0]["rates"]}
    phases = {
        flows: max(
            (p for r in done for p in r["throughput"] if str(p["flows"]) == flows),
            key=lambda p: p["messages_per_second"],
        )
        for flows in rates
    }
    return {
        "latency": fastest["latency"],
        "to_handled": fastest["to_handled"],
        "rates": rates,
        "cpu_ms_per_message": {f: round(p["cpu_ms_per_message"], 2) for f, p in phases.items()},
        "publish_seconds": {f: round(p["publish_seconds"], 2) for f, p in phases.items()},
        "rounds_rates": [r["rates"] for r in done],
        "rounds_latency_p50_ms": [r["latency"]["p50_ms"] for r in done],
        "all_rounds_consumed_once": all(r["all_consumed_once"] for r in done),
        "all_rounds_in_order": all(r["all_in_order"] for r in done),
        "messages_checked": sum(r["messages_checked"] for r in done),
        "problems": [p for r in done for p in r["problems"]][:10],
        "journal_mode": done[0]["journal_mode"],
        "synchronous": done[0]["synchronous"],
        "driver": done[0]["driver"],
        "load_before": [r["load_before"] for r in done],
    }


def _print(sizes: dict[str, Any], runs: dict[str, dict[str, Any]], have_dbos: bool) -> None:
    flows = [str(f) for f, _ in sizes["throughput"]]
    heading("Channels: publish → consumed by a for_one Step, dexlite vs DBOS send → recv")
    print(
        "  each run: a fresh process and temp dir (same file system), WAL + synchronous=FULL;"
        f" {sizes['rounds']} round(s),\n  the variants alternating ({DBOS_DEFAULT} once); "
        "each figure is its variant's best round"
    )
    if not have_dbos:
        print(f"  {INSTALL_HINT}")
    print(
        f"  latency, one Flow, sequential ({sizes['latency']} round trips after "
        f"{sizes['latency_warmup']} warm-up, at most {sizes['latency_budget_s']:g} s; "
        f"{DBOS_DEFAULT}: {sizes['slow_latency']}):"
    )
    print(
        f"    {'variant':<17}{'n':>5}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"   {'to handled p50':>14}{'p99':>8}   rounds p50"
    )
    for label, run in runs.items():
        lat, hand = run["latency"], run["to_handled"]
        spread = " ".join(f"{p:.1f}" for p in run["rounds_latency_p50_ms"])
        print(
            f"    {label:<17}{lat['count']:>5}{lat['p50_ms']:>9.1f}{lat['p99_ms']:>9.1f}"
            f"{lat['max_ms']:>9.1f}   {hand['p50_ms']:>14.1f}{hand['p99_ms']:>8.1f}   {spread}"
        )
    print(
        "    round trip: publish until the client sees the consumer's committed record; "
        "to handled: until\n    the consumer's code ran for it (its stamp in the process)"
    )
    shares = ", ".join(f"{f} × {per}" for f, per in sizes["throughput"])
    print(f"  throughput, messages/s, Flows × messages each ({shares}), one publisher per Flow:")
    print(
        f"    {'variant':<17}"
        + "".join(f"{f + ' Flow' + ('s' if f != '1' else ''):>11}" for f in flows)
        + f"   {'CPU ms/message':<{max(14, 5 * len(flows))}}   load   rounds"
    )
    for label, run in runs.items():
        cpu = " ".join(f"{run['cpu_ms_per_message'][f]:>4.1f}" for f in flows)
        load = " ".join(f"{x:.2f}" for x in run["load_before"])
        spread = "; ".join(" ".join(f"{r[f]:,.0f}" for f in flows) for r in run["rounds_rates"])
        print(
            f"    {label:<17}"
            + "".join(f"{run['rates'][f]:>11,.1f}" for f in flows)
            + f"   {cpu:<{max(14, 5 * len(flows))}}   {load}   {spread}"
        )
    print(
        "    from the first publish to the last message handled; CPU: user+sys of the whole "
        "process\n    (clients included); load: 1-minute load average before each run"
    )
    print("  drivers:")
    for label, run in runs.items():
        print(f"    {label:<17}{run['driver']}; journal {run['journal_mode']}")


def main(quick: bool) -> dict[str, Any]:
    """Run every variant in rounds; print latencies, rates and dexlite/DBOS ratios."""
    sizes = _sizes(quick)
    have_dbos = dbos_available()
    variants = [v for v in VARIANTS if have_dbos or v[1] == "dexlite"]
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in variants}
    for number in range(sizes["rounds"]):
        for label, side, extra, every_round in variants:
            if every_round or number == 0:
                raw = _run_worker(side, extra, sizes, slow=not every_round)
                rounds[label].append(_summarize(raw))
    runs = {label: _best(done) for label, done in rounds.items()}
    _print(sizes, runs, have_dbos)

    ratios: dict[str, float] = {}
    dex = runs[DEXLITE]
    others = [label for label in runs if label != DEXLITE]
    if others:
        print("  ratios dexlite/DBOS (same run; messages/s > 1 and latency < 1 favour dexlite):")
    for other in others:
        key = f"{DEXLITE} / {other}"
        parts = []
        for f in dex["rates"]:
            value = ratio(dex["rates"][f], runs[other]["rates"][f])
            flows = f"{f} Flow{'s' if f != '1' else ''}"
            ratios[f"{key}: messages_per_second {flows}"] = value
            parts.append(f"{flows} {value:.2f}x")
        for pct in ("p50", "p99"):
            theirs = runs[other]["latency"][f"{pct}_ms"]
            value = round(dex["latency"][f"{pct}_ms"] / theirs, 4) if theirs else float("nan")
            ratios[f"{key}: latency {pct}"] = value
            parts.append(f"{pct} {value:.3g}x")
        print(
            f"    {key:<28} msg/s " + ", ".join(parts[:-2]) + "; latency " + ", ".join(parts[-2:])
        )

    all_ok = all(run["all_rounds_consumed_once"] for run in runs.values())
    checked = sum(run["messages_checked"] for run in runs.values())
    print(
        f"  every message consumed exactly once, the right count ({checked:,} messages on "
        f"{sum(len(r) for r in rounds.values())} runs): {'yes' if all_ok else 'NO'}"
    )
    for label, run in runs.items():
        for problem in run["problems"]:
            print(f"    {label}: {problem}")
    order = ", ".join(
        f"{label} {'yes' if run['all_rounds_in_order'] else 'NO'}" for label, run in runs.items()
    )
    print(f"  consumed in publication order (one publisher per Flow): {order}")
    return {
        "sizes": sizes,
        "dbos_installed": have_dbos,
        "runs": runs,
        "rounds": rounds,
        "ratios": ratios,
        "all_consumed_once": all_ok,
    }
