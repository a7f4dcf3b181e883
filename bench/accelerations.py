"""What each SQLite acceleration buys: the same two loads with everything on, then with each
acceleration turned off by its setting, in the same run.

One server per variant (``bench._server:register_and_rpc_app`` on its own temp database), all
started first and left running, so the loads can alternate between them in rounds and a noisy
neighbour on the machine hits every variant alike. Two loads per variant and round:

- ``register``: the chunked pattern's register on one Flow from 32 connections (wrk), the
  headline write: locked, a chunk read and written per request;
- ``rpc``: the bench CounterFlow's locked increment RPC over 256 Flows from 16 connections.

Every 2xx must be one stored registration or increment, give or take the replies wrk cut off in
flight: a variant that is fast because it is wrong shows as a failed check. The figure of each
acceleration is ``all on / it off``: above 1 means it pays.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

import httpx

from bench import rpc_roundtrip
from bench._common import (
    LUA_DIR,
    combine_rounds,
    dexlite_env,
    heading,
    print_wrk,
    ratio,
    run_wrk,
    server,
    start_flows,
    temp_dir,
    wrk_missing_note,
    wrk_path,
)
from bench.http_register import check_register_load

#: Each acceleration: the setting that turns it off (environment of its server) and what it is.
#: docs/guides/benchmarks.md lists the same names with the figures of a run.
ACCELERATIONS: dict[str, tuple[Mapping[str, str], str]] = {
    "group_commit": (
        {"DEXLITE_SQLITE__COMMIT_BATCH": "1"},
        "the one writer commits the queued units of many requests in one transaction",
    ),
    "reads_on_loop": (
        {"DEXLITE_SQLITE__READS_ON_LOOP": "false"},
        "short reads run on the event loop's own connection, not a reader thread",
    ),
    "prepared_statements": (
        {"DEXLITE_SQLITE__PREPARED_STATEMENTS": "false"},
        "hot statements compiled once and run on the driver's cursor",
    ),
    "state_cache": (
        {"DEXLITE_SQLITE__STATE_CACHE_BYTES": "0"},
        "running Flows' committed values kept in memory: snapshots need no read",
    ),
    "lock_handoffs": (
        {"DEXLITE_SQLITE__LOCK_HANDOFFS": "false"},
        "an RPC's locks pass on as its commit is queued, not once it is durable",
    ),
    "value_reuse": (
        {"DEXLITE_SQLITE__VALUE_REUSE": "false"},
        "immutable values go to the next lock holder as objects, not decoded again",
    ),
    "fast_path": (
        {"DEXLITE_FAST_PATH": "false"},
        "plain routes answered without FastAPI's general per-request machinery",
    ),
    "gc_tuning": (
        {"DEXLITE_GC_TUNING": "false"},
        "startup objects frozen out of collections, higher collector thresholds",
    ),
}
FACTORY = "bench._server:register_and_rpc_app"
REGISTER = "/patterns/sequentially-chunked-attribute-map"
COUNTER_PREFIX = rpc_roundtrip.FLOW_PREFIX
TARGETS = rpc_roundtrip.TARGETS
REGISTER_CONNECTIONS = 32
RPC_CONNECTIONS = rpc_roundtrip.CONNECTIONS
WRK_THREADS = 2


def _sizes(quick: bool) -> dict[str, int]:
    return {"rounds": 1, "round_seconds": 2} if quick else {"rounds": 2, "round_seconds": 3}


def _register(url: str, flow_id: str, seconds: int) -> dict[str, Any]:
    return run_wrk(
        f"{url}{REGISTER}/register?flowId={flow_id}",
        LUA_DIR / "post.lua",
        threads=WRK_THREADS,
        connections=REGISTER_CONNECTIONS,
        seconds=seconds,
        env={"BENCH_MODE": "register", "BENCH_THREADS": str(WRK_THREADS)},
    )


def _rpc(url: str, seconds: int) -> dict[str, Any]:
    """The rpc_roundtrip scenario's load: increments rotating over its 256 Flows."""
    return rpc_roundtrip.load(url, rpc_roundtrip.RPC_PATH, seconds)


def _settled(read: Any) -> Any:
    """Read until two reads half a second apart agree (requests wrk cut off still commit)."""
    before = read()
    for _ in range(30):
        time.sleep(0.5)
        after = read()
        if after == before:
            return after
        before = after
    return before


def _attributes(client: httpx.Client, flow_id: str, *names: str) -> dict[str, Any]:
    response = client.get(
        f"/api/v1/flows/{flow_id}/attributes", params=[("name", name) for name in names]
    )
    response.raise_for_status()
    values: dict[str, Any] = response.json()["values"]
    return values


def _check_register(client: httpx.Client, flow_id: str, load: dict[str, Any]) -> None:
    def read() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        found = _attributes(client, flow_id, "SubscriberArchiveState", "SubscriberChunks/current")
        return found["SubscriberArchiveState"], found.get("SubscriberChunks/current", [])

    state, current = _settled(read)
    check_register_load(load, state, current, REGISTER_CONNECTIONS)


def _increments(client: httpx.Client) -> int:
    def read() -> int:
        return sum(
            int(_attributes(client, f"{COUNTER_PREFIX}{n}", "Counter").get("Counter") or 0)
            for n in range(TARGETS)
        )

    return int(_settled(read))


def main(quick: bool) -> dict[str, Any]:
    """Load every variant in alternating rounds; report each acceleration's gain."""
    heading("accelerations: each SQLite acceleration off, against all on")
    if not wrk_path():
        note = wrk_missing_note()
        print(f"  skipped: {note}")
        return {"skipped": note}
    sizes = _sizes(quick)
    variants: dict[str, Mapping[str, str]] = {"all_on": {}}
    variants.update({name: env for name, (env, _) in ACCELERATIONS.items()})
    rounds: dict[str, dict[str, list[dict[str, Any]]]] = {
        v: {"register": [], "rpc": []} for v in variants
    }
    checks: dict[str, bool] = {}
    with temp_dir("accelerations") as tmp, contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        for variant, overrides in variants.items():
            home = tmp / variant
            home.mkdir()
            srv = stack.enter_context(server(FACTORY, dexlite_env(home, **overrides), home))
            urls[variant] = srv.url
            start_flows(srv.url, "CounterFlow", [f"{COUNTER_PREFIX}{n}" for n in range(TARGETS)])
        for r in range(sizes["rounds"]):
            for variant, url in urls.items():
                with httpx.Client(base_url=url, timeout=30.0) as client:
                    flow_id = f"bench-accel-{r}"
                    client.post(f"{REGISTER}/start", params={"flowId": flow_id}).raise_for_status()
                    load = _register(url, flow_id, sizes["round_seconds"])
                    _check_register(client, flow_id, load)
                    rounds[variant]["register"].append(load)
                    rounds[variant]["rpc"].append(_rpc(url, sizes["round_seconds"]))
        for variant, url in urls.items():
            with httpx.Client(base_url=url, timeout=30.0) as client:
                done = rounds[variant]["rpc"]
                ok = sum(int(d["ok"]) for d in done)
                stored = _increments(client)
            registers = rounds[variant]["register"]
            checks[variant] = all(d["state_ok"] for d in registers) and (
                0 <= stored - ok <= RPC_CONNECTIONS * len(done)
            )
    return _report(variants, rounds, checks, sizes)


def _report(
    variants: Mapping[str, Mapping[str, str]],
    rounds: Mapping[str, Mapping[str, list[dict[str, Any]]]],
    checks: Mapping[str, bool],
    sizes: Mapping[str, int],
) -> dict[str, Any]:
    loads = {
        v: {label: combine_rounds(done) for label, done in by_load.items()}
        for v, by_load in rounds.items()
    }
    base = loads["all_on"]
    for label in ("register", "rpc"):
        print_wrk(f"all on, {label}", base[label])
    print(f"\n  {'acceleration':<20} {'register: on/off':>17} {'rpc: on/off':>12}  state ok")
    gains: dict[str, dict[str, Any]] = {}
    for variant in variants:
        if variant == "all_on":
            continue
        off = loads[variant]
        gain = {
            label: ratio(base[label]["ok_per_second"], off[label]["ok_per_second"])
            for label in ("register", "rpc")
        }
        gains[variant] = {
            "off_with": dict(variants[variant]),
            "what": ACCELERATIONS[variant][1],
            "register_ok_per_s_off": off["register"]["ok_per_second"],
            "rpc_ok_per_s_off": off["rpc"]["ok_per_second"],
            "gain": gain,
            "state_ok": checks[variant],
        }
        print(
            f"  {variant:<20} {gain['register']:>16.2f}× {gain['rpc']:>11.2f}×  "
            f"{'yes' if checks[variant] else 'NO'}"
        )
    return {
        "sizes": dict(sizes),
        "all_on": {
            "register_ok_per_s": base["register"]["ok_per_second"],
            "rpc_ok_per_s": base["rpc"]["ok_per_second"],
            "state_ok": checks["all_on"],
        },
        "accelerations": gains,
    }
