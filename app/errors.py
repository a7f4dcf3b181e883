"""Every error the API returns, as application/problem+json. HTTP status codes live here only."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic.alias_generators import to_camel
from starlette.exceptions import HTTPException as StarletteHTTPException

import engine
from app.fastapi_internals import UNPARSEABLE_BODY, allowed_methods
from app.problems import TITLES, base_status, type_uri

log = logging.getLogger("dexlite.api")

PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = 1


def status_and_code(error: engine.EngineError) -> tuple[int, str]:
    """Return the HTTP status and problem code for an engine error."""
    status = base_status(type(error))
    return (status, error.code) if status is not None else (500, "INTERNAL")


def problem(
    status: int, code: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Build an application/problem+json response."""
    body = {
        "type": type_uri(code),
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code,
        **{k: v for k, v in extra.items() if v is not None},
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def engine_error_response(error: engine.EngineError) -> JSONResponse:
    """Turn an engine error into its problem response."""
    status, code = status_and_code(error)
    headers = None
    extra: dict[str, Any] = {"field": error.field, "flowId": error.flow_id}
    if error.retryable:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if isinstance(error, engine.ResourceExhaustedError):
        extra["retryable"] = error.retryable  # false: the message can never fit
    if isinstance(error, engine.RPCLockConflictError):
        extra["lockKey"] = error.key
    if isinstance(error, engine.InvalidQueryError):
        extra["position"] = error.position
    if isinstance(error, engine.RPCHandlerError):
        extra["errorType"] = error.error_type
    elif status == 500:
        extra["errorType"] = type(error).__name__
    if isinstance(error, engine.FlowAlreadyStartedError):
        extra["runId"] = error.run_id
    # An error's extra fields add to the Problem; they never replace its standard members.
    extra.update({k: v for k, v in error.extra.items() if k not in _STANDARD_MEMBERS})
    return problem(status, code, error.detail, headers=headers, **extra)


#: The members every Problem has, set from the error's class and detail.
_STANDARD_MEMBERS = frozenset({"type", "title", "status", "detail", "code"})


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem+json."""

    @app.exception_handler(engine.EngineError)
    async def _engine(_request: Request, exc: engine.EngineError) -> JSONResponse:
        return engine_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {
                "location": ".".join(str(p) for p in err.get("loc", ())),
                "message": _explained(err, request),
                "type": err.get("type", ""),
            }
            for err in exc.errors()
        ]
        # A snake_case field leaves its camelCase one missing too: the detail names the cause.
        renamed = [e for e in errors if e["message"].endswith(_CAMEL_CASE_HINT_END)]
        first = (renamed or errors or [{"location": "", "message": "invalid request"}])[0]
        return problem(
            422, "VALIDATION_ERROR", f"{first['location']}: {first['message']}", errors=errors
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {
            400: "INVALID_ARGUMENT",  # e.g. a body too deeply nested to parse
            401: "UNAUTHENTICATED",
            404: "NOT_FOUND",
            405: "METHOD_NOT_ALLOWED",
            413: "PAYLOAD_TOO_LARGE",
            503: "UNAVAILABLE",
        }.get(exc.status_code, "HTTP_ERROR")
        if exc.status_code == 400 and exc.detail == UNPARSEABLE_BODY:
            # FastAPI answers a body json cannot even decode (not UTF-8, nested too deeply)
            # with a bare 400, while a malformed one is 422: one rule for both.
            return _invalid_json()
        headers = dict(exc.headers) if exc.headers else None
        if exc.status_code == 405:
            # Each method of a path is its own route, and the router names only the first
            # route's methods: name every method the path answers.
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return problem(exc.status_code, code, str(exc.detail), headers=headers)

    @app.exception_handler(UnicodeEncodeError)
    async def _unicode(_request: Request, exc: UnicodeEncodeError) -> JSONResponse:
        # JSON can carry lone surrogates ("\ud800") that no database can store.
        return problem(400, "INVALID_ARGUMENT", "text must be valid Unicode (no lone surrogates)")

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return problem(500, "INTERNAL", f"unexpected {type(exc).__name__}; this is a bug")


def _explained(error: Mapping[str, Any], request: Request) -> str:
    """Return a validation error's message, with what to write instead where pydantic's own
    words leave a newcomer guessing: a body that is not JSON for want of a Content-Type, and
    a snake_case field where the API speaks camelCase."""
    message = str(error.get("msg", ""))
    kind, location = error.get("type"), tuple(error.get("loc", ()))
    if kind in _NOT_AN_OBJECT and location == ("body",):
        content_type = request.headers.get("content-type")
        if content_type is None or not content_type.lower().startswith("application/json"):
            sent = f"is {content_type!r}" if content_type else "is missing"
            return (
                "the body must be a JSON object sent with 'Content-Type: application/json' "
                f"(this request's Content-Type {sent})"
            )
    if kind == "extra_forbidden" and location and isinstance(location[-1], str):
        camel = to_camel(location[-1])
        if camel != location[-1]:
            return f"{message}: field names are camelCase, write {camel!r}{_CAMEL_CASE_HINT_END}"
    return message


_CAMEL_CASE_HINT_END = " instead"

#: pydantic's error types for a body that is not an object (a string, when it was not JSON).
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "dict_type", "model_type"})

_UNPARSEABLE_MESSAGE = "the body cannot be read as JSON (it is not UTF-8, or nests too deeply)"


def _invalid_json() -> JSONResponse:
    error = {
        "location": "body",
        "message": _UNPARSEABLE_MESSAGE,
        "type": "json_invalid",
    }
    return problem(422, "VALIDATION_ERROR", f"body: {_UNPARSEABLE_MESSAGE}", errors=[error])


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """Return OpenAPI entries documenting these problem responses."""
    return {
        status: {
            "description": TITLES[status],
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
