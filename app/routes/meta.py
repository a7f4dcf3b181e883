"""The registry, health and readiness."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException, Request, Response

import engine
from app.deps import EngineDep
from app.errors import RETRY_AFTER_SECONDS
from app.flow_type_schemas import FlowTypeInfo, FlowTypesResponse
from app.metrics import CONTENT_TYPE
from app.schemas import HealthResponse

router = APIRouter()

#: How long /readyz waits for the database before it answers 503.
READY_TIMEOUT_SECONDS = 2.0


@router.get(
    "/api/v1/flow-types",
    operation_id="listFlowTypes",
    response_model=FlowTypesResponse,
    tags=["flows"],
)
async def list_flow_types(eng: EngineDep) -> FlowTypesResponse:
    """List the registered Flow types with their Steps, RPCs, Attributes and indexes."""
    return FlowTypesResponse(flow_types=[FlowTypeInfo.of(d) for d in eng.list_flow_types()])


@router.get("/healthz", operation_id="health", response_model=HealthResponse, tags=["health"])
async def health() -> HealthResponse:
    """Report that the process is alive."""
    return HealthResponse(status="ok")


@router.get(
    "/readyz",
    operation_id="ready",
    response_model=HealthResponse,
    tags=["health"],
    responses={503: {"description": "The engine is not started, or its database does not answer"}},
)
async def ready(request: Request) -> HealthResponse:
    """Report that the engine is started and its database answers (503 with ``Retry-After``
    otherwise, until it does again)."""
    eng = _started_engine(request)
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await eng.check_database()
    except TimeoutError:
        raise engine.UnavailableError(
            f"the database did not answer within {READY_TIMEOUT_SECONDS} s"
        ) from None
    return HealthResponse(status="ready")


@router.get(
    "/metrics",
    operation_id="metrics",
    tags=["health"],
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text exposition format",
            "content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}},
        },
        503: {"description": "The engine is not started"},
    },
)
async def metrics(request: Request) -> Response:
    """Serve the Prometheus metrics: RPCs, lock conflicts, Step attempts and queue, commits,
    timers, open runs, Stream Store bytes and HTTP requests."""
    body = await request.app.state.metrics.render(_started_engine(request))
    return Response(body, media_type=CONTENT_TYPE)


def _started_engine(request: Request) -> engine.Engine:
    """Return the app's Engine once its lifespan has started it (recovery done), else 503."""
    eng: engine.Engine | None = getattr(request.app.state, "engine", None)
    if eng is None:
        raise HTTPException(
            503, "the engine is not started", headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )
    return eng
