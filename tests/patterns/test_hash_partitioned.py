"""The Hash-Partitioned AttributeMap pattern over HTTP and the engine API (DESIGN.md §7b)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
from collections import Counter
from typing import Any

import httpx
import pytest

import engine
from app.main import config_from_settings
from app.settings import Settings
from engine import (
    AttributeLock,
    AttributeMapLoad,
    Context,
    Engine,
    Registry,
    RPCInvokeOptions,
    RPCLockConflictError,
    rpc,
)
from patterns.hash_partitioned_attribute_map import flow, routes
from patterns.hash_partitioned_attribute_map.flow import (
    CustomerProfile,
    CustomerProfileFlow,
    UpsertProfileInput,
)
from tests.support.backends import backend_independent
from tests.support.problems import assert_problem

#: Request validation answers before the database is read: the same on every backend.
REFUSED_EARLY = backend_independent("the request is refused before the database is read")
PARTITION_RULE = backend_independent(
    "the partition is computed from the email; upserts are stored on both backends elsewhere"
)

BASE = "/patterns/hash-partitioned-attribute-map"
FLOW_ID = "hash-partitioned-attribute-map"
MAP = "CustomerProfilesByEmailPartition"
PARTITIONS = [f"p{n:02d}" for n in range(16)]
HOLD = "held at the gate"


def expected_partition(email: str) -> str:
    """The spec's partition, reckoned apart from the pattern's code: 16 divides 16**k, so a
    hex number mod 16 is its last digit."""
    digest = hashlib.sha256(email.strip().lower().encode()).hexdigest()
    return f"p{int(digest[-1], 16):02d}"


async def upsert(
    client: httpx.AsyncClient, email: str, name: str, flow_id: str | None = None
) -> httpx.Response:
    params = {"flowId": flow_id} if flow_id else None
    return await client.post(
        f"{BASE}/profiles", params=params, json={"email": email, "displayName": name}
    )


async def upserted(client: httpx.AsyncClient, email: str, name: str) -> dict[str, Any]:
    response = await upsert(client, email, name)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def lookup(
    client: httpx.AsyncClient, email: str, flow_id: str | None = None
) -> httpx.Response:
    params = {"email": email, **({"flowId": flow_id} if flow_id else {})}
    return await client.get(f"{BASE}/profiles", params=params)


async def partitions(client: httpx.AsyncClient, flow_id: str = FLOW_ID) -> dict[str, Any]:
    """Every partition instance's stored value, by instance name, read with GetAttributes."""
    response = await client.get(
        f"/api/v1/flows/{flow_id}/attributes",
        params=[("name", f"{MAP}/{p}") for p in PARTITIONS],
    )
    assert response.status_code == 200, response.text
    values = response.json()["values"]
    return {name.removeprefix(f"{MAP}/"): value for name, value in values.items()}


def emails_over_every_partition(count: int) -> list[str]:
    emails = [f"customer{n}@example.com" for n in range(count)]
    assert {expected_partition(e) for e in emails} == set(PARTITIONS), "pick more emails"
    return emails


def emails_in_one_partition(partition: str, count: int) -> list[str]:
    emails = (f"same{n}@example.com" for n in range(10_000))
    chosen = [e for e in emails if expected_partition(e) == partition][:count]
    assert len(chosen) == count
    return chosen


async def upsert_directly(engine: Engine, email: str, name: str) -> dict[str, Any]:
    """Upsert through the engine with the pattern's options, past the route's turns, retrying
    lock conflicts itself; return the profile as the route would answer it."""
    payload = UpsertProfileInput(email=email, display_name=name)
    for _ in range(10_000):
        try:
            profile: CustomerProfile = await engine.invoke_rpc(
                routes.FLOW.upsert_profile, FLOW_ID, payload, options=flow.upsert_options(email)
            )
        except RPCLockConflictError:
            # Backoff pacing only: the next attempt may find the lock free or not.
            await asyncio.sleep(random.uniform(0, 0.002))
            continue
        return profile.model_dump(mode="json", by_alias=True)
    raise AssertionError(f"the upsert of {email} never got its partition lock")


class GatedCustomerProfileFlow(CustomerProfileFlow):
    """The pattern's Flow, under its type name, whose upserts with display name HOLD stop at a
    gate once they hold their partition's lock, until the test opens it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    @classmethod
    def flow_type(cls) -> str:
        """Serve as CustomerProfileFlow, so the pattern's routes drive this Flow."""
        return CustomerProfileFlow.flow_type()

    @rpc
    async def upsert_profile(self, context: Context, input: UpsertProfileInput) -> CustomerProfile:
        """Wait at the gate when asked to (the lock is held by then), then upsert as usual."""
        if input.display_name == HOLD:
            self.entered.set()
            await self.gate.wait()
        profile: CustomerProfile = CustomerProfileFlow.upsert_profile(self, context, input)
        return profile


class ConflictSpy(engine.Telemetry):
    """The engine's telemetry, noting the key of every RPC lock conflict met, those the
    engine tries again included (``RPCInvokeOptions.lock_retry``)."""

    def __init__(self) -> None:
        self.conflicts: list[str] = []
        self.conflicted = asyncio.Event()

    def lock_conflict(self, flow_type: str, lock_key: str) -> None:
        self.conflicts.append(lock_key)
        self.conflicted.set()

    def config(self, settings: Settings) -> engine.EngineConfig:
        """The settings' EngineConfig, reporting to this spy."""
        return dataclasses.replace(config_from_settings(settings), telemetry=self)


def hold(served_engine: Engine, email: str) -> asyncio.Task[Any]:
    """Upsert ``email`` straight through the engine, past the route: it takes the partition
    lock and keeps it until the gate opens."""
    return asyncio.create_task(
        served_engine.invoke_rpc(
            routes.FLOW.upsert_profile,
            FLOW_ID,
            UpsertProfileInput(email=email, display_name=HOLD),
            options=flow.upsert_options(email),
        )
    )


async def test_start_is_201_then_200_with_started_false(make_client: Any) -> None:
    async with make_client() as client:
        first = await client.post(f"{BASE}/start")
        again = await client.post(f"{BASE}/start")
        layout = await partitions(client)
    assert first.status_code == 201
    assert first.json()["started"] is True and first.json()["flowId"] == FLOW_ID
    assert again.status_code == 200
    assert again.json() == {**first.json(), "started": False}
    assert layout == {p: {} for p in PARTITIONS}


async def test_before_start_upserts_and_lookups_are_flow_not_active(make_client: Any) -> None:
    async with make_client() as client:
        upserting = await upsert(client, "ann@example.com", "Ann")
        looking = await lookup(client, "ann@example.com")
    assert_problem(upserting, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    assert_problem(looking, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


@PARTITION_RULE
@pytest.mark.parametrize(
    ("email", "partition"),
    [
        # Each from `printf %s EMAIL | sha256sum`: the last hex digit of the digest.
        ("ann@example.com", "p06"),
        ("bob@example.com", "p08"),
        ("carol@example.org", "p11"),
        ("dave@example.net", "p15"),
        ("eve@example.com", "p10"),
        (" Eve@Example.COM\t", "p10"),
    ],
)
async def test_the_partition_is_sha256_of_the_normalized_email_mod_16(
    make_client: Any, email: str, partition: str
) -> None:
    normalized = email.strip().lower()
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        profile = await upserted(client, email, "Someone")
        layout = await partitions(client)
    assert flow.partition_of(email) == partition == expected_partition(email)
    assert (
        flow.partition_number(email)
        == int(hashlib.sha256(normalized.encode()).hexdigest(), 16) % 16
    )
    assert profile["partition"] == partition and profile["email"] == normalized
    assert {p: list(v) for p, v in layout.items() if v} == {partition: [normalized]}


def test_partition_names_and_call_options_name_exactly_one_instance() -> None:
    assert tuple(PARTITIONS) == flow.PARTITIONS and flow.PARTITION_COUNT == 16
    with pytest.raises(ValueError, match="outside"):
        flow.partition_name(16)
    assert flow.lookup_options("Ann@Example.com") == RPCInvokeOptions(
        load_attribute_map_instances=(AttributeMapLoad(MAP, "p06"),)
    )
    assert flow.upsert_options(" ann@example.com") == RPCInvokeOptions(
        lock_attribute_map_instances=(AttributeLock(MAP, "p06"),),
        load_attribute_map_instances=(AttributeMapLoad(MAP, "p06"),),
    )


async def test_an_email_in_any_case_or_padding_is_one_profile_in_one_partition(
    make_client: Any,
) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        first = await upserted(client, " Ann@Example.COM ", "Ann")
        second = await upserted(client, "ann@example.com", "Ann Lovelace")
        by_padded = await lookup(client, "  ANN@example.com\n")
        layout = await partitions(client)
    assert first["email"] == second["email"] == "ann@example.com"
    assert first["partition"] == second["partition"] == "p06"
    assert (first["revision"], second["revision"]) == (1, 2)
    assert by_padded.status_code == 200 and by_padded.json() == second
    assert list(layout["p06"]) == ["ann@example.com"]
    assert layout["p06"]["ann@example.com"] == second
    assert second["updatedAt"].endswith("Z") and second["updatedAt"] >= first["updatedAt"]


async def test_a_bad_email_is_refused_with_the_rule_in_words(make_client: Any) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        upserting = await client.post(
            f"{BASE}/profiles", json={"email": "ann smith@example.com", "displayName": "Ann"}
        )
        looking = await lookup(client, "ann@example")
    rule = (
        "must be an email address: one @, a dot in the domain, and no space or control "
        "character inside (spaces around it are ignored)"
    )
    for answer, where in [(upserting, "body.email"), (looking, "query.email")]:
        problem = assert_problem(answer, 422, "VALIDATION_ERROR")
        assert problem["errors"] == [
            {"location": where, "message": rule, "type": "string_pattern_mismatch"}
        ]
        assert problem["detail"] == f"{where}: {rule}"


@REFUSED_EARLY
@pytest.mark.parametrize(
    "email",
    [
        "",
        "ann",
        "ann@example",
        "ann@@example.com",
        "ann@exa@mple.com",
        "ann smith@example.com",
        "ann@example.",
        "ann@.com",
        "@example.com",
        "ann@example.com\u0000",
        "ann@example.\u3000",  # valid as sent, but strip() leaves no domain suffix
        "a" * 310 + "@example.com",
        7,
        None,
    ],
)
async def test_a_bad_email_is_422_validation_error(make_client: Any, email: Any) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        upserting = await client.post(
            f"{BASE}/profiles", json={"email": email, "displayName": "Ann"}
        )
        looking = await lookup(client, email) if isinstance(email, str) else None
        layout = await partitions(client)
    body = assert_problem(upserting, 422, "VALIDATION_ERROR")
    assert {e["location"] for e in body["errors"]} == {"body.email"}
    if looking is not None:
        problem = assert_problem(looking, 422, "VALIDATION_ERROR")
        assert {e["location"] for e in problem["errors"]} == {"query.email"}
    assert layout == {p: {} for p in PARTITIONS}


@REFUSED_EARLY
@pytest.mark.parametrize(
    "body",
    [
        {"email": "ann@example.com"},
        {"email": "ann@example.com", "displayName": ""},
        {"email": "ann@example.com", "displayName": "x" * 201},
        {"email": "ann@example.com", "displayName": 7},
        {"email": "ann@example.com", "displayName": "Ann", "partition": "p00"},
    ],
)
async def test_a_bad_body_is_422_validation_error(make_client: Any, body: Any) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        response = await client.post(f"{BASE}/profiles", json=body)
    assert_problem(response, 422, "VALIDATION_ERROR")


async def test_an_unknown_email_is_404_profile_not_found(make_client: Any) -> None:
    neighbour = emails_in_one_partition("p06", 1)[0]
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        in_empty_partition = await lookup(client, "ann@example.com")
        await upserted(client, neighbour, "Neighbour")
        beside_another = await lookup(client, "ann@example.com")
    for response in (in_empty_partition, beside_another):
        problem = assert_problem(response, 404, "PROFILE_NOT_FOUND", field="email")
        assert problem["detail"] == "no profile has email ann@example.com"


async def test_200_concurrent_upserts_spread_over_all_16_partitions_are_all_readable(
    make_app: Any,
) -> None:
    emails = emails_over_every_partition(200)
    async with make_app() as served:
        client = served.client
        await client.post(f"{BASE}/start")
        acked = await asyncio.gather(*(upsert(client, e, f"Customer {e}") for e in emails))
        read = await asyncio.gather(*(lookup(client, e) for e in emails))
        layout = await partitions(client)
        decoded = await served.engine.get_attributes(FLOW_ID, [f"{MAP}/p00"])
    assert [r.status_code for r in acked] == [200] * 200
    assert [r.status_code for r in read] == [200] * 200
    assert [r.json() for r in read] == [r.json() for r in acked]
    assert all(r.json()["revision"] == 1 for r in acked)
    # Each instance holds exactly the emails that hash to it, and nothing else.
    expected: dict[str, set[str]] = {p: set() for p in PARTITIONS}
    for email in emails:
        expected[expected_partition(email)].add(email)
    assert {p: set(v) for p, v in layout.items()} == expected
    assert all(r.json() == layout[r.json()["partition"]][r.json()["email"]] for r in acked)
    p00 = decoded.values[f"{MAP}/p00"]
    assert set(p00) == expected["p00"]
    assert all(isinstance(p, CustomerProfile) and p.partition == "p00" for p in p00.values())


async def test_20_concurrent_updates_of_one_email_serialize_and_none_is_lost(
    make_app: Any, settings: Settings
) -> None:
    email = "ann@example.com"
    names = [f"Ann v{n}" for n in range(20)]
    spy = ConflictSpy()
    async with make_app(engine_config=spy.config(settings)) as served:
        client = served.client
        await client.post(f"{BASE}/start")
        # Half go past the route's turns, so the partition lock alone must keep them apart.
        results = await asyncio.gather(
            *(upserted(client, email, name) for name in names[:10]),
            *(upsert_directly(served.engine, email, name) for name in names[10:]),
        )
        final = await lookup(client, email)
    # Each upsert read the one committed before it: a lost update would repeat a revision.
    by_revision = {r["revision"]: r["displayName"] for r in results}
    assert sorted(by_revision) == list(range(1, 21))
    assert sorted(by_revision.values()) == sorted(names)
    assert final.json()["revision"] == 20
    assert final.json()["displayName"] == by_revision[20]
    assert spy.conflicts, "20 simultaneous upserts of one partition should have collided"


async def test_concurrent_upserts_of_many_emails_in_one_partition_keep_every_one(
    make_app: Any, settings: Settings
) -> None:
    emails = emails_in_one_partition("p03", 10)
    spy = ConflictSpy()
    async with make_app(engine_config=spy.config(settings)) as served:
        client = served.client
        await client.post(f"{BASE}/start")
        results = await asyncio.gather(
            *(upserted(client, e, f"{e} #{n}") for n in range(2) for e in emails),
            *(upsert_directly(served.engine, e, f"{e} #2") for e in emails),
        )
        layout = await partitions(client)
    # Writing the instance back from a stale read would drop other emails' profiles.
    assert set(layout["p03"]) == set(emails)
    assert {e: p["revision"] for e, p in layout["p03"].items()} == dict.fromkeys(emails, 3)
    assert Counter(r["email"] for r in results) == dict.fromkeys(emails, 3)
    assert {p for p, v in layout.items() if v} == {"p03"}
    assert spy.conflicts


async def test_flow_id_parameter_keeps_separate_profile_stores(make_client: Any) -> None:
    async with make_client() as client:
        await client.post(f"{BASE}/start", params={"flowId": "profiles-a"})
        await client.post(f"{BASE}/start", params={"flowId": "profiles-b"})
        in_a = await upsert(client, "ann@example.com", "Ann", "profiles-a")
        from_a = await lookup(client, "ann@example.com", "profiles-a")
        from_b = await lookup(client, "ann@example.com", "profiles-b")
        default = await lookup(client, "ann@example.com")
    assert in_a.status_code == 200 and from_a.json() == in_a.json()
    assert_problem(from_b, 404, "PROFILE_NOT_FOUND")
    assert_problem(default, 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")


async def test_a_held_partition_lock_is_retried_until_free_and_both_upserts_commit(
    make_app: Any, settings: Settings
) -> None:
    gated = GatedCustomerProfileFlow()
    email = "ann@example.com"
    spy = ConflictSpy()
    config = spy.config(settings)
    async with make_app(Registry([gated]), routers=[routes.router], engine_config=config) as served:
        client = served.client
        await client.post(f"{BASE}/start")
        held = hold(served.engine, email)
        await gated.entered.wait()
        # The partition's lock is held now: the route's upsert collides and the engine tries
        # it again later.
        waiting = asyncio.create_task(upsert(client, " ANN@example.com", "Ann again"))
        await spy.conflicted.wait()
        assert not waiting.done()
        gated.gate.set()
        first = await held
        second = await waiting
        final = await lookup(client, email)
    assert first.display_name == HOLD and first.revision == 1
    assert second.status_code == 200, second.text
    assert second.json()["revision"] == 2 and second.json()["displayName"] == "Ann again"
    assert final.json() == second.json()
    assert set(spy.conflicts) == {f"{MAP}/p06"}


async def test_upserts_and_lookups_of_other_partitions_pass_a_held_lock(
    make_app: Any, settings: Settings
) -> None:
    gated = GatedCustomerProfileFlow()
    others = emails_over_every_partition(200)
    one_per_other = {expected_partition(e): e for e in others if expected_partition(e) != "p06"}
    spy = ConflictSpy()
    config = spy.config(settings)
    async with make_app(Registry([gated]), routers=[routes.router], engine_config=config) as served:
        client = served.client
        await client.post(f"{BASE}/start")
        held = hold(served.engine, "ann@example.com")
        await gated.entered.wait()
        passed = await asyncio.gather(*(upsert(client, e, "Other") for e in one_per_other.values()))
        # A lookup takes no lock, so even the held partition answers (from committed state).
        same_partition = await lookup(client, "ann@example.com")
        gated.gate.set()
        await held
    assert len(passed) == 15 and all(r.status_code == 200 for r in passed)
    assert {r.json()["partition"] for r in passed} == set(PARTITIONS) - {"p06"}
    assert_problem(same_partition, 404, "PROFILE_NOT_FOUND")
    assert spy.conflicts == []


async def test_a_lock_held_past_the_retry_budget_is_409_with_retry_after(
    make_app: Any, settings: Settings
) -> None:
    gated = GatedCustomerProfileFlow()
    routers = [routes.router]
    spy = ConflictSpy()
    config = spy.config(settings)
    async with make_app(
        Registry([gated]), routers=routers, lock_retry_seconds=0.05, engine_config=config
    ) as served:
        client = served.client
        await client.post(f"{BASE}/start")
        held = hold(served.engine, "ann@example.com")
        await gated.entered.wait()
        refused = await upsert(client, "ann@example.com", "Too late")
        gated.gate.set()
        await held
        final = await lookup(client, "ann@example.com")
    problem = assert_problem(refused, 409, "RPC_LOCK_CONFLICT")
    assert refused.headers["retry-after"] == "1"
    assert problem["lockKey"] == f"{MAP}/p06"
    assert len(spy.conflicts) >= 1
    # The refused upsert committed nothing: the held one is the only revision.
    assert final.json()["revision"] == 1 and final.json()["displayName"] == HOLD


async def test_the_rpcs_read_only_the_instance_the_call_loads(make_client: Any) -> None:
    """Neither RPC registers a load: the generic RPC route shows what the per-call load does."""
    rpc_path = f"/api/v1/flows/{FLOW_ID}/rpcs/get_profile"
    async with make_client() as client:
        await client.post(f"{BASE}/start")
        await upserted(client, "ann@example.com", "Ann")
        unloaded = await client.post(rpc_path, json={"input": {"email": "ann@example.com"}})
        wrong = await client.post(
            rpc_path,
            json={
                "input": {"email": "ann@example.com"},
                "options": {"loadAttributeMapInstances": [f"{MAP}/p07"]},
            },
        )
        loaded = await client.post(
            rpc_path,
            json={
                "input": {"email": "ann@example.com"},
                "options": {"loadAttributeMapInstances": [f"{MAP}/p06"]},
            },
        )
    for response in (unloaded, wrong):
        assert response.status_code == 500, response.text
        assert response.json()["errorType"] == "AttributeMapNotLoadedError"
    assert loaded.status_code == 200
    assert loaded.json()["output"]["email"] == "ann@example.com"
    assert loaded.json()["output"]["revision"] == 1
