"""Request IDs and structured logs.

Every request gets an ``X-Request-ID``: the client's when it sends a sensible one, else a new
one, echoed in the response and carried by every log line written while the request runs.
With ``DEXLITE_LOG_FORMAT=json`` each line is one JSON object (``ts``, ``level``, ``logger``,
``message``, ``requestId`` and, on lines about a Flow, ``flowId`` and ``runId``), and the
server writes one ``dexlite.access`` line per request. Lines never hold request or response
bodies (where hard-delete values travel) or headers (where the API token does).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import sys
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = "x-request-id"
_HEADER_KEY = REQUEST_ID_HEADER.encode()
#: A client's request ID is kept when it is short and plain; anything else is replaced.
_ACCEPTABLE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
#: The record attributes logging itself sets; anything else on a record is an extra field.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

request_id: ContextVar[str | None] = ContextVar("dexlite_request_id", default=None)
access_log = logging.getLogger("dexlite.access")

_id_prefix = os.urandom(8).hex()
_id_numbers = itertools.count(1)


def _reset_request_ids() -> None:
    global _id_prefix, _id_numbers
    _id_prefix, _id_numbers = os.urandom(8).hex(), itertools.count(1)


# A forked worker must not hand out its parent's IDs.
os.register_at_fork(after_in_child=_reset_request_ids)


def new_request_id() -> str:
    """Return a new request ID: 32 hex digits, a random prefix per process and a counter.

    Unique like a UUID's hex, without a read of the system's random source per request.
    """
    return f"{_id_prefix}{next(_id_numbers):016x}"


class RequestIDMiddleware:
    """Give each HTTP request an ID, echo it as ``X-Request-ID`` and log the request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = ""
        for name, value in scope.get("headers", ()):
            if name == _HEADER_KEY:
                given = value.decode("latin-1")  # the last one, as a dict of them would keep
        rid = given if given and _ACCEPTABLE_ID.fullmatch(given) else new_request_id()
        token = request_id.set(rid)
        started = time.perf_counter()
        status = 500
        own = (_HEADER_KEY, rid.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != _HEADER_KEY
                ]
                headers.append(own)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d",
                    scope["method"],
                    scope.get("path", ""),
                    status,
                    extra={
                        "method": scope["method"],
                        "path": scope.get("path", ""),
                        "status": status,
                        "durationMs": round((time.perf_counter() - started) * 1000, 3),
                        **_flow_of(scope),
                    },
                )
            request_id.reset(token)


def _flow_of(scope: Scope) -> dict[str, str]:
    """The Flow ID and run ID a request names (path parameters, else query), if any."""
    found: dict[str, str] = {}
    params = scope.get("path_params") or {}
    if isinstance(params.get("flowId"), str):
        found["flowId"] = params["flowId"]
    query = scope.get("query_string", b"").decode("latin-1")
    if query:
        parsed = parse_qs(query)
        for name in ("flowId", "runId"):
            if name not in found and parsed.get(name):
                found[name] = parsed[name][0]
    return found


class JSONFormatter(logging.Formatter):
    """One JSON object per line, with the request ID and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as one line of JSON."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = request_id.get()
        if rid is not None:
            line["requestId"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


def configure_logging(log_format: str, level: str = "INFO") -> None:
    """Send the ``dexlite`` loggers (and uvicorn's) to stderr in the chosen format.

    ``text`` leaves logging as the host configured it; ``json`` installs one handler with
    :class:`JSONFormatter` on the root logger, replacing earlier ones (uvicorn's included).
    """
    if log_format != "json":
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
