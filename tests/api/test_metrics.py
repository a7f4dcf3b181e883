"""``/metrics``: the figures a scrape shows after known work, read back from the exposition."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from engine import (
    Context,
    Flow,
    Registry,
    Step,
    StepDecision,
    StepList,
    go_to,
    graceful_complete,
)
from patterns import bundled_flows
from tests.api.test_schedules_api import BODY, REGISTRY
from tests.conftest import manual_clock_config
from tests.support.backends import sqlite_only
from tests.support.waiting import eventually

RPC_ROUTE = "/api/v1/flows/{flowId}/rpcs/{rpcName}"


class Twice(Step[int]):
    """Goes to Done; the second Step completes the run."""

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Done, input + 1)


class Done(Step[int]):
    """Completes the run with its input."""

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class TwoStepFlow(Flow[int]):
    """Two Steps to completion."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Twice()).other_steps(Done())


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Return every sample of ``/metrics`` by (name, labels)."""
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def sample(samples: dict[Any, float], name: str, **labels: str) -> float:
    """The value of one sample; 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_rpcs_lock_conflicts_and_http_requests_are_counted(make_client: Any) -> None:
    async with make_client() as client:
        started = await client.post("/primitives/rpc/start", params={"flowId": "m-counter"})
        assert started.status_code == 201
        for _ in range(2):
            ok = await client.post("/api/v1/flows/m-counter/rpcs/increment", json={"input": 1})
            assert ok.status_code == 200
        missing = await client.post("/api/v1/flows/m-counter/rpcs/nothing-here", json={})
        assert missing.status_code == 404
        held = await client.post(
            "/primitives/rpc/hold", params={"flowId": "m-counter"}, json={"seconds": 30}
        )
        assert held.status_code == 200

        succeeded_before_the_hold = 0

        async def conflicted() -> bool:
            nonlocal succeeded_before_the_hold
            attempt = await client.post("/api/v1/flows/m-counter/rpcs/increment", json={"input": 1})
            if attempt.status_code == 200:  # the Step had not taken the lock yet
                succeeded_before_the_hold += 1
            return attempt.status_code == 409

        await eventually(conflicted, what="an increment to meet the held lock")
        samples = await scrape(client)
        await client.post("/api/v1/flows/m-counter/stop", json={"type": "TERMINATE"})

    rpc = "dexlite_rpc_duration_seconds_count"
    oks = 2 + succeeded_before_the_hold
    assert sample(samples, rpc, flow_type="CounterFlow", rpc="increment", outcome="ok") == oks
    assert (
        sample(samples, rpc, flow_type="CounterFlow", rpc="nothing-here", outcome="RPC_NOT_FOUND")
        == 1
    )
    conflicts = sample(
        samples, rpc, flow_type="CounterFlow", rpc="increment", outcome="RPC_LOCK_CONFLICT"
    )
    assert conflicts >= 1
    assert (
        sample(samples, "dexlite_lock_conflicts_total", flow_type="CounterFlow", lock="counter")
        == conflicts
    )
    http = "dexlite_http_request_duration_seconds_count"
    assert sample(samples, http, method="POST", route=RPC_ROUTE, status="200") == oks
    assert sample(samples, http, method="POST", route=RPC_ROUTE, status="404") == 1
    assert sample(samples, http, method="POST", route="/primitives/rpc/start", status="201") == 1
    assert sample(samples, "dexlite_open_runs", flow_type="CounterFlow") == 1
    assert sample(samples, "dexlite_open_runs", flow_type="ChannelFlow") == 0
    # start + two increments + the hold's RPC, at least.
    assert sample(samples, "dexlite_commit_duration_seconds_count") >= 4


async def test_step_attempts_and_the_load_gauges(make_client: Any) -> None:
    registry = Registry([TwoStepFlow(), *bundled_flows()])
    async with make_client(registry) as client:
        for n in range(3):
            response = await client.post(
                "/api/v1/flows", json={"flowType": "TwoStepFlow", "flowId": f"m-{n}", "input": n}
            )
            assert response.status_code == 201
        for n in range(3):
            result = await client.get(f"/api/v1/flows/m-{n}/result", params={"waitSeconds": 10})
            assert result.json()["status"] == "COMPLETED"
        samples = await scrape(client)

    attempts = "dexlite_step_attempts_total"
    assert (
        sample(samples, attempts, flow_type="TwoStepFlow", step_type="Twice", outcome="go_to") == 3
    )
    assert (
        sample(
            samples,
            attempts,
            flow_type="TwoStepFlow",
            step_type="Done",
            outcome="graceful_complete",
        )
        == 3
    )
    assert sample(samples, "dexlite_open_runs", flow_type="TwoStepFlow") == 0
    assert sample(samples, "dexlite_steps_pending") == 0
    assert sample(samples, "dexlite_steps_due") == 0
    assert sample(samples, "dexlite_step_queue_age_seconds") == 0
    assert sample(samples, "dexlite_stream_store_bytes") == 0


@sqlite_only("group commit batches exist on the SQLite writer only")
async def test_group_commits_are_counted(make_client: Any) -> None:
    async with make_client() as client:
        await client.post("/primitives/rpc/start", params={"flowId": "m-batch"})
        samples = await scrape(client)
    assert sample(samples, "dexlite_commit_batch_units_count") >= 1
    assert sample(samples, "dexlite_commit_batch_units_sum") >= 1


async def test_schedule_actions_and_their_start_lag_are_counted(
    make_app: Any, settings: Any
) -> None:
    config, clock = manual_clock_config(settings)
    async with make_app(REGISTRY, engine_config=config) as served:
        await served.client.post("/api/v1/schedules", json=BODY)  # SKIP, every minute
        await clock.advance_when_idle(120)  # 08:01 starts, 08:02 is skipped (08:01 runs)
        samples = await scrape(served.client)
    labels = {"schedule_id": "job", "overlap": "SKIP"}
    assert sample(samples, "dexlite_schedule_actions_total", **labels, result="started") == 1
    assert sample(samples, "dexlite_schedule_actions_total", **labels, result="skipped") == 1
    # The manual clock stood still while the time fired: its start lagged 0 s.
    assert sample(samples, "dexlite_schedule_start_lag_seconds_count") == 1
    assert sample(samples, "dexlite_schedule_start_lag_seconds_sum") == 0
