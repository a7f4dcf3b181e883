"""Every problem code the API answers with, and the page each one's ``type`` URI serves.

A problem's ``type`` is a path of this server, ``/problems/<code in kebab case>``; a browser (or
a person reading a log) that follows it gets a short page saying what the code means and what
to do about it. The catalog is built from the engine's error classes, so a code an example
adds (a NotFoundError leaf with its own code) has a page as soon as its module is imported.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from inspect import cleandoc

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse

import engine

PROBLEMS_PATH = "/problems"

# The status of an error is its base's; its code is the error's own, so an example may add a
# leaf (a NotFoundError with its own code) that this module never names.
STATUS_BY_BASE: list[tuple[type[engine.EngineError], int]] = [
    (engine.InvalidArgumentError, 400),
    (engine.NotFoundError, 404),
    (engine.ConflictError, 409),
    (engine.ResourceExhaustedError, 429),
    (engine.RPCTimeoutError, 504),
    (engine.UnavailableError, 503),
    (engine.RPCHandlerError, 500),
    # Programming errors raised inside a handler reach the caller as a handler error.
    (engine.ProgrammingError, 500),
]

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class ProblemCode:
    """One problem code: the HTTP status it comes with and what it means."""

    code: str
    status: int
    description: str

    @property
    def type_uri(self) -> str:
        """Return the path of the page describing this code."""
        return type_uri(self.code)


# Codes the HTTP layer answers with itself (no engine error behind them).
HTTP_CODES = (
    ProblemCode(
        "VALIDATION_ERROR",
        422,
        "The request's body or parameters do not match the operation's schema: a missing or "
        "unknown field, a value of the wrong type or out of range, or a body that is not JSON "
        "(malformed, or not UTF-8). `errors` lists every failure with its `location`.",
    ),
    ProblemCode(
        "UNAUTHENTICATED",
        401,
        "The server requires `Authorization: Bearer <token>` (DEXLITE_API_TOKEN is set) and the "
        "request had none or a wrong one.",
    ),
    ProblemCode("NOT_FOUND", 404, "No route answers this path."),
    ProblemCode(
        "METHOD_NOT_ALLOWED",
        405,
        "The path exists but not with this method; `Allow` names the methods it answers.",
    ),
    ProblemCode(
        "PAYLOAD_TOO_LARGE",
        413,
        "The request body is larger than DEXLITE_LIMITS__MAX_REQUEST_BYTES allows.",
    ),
    ProblemCode("INTERNAL", 500, "An unexpected error: a bug in dexlite. Please report it."),
)


def type_uri(code: str) -> str:
    """Return the ``type`` URI of a problem code: the path of its page on this server."""
    return f"{PROBLEMS_PATH}/{code.lower().replace('_', '-')}"


def base_status(error_class: type[engine.EngineError]) -> int | None:
    """Return the HTTP status of the first base in STATUS_BY_BASE the class derives from."""
    for base, status in STATUS_BY_BASE:
        if issubclass(error_class, base):
            return status
    return None


def status_of(error_class: type[engine.EngineError]) -> int:
    """Return the HTTP status an engine error class answers with (500 outside every base)."""
    return base_status(error_class) or 500


def _engine_error_classes() -> list[type[engine.EngineError]]:
    """Return EngineError and every subclass imported so far, parents before children."""
    found: list[type[engine.EngineError]] = []
    pending: list[type[engine.EngineError]] = [engine.EngineError]
    while pending:
        cls = pending.pop(0)
        if cls not in found:
            found.append(cls)
            pending.extend(cls.__subclasses__())
    return found


def catalog() -> dict[str, ProblemCode]:
    """Return every problem code by code, in a stable order (engine codes, then HTTP ones).

    An engine code several classes share (the programming errors answer as a handler error) is
    described by the first class that declares it.
    """
    codes: dict[str, ProblemCode] = {}
    for cls in _engine_error_classes():
        if cls is engine.EngineError or cls.code in codes:
            continue
        description = " ".join(cleandoc(cls.__doc__ or "").split()).replace("``", "`")
        codes[cls.code] = ProblemCode(cls.code, status_of(cls), description)
    for http_code in HTTP_CODES:
        codes.setdefault(http_code.code, http_code)
    return codes


router = APIRouter(prefix=PROBLEMS_PATH, include_in_schema=False)

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · dexlite</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem}}
code{{font-size:.95em}}</style></head>
<body>{body}</body></html>
"""


def _code_page(problem: ProblemCode) -> str:
    body = (
        f"<h1><code>{html.escape(problem.code)}</code></h1>"
        f"<p>HTTP {problem.status} {html.escape(TITLES.get(problem.status, 'Error'))}</p>"
        f"<p>{html.escape(problem.description)}</p>"
        f'<p><a href="{PROBLEMS_PATH}/">Every problem code</a></p>'
    )
    return _PAGE.format(title=html.escape(problem.code), body=body)


@router.get("/", response_class=HTMLResponse)
async def list_problem_codes() -> str:
    """Serve the list of every problem code, each linked to its page."""
    items = "".join(
        f'<li><a href="{p.type_uri}"><code>{html.escape(p.code)}</code></a> '
        f"({p.status}): {html.escape(p.description)}</li>"
        for p in catalog().values()
    )
    return _PAGE.format(title="Problem codes", body=f"<h1>Problem codes</h1><ul>{items}</ul>")


@router.get("/{slug}", response_class=HTMLResponse)
async def describe_problem_code(slug: str) -> str:
    """Serve the page of one problem code (the target of its problems' ``type``)."""
    for problem in catalog().values():
        if problem.type_uri == f"{PROBLEMS_PATH}/{slug}":
            return _code_page(problem)
    raise HTTPException(404, f"no problem code is called {slug!r}")
