"""Health and readiness of a front-end process (``DEXLITE_REMOTE_URL``): it runs no engine, so
it is ready when the dexlite server it calls is."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from app.client import Client
from app.errors import RETRY_AFTER_SECONDS
from app.schemas import HealthResponse

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="health", response_model=HealthResponse)
async def health() -> HealthResponse:
    """Report that the process is alive."""
    return HealthResponse(status="ok")


@router.get(
    "/readyz",
    operation_id="ready",
    response_model=HealthResponse,
    responses={503: {"description": "The dexlite server it calls is not ready"}},
)
async def ready(request: Request) -> HealthResponse:
    """Report that the dexlite server this process calls is ready (503 with ``Retry-After``
    otherwise)."""
    client: Client | None = getattr(request.app.state, "client", None)
    if client is None:
        raise HTTPException(
            503, "the client is not started", headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )
    await client.check_ready()
    return HealthResponse(status="ready")
