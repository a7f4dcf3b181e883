"""The exit statuses of the client commands and the failures that end them."""

from __future__ import annotations

import json
from enum import IntEnum

import httpx

import engine

#: The HTTP-level codes the client raises as their nearest engine class, with their status.
_HTTP_EXIT_CODES = {"UNAUTHENTICATED": 5, "METHOD_NOT_ALLOWED": 1}


class ExitCode(IntEnum):
    """The exit statuses of the ``dexlite`` client commands."""

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    NOT_FOUND = 3
    CONFLICT = 4
    UNAUTHENTICATED = 5


class CommandError(Exception):
    """A failure a command reports as ``error: CODE: detail`` and ends with ``exit_code``."""

    def __init__(self, code: str, detail: str, exit_code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.exit_code = exit_code


def wire_code(error: engine.EngineError) -> str:
    """Return the code the server answered with: the class's own, unless an HTTP-level code
    (UNAUTHENTICATED, VALIDATION_ERROR, ...) was raised as its nearest engine class."""
    code = error.extra.get("code")
    return code if isinstance(code, str) else error.code


def exit_code_of(error: engine.EngineError) -> ExitCode:
    """Return the exit status an engine error stands for: its family, as the server's HTTP
    status is (400/413/422 bad input, 404 not found, 409 conflict, 401 unauthenticated)."""
    http = _HTTP_EXIT_CODES.get(wire_code(error))
    if http is not None:
        return ExitCode(http)
    if isinstance(error, engine.InvalidArgumentError):
        return ExitCode.BAD_INPUT
    if isinstance(error, engine.NotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(error, engine.ConflictError):
        return ExitCode.CONFLICT
    return ExitCode.ERROR


def failure_of(error: engine.EngineError | json.JSONDecodeError, url: str) -> CommandError:
    """Return the failure a command reports for an error of :class:`app.client.Client`.

    A server that could not be reached (UnavailableError with the client's own code, caused by
    the transport) is CONNECTION_ERROR or TIMEOUT, told apart from a 503 answer. A success
    whose body is not JSON is INVALID_RESPONSE.
    """
    base = url.rstrip("/")
    if isinstance(error, json.JSONDecodeError):
        return CommandError("INVALID_RESPONSE", f"{base} answered with a body that is not JSON")
    cause = error.__cause__
    transport = (
        isinstance(error, engine.UnavailableError)
        and error.extra.get("code") == engine.UnavailableError.code
        and isinstance(cause, httpx.TransportError)
    )
    if transport and isinstance(cause, httpx.TimeoutException):
        return CommandError("TIMEOUT", f"{base} did not answer in time ({cause})")
    if transport:
        return CommandError("CONNECTION_ERROR", f"cannot reach {base}: {cause}")
    detail = error.detail
    position = error.position if isinstance(error, engine.InvalidQueryError) else None
    if isinstance(position, int) and f"at position {position}" not in detail:
        detail += f" (at position {position} of the query)"
    return CommandError(wire_code(error), detail, exit_code_of(error))
