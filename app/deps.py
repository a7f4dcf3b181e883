"""Dependencies shared by routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

import engine


async def get_engine(request: Request) -> engine.Engine:
    """Return the Engine the app's lifespan started (async, so no threadpool hop)."""
    return request.app.state.engine  # type: ignore[no-any-return]


EngineDep = Annotated[engine.Engine, Depends(get_engine)]
