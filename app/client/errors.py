"""Problem answers back into the engine's own errors.

A Problem names its engine error by ``code``; the client raises that class (found by walking
``engine.EngineError``'s subclasses, so a leaf an application adds is found too) with the
Problem's fields. Codes only the HTTP layer answers with map to the nearest engine class.
"""

from __future__ import annotations

from typing import Any

import httpx

import engine

#: Problem members the error's own fields carry; the rest go to ``EngineError.extra``.
_CONSUMED = frozenset(
    {
        "type",
        "title",
        "detail",
        "field",
        "flowId",
        "runId",
        "lockKey",
        "position",
        "errorType",
        "retryable",
    }
)

#: Codes the HTTP layer answers with itself: the engine class nearest to each.
_HTTP_CODES: dict[str, type[engine.EngineError]] = {
    "VALIDATION_ERROR": engine.InvalidArgumentError,
    "PAYLOAD_TOO_LARGE": engine.InvalidArgumentError,
    "METHOD_NOT_ALLOWED": engine.InvalidArgumentError,
    "UNAUTHENTICATED": engine.InvalidArgumentError,
    "NOT_FOUND": engine.NotFoundError,
    "INTERNAL": engine.EngineError,
}

#: Without a known code, the status says which family the error belongs to.
_BY_STATUS: dict[int, type[engine.EngineError]] = {
    400: engine.InvalidArgumentError,
    404: engine.NotFoundError,
    409: engine.ConflictError,
    422: engine.InvalidArgumentError,
    429: engine.ResourceExhaustedError,
    502: engine.UnavailableError,
    503: engine.UnavailableError,
    504: engine.UnavailableError,
}

_LOCK_HOLDER = " is locked by "


def error_class(code: str) -> type[engine.EngineError] | None:
    """Return the engine error class whose ``code`` is ``code`` (parents before children, so a
    code several classes share, RPC_HANDLER_ERROR, names the first: RPCHandlerError)."""
    pending: list[type[engine.EngineError]] = [engine.EngineError]
    seen: set[type[engine.EngineError]] = set()
    while pending:
        cls = pending.pop(0)
        if cls in seen:
            continue
        seen.add(cls)
        # By code, ProgrammingError and its leaves are RPCHandlerError; see _programming_error.
        if (
            cls.code == code
            and cls is not engine.EngineError
            and cls is not engine.ProgrammingError
        ):
            return cls
        pending.extend(cls.__subclasses__())
    return None


def error_from_response(response: httpx.Response, operation: str) -> engine.EngineError:
    """Return the engine error an error answer stands for (a Problem, or any other body)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        # Not a Problem: a proxy's answer, say. Its status is all there is to go by.
        cls = _BY_STATUS.get(response.status_code, engine.EngineError)
        text = response.text[:200].strip() or response.reason_phrase
        return _build(
            cls,
            {"detail": f"HTTP {response.status_code}: {text}", "status": response.status_code},
            operation,
        )
    return error_from_problem(body, operation, status=response.status_code)


def error_from_problem(
    problem: dict[str, Any], operation: str, *, status: int | None = None
) -> engine.EngineError:
    """Return the engine error of a Problem body, its fields set from the Problem's."""
    code = str(problem.get("code"))
    cls = _programming_error(problem) or error_class(code) or _HTTP_CODES.get(code)
    if cls is None:
        cls = _BY_STATUS.get(status or int(problem.get("status") or 0), engine.EngineError)
    return _build(cls, problem, operation)


def _programming_error(problem: dict[str, Any]) -> type[engine.EngineError] | None:
    """Return the engine's ProgrammingError leaf an RPC_HANDLER_ERROR names by ``errorType``.

    In process a handler that reads what its invocation did not load raises the engine's own
    error (``AttributeMapNotLoadedError``, ...) to the caller; the server answers it as
    RPC_HANDLER_ERROR naming the class, and the client raises that class again. Any other
    ``errorType`` is the application's own exception: RPCHandlerError, as in process.
    """
    if problem.get("code") != engine.RPCHandlerError.code:
        return None
    named = getattr(engine, str(problem.get("errorType") or ""), None)
    if isinstance(named, type) and issubclass(named, engine.ProgrammingError):
        return named
    return None


def _build(
    cls: type[engine.EngineError], problem: dict[str, Any], operation: str
) -> engine.EngineError:
    detail = str(problem.get("detail") or problem.get("title") or "error")
    field = problem.get("field")
    if field is None and problem.get("code") == "VALIDATION_ERROR":
        errors = problem.get("errors") or [{}]
        field = errors[0].get("location") or None
    if field is None and problem.get("code") == "UNAUTHENTICATED":
        field = "token"
    common: dict[str, Any] = {
        "flow_id": problem.get("flowId"),
        "operation": operation,
        "field": field,
        # What the error's fields do not carry (the wire code and status, a validation
        # error's ``errors`` list, fields an application's error adds) stays readable.
        "extra": {k: v for k, v in problem.items() if k not in _CONSUMED},
    }
    # The wire code stays readable only where the class does not say it (an HTTP-level code
    # raised as its nearest engine class); the status is the class's.
    common["extra"].pop("status", None)
    if common["extra"].get("code") == cls.code:
        common["extra"].pop("code")
    error = _construct(cls, detail, problem, common)
    retryable = problem.get("retryable")
    if isinstance(retryable, bool):
        error.retryable = retryable
    return error


def _construct(
    cls: type[engine.EngineError], detail: str, problem: dict[str, Any], common: dict[str, Any]
) -> engine.EngineError:
    """Call ``cls`` as its ``__init__`` wants (the leaves with fields of their own differ)."""
    if issubclass(cls, engine.RPCLockConflictError):
        key = str(problem.get("lockKey") or "")
        _, sep, holder = detail.partition(_LOCK_HOLDER)
        lock_error = cls(key, holder if sep else "another holder", **common)
        if lock_error.detail != detail:  # a wording of another server version: keep it
            lock_error.detail = detail
            lock_error.args = (detail,)
        return lock_error
    if issubclass(cls, engine.FlowAlreadyStartedError):
        return cls(detail, run_id=problem.get("runId"), **common)
    if issubclass(cls, engine.InvalidQueryError):
        return cls(detail, position=problem.get("position"), **common)
    if issubclass(cls, engine.RPCHandlerError):
        return cls(detail, error_type=str(problem.get("errorType") or ""), **common)
    try:
        return cls(detail, **common)
    except TypeError:
        # An application's leaf with an __init__ of its own: its nearest family instead.
        for base in cls.__mro__[1:]:
            if isinstance(base, type) and issubclass(base, engine.EngineError):
                return _construct(base, detail, problem, common)
        raise


def unavailable(exc: httpx.TransportError, url: str, operation: str) -> engine.UnavailableError:
    """Return the UnavailableError of a call whose connection failed or timed out."""
    if isinstance(exc, httpx.TimeoutException):
        what = f"did not answer in time ({type(exc).__name__})"
    else:
        what = f"cannot be reached ({type(exc).__name__}: {exc})"
    return engine.UnavailableError(
        f"the dexlite server at {url} {what}",
        operation=operation,
        extra={"code": engine.UnavailableError.code},
    )
