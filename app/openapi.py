"""The OpenAPI document: FastAPI's, with every error described the way the server sends it.

FastAPI documents request-validation failures as its own ``HTTPValidationError`` under
``application/json`` and leaves other error bodies to each route. The server answers every
error as one problem+json shape, so this module rewrites the document by rule, for every
operation (the bundled examples' and any later route's alike):

- every status of 400 and above is the ``Problem`` schema under ``application/problem+json``;
- an operation with parameters or a body documents 422; one with a body also 413; one naming
  a Flow ID (path or query) also 400, for an ID the engine refuses (``/``, control characters);
- the protected operations document 401 with ``WWW-Authenticate`` and name the bearer scheme,
  and 503 (the database cannot be reached or did not answer in time);
- a 409, 429 or 503 may carry ``Retry-After``, and every answer carries ``X-Request-ID``;
- an optional parameter is documented by its type, not as nullable;
- a schema only requests use states its fields' defaults in words, not as ``default``:
  generators (openapi-typescript) read a ``default`` as "always present", which is true of a
  response and makes the field required in a request;
- the summary is the first line of the route's docstring, so summaries say what each does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.errors import PROBLEM_JSON
from app.middleware import PROTECTED_PREFIXES
from app.problems import TITLES, catalog

PROBLEM_REF = "#/components/schemas/Problem"
_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}

VALIDATION_ERROR_ITEM: dict[str, Any] = {
    "title": "ValidationErrorItem",
    "type": "object",
    "description": "One reason a request failed its schema.",
    "required": ["location", "message", "type"],
    "properties": {
        "location": {
            "type": "string",
            "description": "Where: `body.options.timeoutSeconds`, `query.pageSize`, ...",
        },
        "message": {"type": "string", "description": "What is wrong, for a person."},
        "type": {"type": "string", "description": "The kind of failure, e.g. `int_type`."},
    },
}


def problem_schema() -> dict[str, Any]:
    """Return the JSON Schema of the one error body every operation answers with.

    Extension members are optional and never null: the server omits what does not apply.
    """
    codes = ", ".join(f"`{code}`" for code in catalog())
    return {
        "title": "Problem",
        "type": "object",
        "description": "An error (RFC 9457 problem details) with a stable `code`.",
        "required": ["type", "title", "status", "detail", "code"],
        "properties": {
            "type": {
                "type": "string",
                "format": "uri-reference",
                "description": "A page of this server describing the code, e.g. "
                "`/problems/rpc-lock-conflict`.",
            },
            "title": {"type": "string", "description": "The HTTP status's reason phrase."},
            "status": {"type": "integer", "description": "The HTTP status code."},
            "detail": {"type": "string", "description": "What went wrong, for a person."},
            "code": {"type": "string", "description": f"Stable error code: one of {codes}."},
            "field": {"type": "string", "description": "The request field at fault."},
            "flowId": {"type": "string", "description": "The Flow ID the error is about."},
            "runId": {
                "type": "string",
                "description": "FLOW_ALREADY_STARTED: the run that holds the Flow ID.",
            },
            "lockKey": {
                "type": "string",
                "description": "RPC_LOCK_CONFLICT: the Attribute lock that is held.",
            },
            "position": {
                "type": "integer",
                "description": "INVALID_QUERY: the 0-based offset in the query.",
            },
            "errorType": {
                "type": "string",
                "description": "RPC_HANDLER_ERROR: the type of the error the handler raised.",
            },
            "limit": {
                "type": "string",
                "description": "INVALID_ARGUMENT over a limit: the setting that sets it, "
                "e.g. `DEXLITE_LIMITS__MAX_VALUE_BYTES`.",
            },
            "retryable": {
                "type": "boolean",
                "description": "RESOURCE_EXHAUSTED: false when the request can never fit.",
            },
            "errors": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/ValidationErrorItem"},
                "description": "VALIDATION_ERROR: every failure, in order.",
            },
        },
        # An example's error may add members of its own.
        "additionalProperties": True,
    }


HEADERS: dict[str, Any] = {
    "X-Request-ID": {
        "description": "The request's ID: the client's X-Request-ID when it is 1 to 128 of "
        "`A-Za-z0-9._:-`, else a new one. Log lines about the request carry it.",
        "schema": {"type": "string"},
    },
    "Retry-After": {
        "description": "Seconds to wait before retrying (sent when retrying can succeed).",
        "schema": {"type": "integer", "minimum": 0},
    },
    "WWW-Authenticate": {
        "description": "The authentication scheme the server expects: `Bearer`.",
        "schema": {"type": "string"},
    },
}

SECURITY_SCHEMES: dict[str, Any] = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "Required on /api/, /patterns/ and /primitives/ when the server runs "
        "with DEXLITE_API_TOKEN; without it no token is needed.",
    }
}


def install_openapi(app: Any) -> None:
    """Make ``app.openapi`` return FastAPI's document rewritten by this module's rules."""
    original: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = rewrite(original())
        return app.openapi_schema  # type: ignore[no-any-return]

    app.openapi = openapi


def rewrite(document: dict[str, Any]) -> dict[str, Any]:
    """Apply the module's rules to a FastAPI document (in place) and return it."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for fastapi_only in ("HTTPValidationError", "ValidationError"):
        schemas.pop(fastapi_only, None)
    schemas["Problem"] = problem_schema()
    schemas["ValidationErrorItem"] = VALIDATION_ERROR_ITEM
    components["headers"] = HEADERS
    components["securitySchemes"] = SECURITY_SCHEMES
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if method in _METHODS:
                _rewrite_operation(path, operation)
    _describe_request_defaults(document)
    document["components"] = dict(sorted(components.items()))
    components_schemas = document["components"]["schemas"]
    document["components"]["schemas"] = dict(sorted(components_schemas.items()))
    return document


def _rewrite_operation(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        _rewrite_parameter(parameter)
    errors = {int(status) for status in responses if status.isdigit() and int(status) >= 400}
    if parameters or "requestBody" in operation:
        errors.add(422)
    if "requestBody" in operation:
        errors.add(413)
    if any(p.get("name") == "flowId" for p in parameters):
        errors.add(400)
    if path.startswith(PROTECTED_PREFIXES):
        errors.add(401)
        errors.add(503)  # every one of them reaches the database
        # Either no token (the default) or the bearer token, as the server is configured.
        operation["security"] = [{}, {"bearerAuth": []}]
    for status in sorted(errors):
        entry = responses.setdefault(str(status), {})
        entry.setdefault("description", TITLES.get(status, "Error"))
        entry["content"] = {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}}
        header = {
            401: "WWW-Authenticate",
            409: "Retry-After",
            429: "Retry-After",
            503: "Retry-After",
        }.get(status)
        if header:
            entry["headers"] = {header: {"$ref": f"#/components/headers/{header}"}}
    for entry in responses.values():
        entry.setdefault("headers", {})["X-Request-ID"] = {
            "$ref": "#/components/headers/X-Request-ID"
        }
        entry["headers"] = dict(sorted(entry["headers"].items()))
    operation["responses"] = dict(sorted(responses.items()))
    description = operation.get("description", "")
    if description:
        first, _, rest = description.partition("\n\n")
        operation["summary"] = " ".join(first.split()).rstrip(".")
        if rest.strip():
            operation["description"] = rest.strip()
        else:
            operation.pop("description")


def _rewrite_parameter(parameter: dict[str, Any]) -> None:
    """An optional parameter is absent, never null (a query string cannot say null): document
    its type alone. Its title (``Runid``) only repeats its name."""
    schema = parameter.get("schema", {})
    schema.pop("title", None)
    variants = schema.get("anyOf")
    if not parameter.get("required") and variants:
        kept = [v for v in variants if v != {"type": "null"}]
        if len(kept) == 1:
            schema.pop("anyOf")
            schema.update(kept[0])


def _references(node: Any, schemas: dict[str, Any], found: set[str]) -> set[str]:
    """Add the names of every component schema ``node`` refers to, transitively, to ``found``."""
    if isinstance(node, dict):
        ref = node.get("$ref", "")
        if ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            if name not in found:
                found.add(name)
                _references(schemas.get(name), schemas, found)
        for value in node.values():
            _references(value, schemas, found)
    elif isinstance(node, list):
        for value in node:
            _references(value, schemas, found)
    return found


def _describe_request_defaults(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    operations = [
        operation
        for methods in document.get("paths", {}).values()
        for method, operation in methods.items()
        if method in _METHODS
    ]
    in_requests = _references([op.get("requestBody") for op in operations], schemas, set())
    in_responses = _references([op.get("responses") for op in operations], schemas, set())
    for name in sorted(in_requests - in_responses):
        for member in schemas[name].get("properties", {}).values():
            if "default" in member:
                default = json.dumps(member.pop("default"))
                text = member.get("description", "").rstrip()
                if text and not text.endswith("."):
                    text += "."
                member["description"] = f"{text} Default: {default}.".lstrip()
