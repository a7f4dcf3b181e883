"""Pieces the bundled examples' routes share: wire bases, the flowId query, starting a Flow and
retrying RPC lock conflicts.

The Flow ID's default stays on each route (``flow_id: FlowIdQuery = DEFAULT_FLOW_ID``): FastAPI
refuses a default inside ``Annotated``, and mypy accepts no computed type in an annotation, so
one alias serves every module.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, TypeVar

from fastapi import Query, Request, Response, status
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from engine import (
    Flow,
    FlowAlreadyStartedError,
    FlowClient,
    StartFlowOptions,
)

FlowIdQuery = Annotated[
    str, Query(alias="flowId", min_length=1, max_length=256, description="Target Flow ID")
]
"""The ``flowId`` query parameter naming the target Flow; each route supplies its default."""

PROBLEM: dict[str, Any] = {
    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
}
"""Spread into a ``responses`` entry whose body is an ``application/problem+json`` document."""


class Wire(BaseModel):
    """Base of the examples' wire models: snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class RequestBody(Wire):
    """Base of the examples' request bodies, which reject unknown fields and take values
    strictly (``true`` is not an integer, ``"7"`` not a number), as their schema says."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StartResponse(Wire):
    """The run a start route started, or the one already running (``started`` false).

    Each example subclasses it under its own name and docstring, which OpenAPI shows as the
    schema's title and description.
    """

    flow_id: str
    run_id: str
    started: bool


_StartResponseT = TypeVar("_StartResponseT", bound=StartResponse)
_T = TypeVar("_T")


def client_of(request: Request) -> FlowClient:
    """Return the FlowClient the app's routes call: its own Engine, or (a front-end process,
    ``DEXLITE_REMOTE_URL``) a Client of the dexlite server that runs the Flows."""
    return request.app.state.client  # type: ignore[no-any-return]


async def start_or_report_running(
    request: Request,
    response: Response,
    model: type[_StartResponseT],
    flow: type[Flow[Any]],
    flow_id: str,
    input: Any = None,
    options: StartFlowOptions | None = None,
) -> _StartResponseT:
    """Start a run of ``flow``: 201 with ``started`` true, or 200 with the run already running.

    Args:
        request: The request whose app holds the FlowClient.
        response: The route's response, whose status code this sets.
        model: The route's start response model.
        flow: The Flow class to start.
        flow_id: The Flow ID to start it under.
        input: The start Step's input; None for a Flow without one.
        options: Start options such as initial Attributes.

    Returns:
        The started run, or the running one (its run ID is empty when the engine did not say).
    """
    try:
        result = await client_of(request).start_flow(flow, flow_id, input, options)
    except FlowAlreadyStartedError as exc:
        response.status_code = status.HTTP_200_OK
        return model(flow_id=flow_id, run_id=exc.run_id or "", started=False)
    response.status_code = status.HTTP_201_CREATED
    return model(flow_id=result.flow_id, run_id=result.run_id, started=True)


def lock_retry(request: Request) -> timedelta:
    """Return how long the example routes retry RPC lock conflicts (the ``lock_retry_seconds``
    setting): the engine's invocations take turns meanwhile, in arrival order
    (``RPCInvokeOptions.lock_retry``), then answer 409 with ``Retry-After``."""
    return timedelta(seconds=request.app.state.settings.lock_retry_seconds)
