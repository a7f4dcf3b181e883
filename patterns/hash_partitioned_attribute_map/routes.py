"""HTTP routes of the Hash-Partitioned AttributeMap pattern."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import Field

from engine import StartFlowOptions
from patterns import _shared
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    Wire,
    client_of,
    lock_retry,
    start_or_report_running,
)
from patterns.hash_partitioned_attribute_map.flow import (
    PARTITION_PATTERN,
    PARTITIONS,
    CustomerProfile,
    CustomerProfileFlow,
    DisplayName,
    EmailAddress,
    GetProfileInput,
    UpsertProfileInput,
    lookup_options,
    upsert_options,
)

DEFAULT_FLOW_ID = "hash-partitioned-attribute-map"
# A declaration used to name the RPCs and the AttributeMap; it does no I/O.
FLOW = CustomerProfileFlow()

router = APIRouter(
    prefix="/patterns/hash-partitioned-attribute-map",
    tags=["pattern-hash-partitioned-attribute-map"],
)


class CustomerProfileStartResponse(_shared.StartResponse):
    """The customer profile store's run."""


class UpsertProfileBody(RequestBody):
    """The profile to create or replace, keyed by its normalized email."""

    email: EmailAddress
    display_name: DisplayName


class CustomerProfileResponse(Wire):
    """A customer profile and the partition instance that holds it."""

    email: str = Field(description="The normalized email: stripped and lower-cased.")
    display_name: str
    partition: str = Field(
        pattern=PARTITION_PATTERN,
        description="The CustomerProfilesByEmailPartition instance holding the profile.",
    )
    revision: int = Field(description="How many upserts the profile has had (1 once created).")
    updated_at: datetime


def initial_attributes() -> dict[str, object]:
    """Return the layout a new store starts with: every partition instance, empty."""
    return {f"{FLOW.profiles.name}/{partition}": {} for partition in PARTITIONS}


def _profile(profile: CustomerProfile) -> CustomerProfileResponse:
    return CustomerProfileResponse(
        email=profile.email,
        display_name=profile.display_name,
        partition=profile.partition,
        revision=profile.revision,
        updated_at=profile.updated_at,
    )


@router.post(
    "/start",
    operation_id="startCustomerProfileFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=CustomerProfileStartResponse,
    responses={200: {"model": CustomerProfileStartResponse, "description": "Already running"}},
)
async def start(
    request: Request, response: Response, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> CustomerProfileStartResponse:
    """Start the RPC-only customer profile Flow with 16 empty partitions; 200 if running."""
    options = StartFlowOptions(initial_attributes=initial_attributes())
    return await start_or_report_running(
        request, response, CustomerProfileStartResponse, CustomerProfileFlow, flow_id, None, options
    )


@router.post(
    "/profiles",
    operation_id="upsertCustomerProfile",
    response_model=CustomerProfileResponse,
    responses={
        404: {"description": "Flow not started", **PROBLEM},
        409: {"description": "Lock conflicts outlasted the retry budget", **PROBLEM},
    },
)
async def upsert_profile(
    body: UpsertProfileBody, request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> CustomerProfileResponse:
    """Create or replace a profile, locking only its partition; retries lock conflicts.

    The upsert locks and loads the one CustomerProfilesByEmailPartition instance the email
    hashes to, so upserts to other partitions go on meanwhile.
    """
    eng = client_of(request)
    payload = UpsertProfileInput(email=body.email, display_name=body.display_name)
    options = replace(upsert_options(payload.email), lock_retry=lock_retry(request))
    profile = await eng.invoke_rpc(FLOW.upsert_profile, flow_id, payload, options=options)
    return _profile(profile)


@router.get(
    "/profiles",
    operation_id="getCustomerProfile",
    response_model=CustomerProfileResponse,
    responses={404: {"description": "No such profile (PROFILE_NOT_FOUND) or Flow", **PROBLEM}},
)
async def get_profile(
    request: Request,
    email: Annotated[EmailAddress, Query()],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> CustomerProfileResponse:
    """Return the profile of an email, loading exactly its partition and taking no lock."""
    profile = await client_of(request).invoke_rpc(
        FLOW.get_profile,
        flow_id,
        GetProfileInput(email=email),
        options=lookup_options(email),
    )
    return _profile(profile)
