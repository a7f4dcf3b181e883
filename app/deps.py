"""Dependencies shared by routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

import engine


def get_engine(request: Request) -> engine.Engine:
    """Return the Engine the app's lifespan started."""
    return request.app.state.engine  # type: ignore[no-any-return]


EngineDep = Annotated[engine.Engine, Depends(get_engine)]
