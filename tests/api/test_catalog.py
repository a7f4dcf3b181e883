"""The playground's catalog against the app: every route it lists is one the app answers, with
the parameters the operation takes, and every example route the app serves is listed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Match

from app.main import create_app
from patterns import bundled_routers
from tests.support.backends import backend_independent

pytestmark = backend_independent("the catalog and the routes are files and declarations")

CATALOG = Path(__file__).resolve().parents[2] / "playground" / "catalog.json"
EXAMPLE_PREFIXES = ("/patterns/", "/primitives/")
METHODS = {"get", "put", "post", "delete", "patch"}
_PLACEHOLDER = re.compile(r"\{[^}/]+\}")


@pytest.fixture(scope="module")
def app() -> FastAPI:
    """The app with the bundled examples (routing needs no lifespan)."""
    return create_app()


@pytest.fixture(scope="module")
def document(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def catalog_routes() -> list[dict[str, Any]]:
    catalog = json.loads(CATALOG.read_text())
    return [route for example in catalog["examples"] for route in example["routes"]]


def route_id(route: dict[str, Any]) -> str:
    return f"{route['method']} {route['path']}"


def sample_path(path: str) -> str:
    """``path`` with each ``{name}`` placeholder filled, as the playground fills it."""
    return _PLACEHOLDER.sub("sample", path)


def answers(app: FastAPI, method: str, path: str) -> bool:
    """Whether a route of the app (included routers too) fully matches ``method path``."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
    return any(route.matches(scope)[0] == Match.FULL for route in app.router.routes)


def template_pattern(template: str) -> re.Pattern[str]:
    """The paths a documented path template answers: each placeholder one segment."""
    return re.compile("[^/]+".join(re.escape(part) for part in _PLACEHOLDER.split(template)))


def operation_for(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The documented operation a call to ``method path`` reaches; literal segments win."""
    candidates = [
        template
        for template, methods in document["paths"].items()
        if method.lower() in methods and template_pattern(template).fullmatch(path)
    ]
    assert candidates, f"no documented operation answers {method} {path}"
    best = min(candidates, key=lambda template: len(_PLACEHOLDER.findall(template)))
    operation: dict[str, Any] = document["paths"][best][method.lower()]
    return operation


def body_schema(document: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any]:
    body = operation.get("requestBody")
    if body is None:
        return {}
    schema: dict[str, Any] = body["content"]["application/json"]["schema"]
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


@pytest.mark.parametrize("route", catalog_routes(), ids=route_id)
def test_every_catalog_route_is_answered_by_the_app_with_its_method(
    app: FastAPI, route: dict[str, Any]
) -> None:
    assert answers(app, route["method"], sample_path(route["path"])), route_id(route)


def test_every_example_route_of_the_app_is_in_the_catalog(document: dict[str, Any]) -> None:
    served = {
        (method.upper(), path)
        for path, methods in document["paths"].items()
        if path.startswith(EXAMPLE_PREFIXES)
        for method in methods
        if method in METHODS
    }
    # Routes left out of the document count too: the playground is for people, not clients.
    served |= {
        (method, route.path)
        for router in bundled_routers()
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }
    listed = {(route["method"], route["path"]) for route in catalog_routes()}
    assert served, "the app serves no example route"
    assert served - listed == set()


@pytest.mark.parametrize("route", catalog_routes(), ids=route_id)
def test_catalog_params_are_the_operations_own(
    document: dict[str, Any], route: dict[str, Any]
) -> None:
    operation = operation_for(document, route["method"], sample_path(route["path"]))
    params = {(p["in"], p["name"]): p for p in route.get("params", [])}
    documented = {(p["in"], p["name"]): p for p in operation.get("parameters", [])}
    schema = body_schema(document, operation)
    where = route_id(route)
    # The playground fills each placeholder from the path param of its name (a catalog path
    # may also fix a segment, such as the Channel of a delete).
    placeholders = {name[1:-1] for name in _PLACEHOLDER.findall(route["path"])}
    assert {name for kind, name in params if kind == "path"} == placeholders, where
    # Every other param is one the operation takes, in the query or the body.
    assert {k for k in params if k[0] == "query"} <= set(documented), where
    body = {name for kind, name in params if kind == "body"}
    assert body <= set(schema.get("properties", {})), where
    # And nothing the operation requires is missing, so the playground's call is valid.
    required = {k for k, p in documented.items() if p.get("required") and k[0] == "query"}
    assert required <= set(params), where
    assert set(schema.get("required", [])) <= body, where
    # The Flow ID the playground fills in is the route's own default.
    flow_id = documented.get(("query", "flowId"))
    if flow_id is not None and ("query", "flowId") in params:
        assert params[("query", "flowId")]["default"] == flow_id["schema"]["default"], where
