"""Limits that keep one request from costing the server more than a request should.

Each limit is a setting (``DEXLITE_LIMITS__MAX_...``), and a request over one gets 400
INVALID_ARGUMENT whose ``field`` is the parameter at fault and whose ``limit`` names the setting,
so a client (or its operator) knows what to change (a query over its limits is an INVALID_QUERY
with a position, like any bad query). The request body as a whole is bounded by
DEXLITE_LIMITS__MAX_REQUEST_BYTES (413). The bounds the API itself defines (IDs of 256
characters, pageSize 1 to 1000, waitSeconds 0 to 60, queries of 4096 characters nesting 16 deep)
can only be lowered.

The parameters every route shares (Flow and run IDs, ``name``, ``query``, ``pageSize``,
``waitSeconds``) are checked once for all routes by :func:`check_parameters`; values inside
bodies by :func:`check_value_size` where a route reads them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import Request

import engine


@dataclass(frozen=True)
class Limits:
    """The limits in force (see the settings of the same names); ``max_request_bytes`` bounds a
    request body as a whole (BodyLimitMiddleware), the others what a request may ask for."""

    max_request_bytes: int = 8 * 1024 * 1024
    max_id_length: int = 256
    max_value_bytes: int = 1024 * 1024
    max_query_length: int = 4096
    max_query_depth: int = 16
    max_names_per_read: int = 100
    max_page_size: int = engine.MAX_PAGE_SIZE
    max_wait_seconds: float = engine.MAX_WAIT_SECONDS


def _refuse(field: str, detail: str, setting: str) -> engine.InvalidArgumentError:
    return engine.InvalidArgumentError(
        f"{detail} (the limit is the setting {setting})",
        field=field,
        extra={"limit": setting},
    )


def too_deep_at(query: str, limit: int) -> int | None:
    """Return the position of the first parenthesis nesting deeper than ``limit`` in a
    SearchFlows query (quoted text ignored), or None."""
    depth = 0
    quote = ""
    for position, char in enumerate(query):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
            if depth > limit:
                return position
        elif char == ")":
            depth = max(0, depth - 1)
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # not a number: the route's own validation answers


async def check_parameters(request: Request) -> None:
    """Refuse path and query parameters over their limits (a dependency of every route)."""
    limits: Limits = request.app.state.limits
    path = request.path_params
    # Most requests have no query string: then only the path can name an ID.
    query = request.query_params if request.scope.get("query_string") else None
    for field in ("flowId", "runId"):
        value = path[field] if field in path else query.get(field) if query else None
        if isinstance(value, str) and len(value) > limits.max_id_length:
            raise _refuse(
                field,
                f"{field} has {len(value)} characters, more than {limits.max_id_length}",
                "DEXLITE_LIMITS__MAX_ID_LENGTH",
            )
    if query is None:
        return
    names = query.getlist("name")
    if len(names) > limits.max_names_per_read:
        raise _refuse(
            "name",
            f"{len(names)} names in one read, more than {limits.max_names_per_read}",
            "DEXLITE_LIMITS__MAX_NAMES_PER_READ",
        )
    text = query.get("query")
    if text is not None:
        # A query over a limit is an INVALID_QUERY with a position, like any bad query.
        if len(text) > limits.max_query_length:
            raise engine.InvalidQueryError(
                f"the query has {len(text)} characters, more than {limits.max_query_length} "
                "(the limit is the setting DEXLITE_LIMITS__MAX_QUERY_LENGTH)",
                position=limits.max_query_length,
                field="query",
                extra={"limit": "DEXLITE_LIMITS__MAX_QUERY_LENGTH"},
            )
        if (position := too_deep_at(text, limits.max_query_depth)) is not None:
            raise engine.InvalidQueryError(
                f"the query nests parentheses more than {limits.max_query_depth} deep at "
                f"position {position} "
                "(the limit is the setting DEXLITE_LIMITS__MAX_QUERY_DEPTH)",
                position=position,
                field="query",
                extra={"limit": "DEXLITE_LIMITS__MAX_QUERY_DEPTH"},
            )
    # Beyond the API's own bounds (1000, 60 s) the routes answer as the API defines.
    size = _number(query.get("pageSize", ""))
    if size is not None and limits.max_page_size < size <= engine.MAX_PAGE_SIZE:
        raise _refuse(
            "pageSize",
            f"pageSize {size:g} is more than {limits.max_page_size}",
            "DEXLITE_LIMITS__MAX_PAGE_SIZE",
        )
    wait = _number(query.get("waitSeconds", ""))
    if wait is not None:
        check_wait(limits, wait)


def check_wait(limits: Limits, seconds: float) -> None:
    """Refuse a wait longer than the limit (one longer than the API allows is the route's to
    refuse, as the API defines)."""
    if limits.max_wait_seconds < seconds <= engine.MAX_WAIT_SECONDS:
        raise _refuse(
            "waitSeconds",
            f"waitSeconds {seconds:g} is more than {limits.max_wait_seconds:g}",
            "DEXLITE_LIMITS__MAX_WAIT_SECONDS",
        )


def check_value_size(limits: Limits, value: Any, field: str) -> None:
    """Refuse one value (an input, an Attribute value, a message) over the size limit, as
    the JSON it arrived as."""
    if value is None or isinstance(value, bool | int | float):
        return
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # A lone surrogate is counted, not refused here: the engine decides what text it stores.
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_value_bytes:
        raise _refuse(
            field,
            f"{field} is {size} bytes of JSON, more than {limits.max_value_bytes}",
            "DEXLITE_LIMITS__MAX_VALUE_BYTES",
        )


def check_values_size(limits: Limits, values: dict[str, Any], field: str) -> None:
    """Refuse any value of a ``{"name": value}`` mapping over the size limit."""
    for name, value in values.items():
        check_value_size(limits, value, f"{field}.{name}")
