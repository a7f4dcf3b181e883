"""PostgreSQL going away under load: every answer is 200 or 503 UNAVAILABLE with Retry-After
(never 500), /readyz says 503 while the server is down, the same process serves again by
itself once it is back, nothing acknowledged is lost, and no commit is made twice.

Two ways of losing the server: a cluster of the test's own stopped with ``immediate`` (a
crash) and started again, and a TCP proxy between the engine and the shared server that cuts
connections mid-transaction, or right after a COMMIT reached the server (the outcome is
unknown to the engine, which must not replay it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

import engine
from app.settings import Settings
from engine import (
    Attribute,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    go_to,
    graceful_complete,
)
from engine._storage.postgres import rpc_writes, step_ends, step_moves
from tests.api.test_database_outage import REGISTRY as TALLY_REGISTRY
from tests.conftest import api_client, running_engine
from tests.support import backends
from tests.support.pg_cluster import PostgresCluster, require_cluster
from tests.support.problems import assert_problem
from tests.support.tcp_proxy import CuttingProxy
from tests.support.waiting import eventually

pytestmark = backends.postgres_only("a PostgreSQL server that goes away")

#: Short timeouts (of the postgres settings), so that a request meeting a dead server answers
#: quickly.
FAST_FAILING = {
    "connect_timeout": 1.0,
    "pool_timeout": 2.0,
    "statement_timeout": 5.0,
    "lock_timeout": 5.0,
}
WORKERS = 8


class Load:
    """Workers that invoke TallyFlow's ``add`` until told to stop, tallying the answers; each
    on a Flow of its own (``<prefix>-<n>``), so that none meets another's lock."""

    def __init__(self, client: httpx.AsyncClient, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.statuses: Counter[int] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def flow_ids(self) -> list[str]:
        """The Flow IDs the workers invoke."""
        return [f"{self.prefix}-{n}" for n in range(WORKERS)]

    async def start(self) -> None:
        """Start a Flow per worker, then the workers."""
        for flow_id in self.flow_ids():
            response = await self.client.post(
                "/api/v1/flows", json={"flowType": "TallyFlow", "flowId": flow_id, "input": None}
            )
            assert response.status_code == 201, response.text
        self._tasks = [asyncio.create_task(self._work(f)) for f in self.flow_ids()]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _work(self, flow_id: str) -> None:
        while not self._stop.is_set():
            response = await self.client.post(
                f"/api/v1/flows/{flow_id}/rpcs/add", json={"input": 1}
            )
            self.statuses[response.status_code] += 1
            if response.status_code != 200:
                self.bodies.append(assert_problem(response, 503, "UNAVAILABLE"))
                assert response.headers["Retry-After"] == "1"
                await asyncio.sleep(0.01)  # as a client honouring Retry-After would, briefly

    async def until(self, status: int, more: int) -> None:
        """Return once ``more`` further answers of ``status`` came."""
        target = self.statuses[status] + more
        await eventually(
            lambda: self.statuses[status] >= target, within=30, what=f"{more} answers {status}"
        )


async def _tally(client: httpx.AsyncClient, flow_id: str) -> int:
    response = await client.get(f"/api/v1/flows/{flow_id}/attributes", params={"name": "Tally"})
    assert response.status_code == 200, response.text
    value: int = response.json()["values"]["Tally"]
    return value


async def _check_tallies(client: httpx.AsyncClient, load: Load) -> None:
    """Nothing acknowledged is lost; a 503 may or may not have committed (its COMMIT may have
    reached the server), but nothing committed twice."""
    tally = sum([await _tally(client, flow_id) for flow_id in load.flow_ids()])
    acknowledged = load.statuses[200]
    assert set(load.statuses) <= {200, 503}, load.statuses
    assert acknowledged <= tally <= acknowledged + load.statuses[503], (tally, load.statuses)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster of this test's own, started, with a database ``app``."""
    require_cluster()
    with PostgresCluster(tmp_path) as started:
        started.create_database("app")
        yield started


async def test_a_crashed_server_answers_503_until_it_is_back_and_loses_nothing(
    settings: Settings, cluster: PostgresCluster
) -> None:
    chosen = settings.updated(database_url=cluster.url("app"), postgres=FAST_FAILING)
    async with api_client(chosen, TALLY_REGISTRY) as client:
        load = Load(client, "t")
        await load.start()
        try:
            await load.until(200, 50)
            await asyncio.to_thread(cluster.stop, "immediate")
            await load.until(503, 20)
            ready = await client.get("/readyz")
            assert_problem(ready, 503, "UNAVAILABLE")
            assert ready.headers["Retry-After"] == "1"
            await asyncio.to_thread(cluster.start)
            # The same process serves again by itself.
            await load.until(200, 50)
        finally:
            await load.stop()
        assert (await client.get("/readyz")).status_code == 200
        await _check_tallies(client, load)
        assert any("connection" in b["detail"] or "shutting" in b["detail"] for b in load.bodies)


@contextlib.contextmanager
def _proxied_database(tmp_path: Path) -> Iterator[tuple[CuttingProxy, str]]:
    """A fresh database on the shared server, reached through a proxy: (proxy, its URL)."""
    url = backends.database_url_for(tmp_path)
    host_and_rest = url.split("@", 1)[1]
    host_port, database = host_and_rest.split("/", 1)
    host, port = host_port.rsplit(":", 1)
    with CuttingProxy(host, int(port)) as proxy:
        yield proxy, url.replace(host_port, f"127.0.0.1:{proxy.port}")


@contextlib.asynccontextmanager
async def _proxied_client(
    settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[CuttingProxy, httpx.AsyncClient]]:
    """An app on a fresh database reached through a proxy, with short database limits."""
    with _proxied_database(tmp_path) as (proxy, url):
        chosen = settings.updated(database_url=url, postgres=FAST_FAILING)
        async with api_client(chosen, TALLY_REGISTRY) as client:
            yield proxy, client


async def test_connections_cut_mid_transaction_answer_503_and_commit_nothing_twice(
    settings: Settings, tmp_path: Path
) -> None:
    async with _proxied_client(settings, tmp_path) as (proxy, client):
        load = Load(client, "c")
        await load.start()
        try:
            cuts = 0
            while load.statuses[503] < 10:
                await load.until(200, 10)
                cuts += await asyncio.to_thread(proxy.cut_all)
            await load.until(200, 30)
        finally:
            await load.stop()
        assert cuts >= 10
        await _check_tallies(client, load)


async def test_an_rpc_whose_commit_outcome_is_unknown_is_not_replayed(
    settings: Settings, tmp_path: Path
) -> None:
    async with _proxied_client(settings, tmp_path) as (proxy, client):
        response = await client.post(
            "/api/v1/flows", json={"flowType": "TallyFlow", "flowId": "u", "input": None}
        )
        assert response.status_code == 201, response.text
        assert (await client.post("/api/v1/flows/u/rpcs/add", json={"input": 1})).json() == {
            "output": 1
        }
        # A locked RPC that only writes commits as one statement of its own.
        one_statement = rpc_writes.SQL.strip()[:40]
        # Only that statement: a lease renewal or poll committing meanwhile is not cut instead.
        await asyncio.to_thread(
            partial(proxy.cut_after_commit, 1, also=(one_statement,), within=())
        )
        lost = await client.post("/api/v1/flows/u/rpcs/add", json={"input": 10})
        assert_problem(lost, 503, "UNAVAILABLE")
        assert proxy.commits_cut == 1
        # It committed once (the server had it), and was not committed again.
        assert await _tally(client, "u") == 11
        assert (await client.post("/api/v1/flows/u/rpcs/add", json={"input": 100})).json() == {
            "output": 111
        }


class Gate:
    """Where GatedStep waits; each test makes its own events."""

    release: asyncio.Event
    runs = 0


class GatedStep(Step[None]):
    """Waits for the test, then completes its Flow."""

    async def execute(self, context: Context, input: None) -> StepDecision:
        Gate.runs += 1
        await Gate.release.wait()
        return graceful_complete("done")


class GatedFlow(Flow[None]):
    """One Step that completes the Flow once the gate opens."""

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(GatedStep())


class GatedWritingStep(Step[None]):
    """Waits for the test, then writes an Attribute and completes its Flow."""

    async def execute(self, context: Context, input: None) -> StepDecision:
        Gate.runs += 1
        await Gate.release.wait()
        GatedWritingFlow.note.set(context, "written")
        return graceful_complete("done")


class GatedWritingFlow(Flow[None]):
    """One Step whose decision writes, so it commits as a unit (BEGIN ... COMMIT)."""

    note = Attribute("Note", str)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(GatedWritingStep())


#: Statements of a Step decision's unit that the process's background work (lease renewals,
#: takeover polls) never runs: the COMMIT cut is the one of a transaction that ran one.
DECISION_WRITES = (
    "UPDATE step_executions SET state",
    "UPDATE step_executions SET phase",
    "INSERT INTO history",
)


async def _cut_the_gated_decision(
    engine_config: engine.EngineConfig, tmp_path: Path, flow: Flow[None], *also: str
) -> Counter[str]:
    """Start ``flow`` through a proxy, let its gated Step decide with the proxy cutting right
    after that commit reached the server, wait for the run to complete (reading it: the
    commit's outcome was unknown here, so this process heard of the close from the database
    alone), and return its history's event counts."""
    Gate.release = asyncio.Event()
    Gate.runs = 0
    with _proxied_database(tmp_path) as (proxy, url):
        config = dataclasses.replace(engine_config, database_url=url)
        async with running_engine([flow], config) as eng:
            await eng.start_flow(flow, "g")
            await eventually(lambda: Gate.runs == 1, what="the gated Step runs")
            cut = partial(proxy.cut_after_commit, 1, also=also, within=DECISION_WRITES)
            await asyncio.to_thread(cut)
            Gate.release.set()

            async def completed() -> bool:
                info = await eng.describe_flow("g")
                return info.status == engine.RunStatus.COMPLETED

            await eventually(completed, within=20, what="the run completes")
            assert proxy.commits_cut == 1
            page = await eng.get_flow_history("g", page_size=1000)
            return Counter(e.event_type for e in page.events)


@pytest.mark.parametrize(
    "flow",
    [GatedFlow(), GatedWritingFlow()],
    ids=["one call (step_ends)", "a unit with a COMMIT"],
)
async def test_a_step_decision_whose_commit_outcome_is_unknown_is_committed_once(
    engine_config: engine.EngineConfig, tmp_path: Path, flow: Flow[None]
) -> None:
    # A decision that only ends its Step commits as one call of its own (see step_ends); one
    # that also writes commits as a unit: the cut comes after either.
    one_call = step_ends.SQL.strip()[:40]
    types = await _cut_the_gated_decision(engine_config, tmp_path, flow, one_call)
    # The attempt may run again (its answer was lost), but its decision stands once.
    assert types["STEP_CLOSED"] == 1, types
    assert types["FLOW_CLOSED"] == 1, types


class FirstOfTwo(Step[None]):
    """Waits for the test, then moves on to SecondOfTwo."""

    async def execute(self, context: Context, input: None) -> StepDecision:
        Gate.runs += 1
        await Gate.release.wait()
        return go_to(SecondOfTwo, None)


class SecondOfTwo(Step[None]):
    """Completes the Flow."""

    async def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("second")


class TwoStepFlow(Flow[None]):
    """Two Steps: the first's decision is the commit the test cuts."""

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(FirstOfTwo()).other_steps(SecondOfTwo())


async def test_the_next_step_of_a_decision_whose_outcome_is_unknown_still_runs(
    engine_config: engine.EngineConfig, tmp_path: Path
) -> None:
    # A go_to commits as one statement of its own (see step_moves): the cut comes after it.
    one_statement = step_moves.SQL.strip()[:40]
    types = await _cut_the_gated_decision(engine_config, tmp_path, TwoStepFlow(), one_statement)
    # The second Step, created and claimed by the lost commit, was adopted and ran once.
    assert types["STEP_CLOSED"] == 2, types
    assert types["FLOW_CLOSED"] == 1, types
