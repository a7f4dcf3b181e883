"""HTTP routes of the Attribute primitive."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import Field

from engine import StartFlowOptions
from patterns._shared import (
    PROBLEM,
    FlowIdQuery,
    RequestBody,
    StartResponse,
    Wire,
    client_of,
    start_or_report_running,
)
from patterns.primitives.attribute.flow import (
    DEFAULT_NOTE,
    DEFAULT_WAIT_SECONDS,
    MAX_WAIT_SECONDS,
    PAYMENT,
    STATUS_PENDING,
    AttributeFlow,
    AttributeInput,
)

DEFAULT_FLOW_ID = "primitive-attribute"
DEFAULT_MODEL_API_KEY = "sk-demo-not-a-real-key"
# A declaration used to name the RPC and the Attributes; it does no I/O.
FLOW = AttributeFlow()
PAYMENT_KEY = f"{FLOW.progress.name}/{PAYMENT}"

router = APIRouter(prefix="/primitives/attribute", tags=["primitive-attribute"])


class AttributeStartBody(RequestBody):
    """The Step's output and wait, and the short-lived key; every field has a default."""

    note: str = Field(default=DEFAULT_NOTE, max_length=200)
    wait_seconds: float = Field(default=DEFAULT_WAIT_SECONDS, ge=0, le=MAX_WAIT_SECONDS)
    model_api_key: str | None = Field(
        default=DEFAULT_MODEL_API_KEY,
        min_length=1,
        max_length=4096,
        description="Stored only in the blob store; null erases a stored key",
    )


class AttributeStartResponse(StartResponse):
    """The AttributeFlow run."""


class UpdateStatusBody(RequestBody):
    """The new status, also written to ``progress/payment``."""

    status: str = Field(min_length=1, max_length=64)


class UpdateStatusResponse(Wire):
    """The status the RPC committed."""

    status: str


class AttributeStateResponse(Wire):
    """The run's committed Attributes; null when unset (a deleted key reads as unset)."""

    flow_id: str
    run_id: str
    status: str | None
    payment: str | None
    model_api_key: str | None


@router.post(
    "/start",
    operation_id="startAttributeFlow",
    status_code=status.HTTP_201_CREATED,
    response_model=AttributeStartResponse,
    responses={200: {"model": AttributeStartResponse, "description": "Already running"}},
)
async def start(
    request: Request,
    response: Response,
    body: Annotated[AttributeStartBody, Body(default_factory=AttributeStartBody)],
    flow_id: FlowIdQuery = DEFAULT_FLOW_ID,
) -> AttributeStartResponse:
    """Start an AttributeFlow with status `pending` and a model API key; 200 if running.

    The initial Attributes commit with the start. As Dex does for hard-delete Attributes,
    a start that finds the Flow running still overwrites its stored key (null erases it).
    """
    given = body
    payload = AttributeInput(note=given.note, wait_seconds=given.wait_seconds)
    options = StartFlowOptions(
        initial_attributes={
            FLOW.status.name: STATUS_PENDING,
            FLOW.model_api_key.name: given.model_api_key,
        }
    )
    return await start_or_report_running(
        request, response, AttributeStartResponse, AttributeFlow, flow_id, payload, options
    )


@router.post(
    "/update-status",
    operation_id="updateAttributeFlowStatus",
    response_model=UpdateStatusResponse,
    responses={
        404: {"description": "No such Flow, or it has closed", **PROBLEM},
        409: {"description": "A Step or RPC holds a lock (RPC_LOCK_CONFLICT)", **PROBLEM},
    },
)
async def update_status(
    body: UpdateStatusBody, request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> UpdateStatusResponse:
    """Invoke update_status, which locks `status` and `progress/payment` and sets both.

    Locks need an active run: once AttributeStep has completed the Flow this is 404
    FLOW_NOT_ACTIVE_OR_NOT_FOUND. A held lock is 409 RPC_LOCK_CONFLICT with Retry-After.
    """
    committed = await client_of(request).invoke_rpc(FLOW.update_status, flow_id, body.status)
    return UpdateStatusResponse(status=committed)


@router.get(
    "/attributes",
    operation_id="getAttributeFlowAttributes",
    response_model=AttributeStateResponse,
    responses={
        400: {"description": "The Flow ID belongs to another Flow type", **PROBLEM},
        404: {"description": "No such Flow (FLOW_NOT_FOUND)", **PROBLEM},
    },
)
async def attributes(
    request: Request, flow_id: FlowIdQuery = DEFAULT_FLOW_ID
) -> AttributeStateResponse:
    """Read status, progress/payment and the model API key with GetAttributes.

    One committed state, no locks, no handler: it answers on a closed run too. The hard-delete
    key is resolved from the blob store; once AttributeStep deleted it, it reads as null.
    """
    read = await client_of(request).get_attributes(
        flow_id, [FLOW.status.name, PAYMENT_KEY, FLOW.model_api_key.name]
    )
    return AttributeStateResponse(
        flow_id=read.flow_id,
        run_id=read.run_id,
        status=read.values.get(FLOW.status.name),
        payment=read.values.get(PAYMENT_KEY),
        model_api_key=read.values.get(FLOW.model_api_key.name),
    )
