"""Long polls that end when their client leaves.

A long poll (readStream, waitForFlow, waitForAttributeMatch) may wait up to a minute. A client
that gives up on one (a ``dexlite streams tail`` stopped with Ctrl-C, a closed browser tab)
left it waiting: the server kept watching for nobody, and a graceful stop waited for it,
since uvicorn lets the requests in flight finish before it shuts the app down. Here the wait
runs against the client's departure (``http.disconnect`` on the request's receive channel)
and is canceled once the client has gone; what the route then answers nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response

T = TypeVar("T")


async def while_connected(
    request: Request, wait_seconds: float, waiting: Coroutine[Any, Any, T]
) -> T | Response:
    """Return what ``waiting`` returns, or, when the client leaves first, cancel it and
    return an empty response (written to no one). A wait of 0 s runs as it is."""
    if wait_seconds <= 0:
        return await waiting
    wait = asyncio.ensure_future(waiting)
    watch = asyncio.ensure_future(_departure(request))
    try:
        await asyncio.wait((wait, watch), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this request was canceled itself
        wait.cancel()
        watch.cancel()
        raise
    if wait.done() or watch.exception() is not None:
        watch.cancel()  # (a receive channel that failed tells nothing: the wait goes on)
        return await wait
    wait.cancel()  # the client left first
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await wait
    return Response(status_code=204)


async def _departure(request: Request) -> None:
    """Return once the client has disconnected (the request's body was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
