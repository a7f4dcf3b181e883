"""Dependencies shared by routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

import engine
from app.limits import Limits


async def get_engine(request: Request) -> engine.Engine:
    """Return the Engine the app's lifespan started (async, so no threadpool hop)."""
    return request.app.state.engine  # type: ignore[no-any-return]


EngineDep = Annotated[engine.Engine, Depends(get_engine)]


#: ``runId``: a run of the Flow ID instead of its latest.
RunIdQuery = Annotated[str | None, Query(alias="runId", min_length=1, max_length=256)]
#: ``pageSize`` of a history or Channel page, checked by the engine (400, not 422).
PageSizeQuery = Annotated[
    int,
    Query(
        alias="pageSize", description="Between 1 and 1000; anything else is 400 INVALID_ARGUMENT."
    ),
]
#: ``pageToken`` of a history or Channel page, checked by the engine (400, not 422).
PageTokenQuery = Annotated[
    str,
    Query(
        alias="pageToken",
        description="A nextPageToken of the same listing; anything else is 400 INVALID_PAGE_TOKEN.",
    ),
]


async def get_limits(request: Request) -> Limits:
    """Return the limits in force (from the settings)."""
    return request.app.state.limits  # type: ignore[no-any-return]


LimitsDep = Annotated[Limits, Depends(get_limits)]
