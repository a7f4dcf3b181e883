"""The committed OpenAPI document: the rules that let generated clients trust it.

Each rule is checked over every operation, the bundled examples' included, so a later route
that breaks one fails here by name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import engine
from app.cli import openapi_document
from app.problems import catalog
from tests.support.backends import backend_independent

pytestmark = backend_independent("the document is built from the app's routes alone")

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The document the app generates (the next test proves it is the committed one)."""
    return json.loads(openapi_document())  # type: ignore[no-any-return]


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every (path, method, operation) of the document."""
    return [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if method in METHODS
    ]


def test_committed_openapi_json_matches_the_app() -> None:
    committed = (ROOT / "openapi.json").read_text()
    assert committed == openapi_document(), "run `make openapi` and commit openapi.json"


def test_every_operation_has_a_stable_id_and_its_own_summary(document: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in operations(document)]
    summaries = [op.get("summary", "") for _, _, op in operations(document)]
    assert len(ids) == len(set(ids))
    assert all(summaries), summaries
    repeated = {s for s in summaries if summaries.count(s) > 1}
    assert repeated == set()
    for op in (
        "startFlow",
        "describeFlow",
        "waitForFlow",
        "stopFlow",
        "invokeRpc",
        "getAttributes",
        "setAttributes",
        "listFlowTypes",
        "getFlowHistory",
    ):
        assert op in ids


def test_tags_are_kebab_case_so_generated_modules_read_well(document: dict[str, Any]) -> None:
    tags = {tag for _, _, op in operations(document) for tag in op["tags"]}
    assert {t for t in tags if not re.fullmatch(r"[a-z]+(-[a-z]+)*", t)} == set()
    assert {"flows", "rpcs-and-attributes", "primitive-client-apis"} <= tags


def test_every_error_response_is_the_one_problem_schema(document: dict[str, Any]) -> None:
    wrong = [
        (path, method, status, response.get("content"))
        for path, method, op in operations(document)
        for status, response in op["responses"].items()
        if int(status) >= 400 and response.get("content") != PROBLEM
    ]
    assert wrong == []
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas


def test_every_status_a_request_can_get_is_documented(document: dict[str, Any]) -> None:
    """Params or a body: 422; a body: 413; a Flow ID: 400 (an ID the engine refuses); a
    protected path: 401 with WWW-Authenticate and the bearer scheme."""
    for path, method, op in operations(document):
        statuses = set(op["responses"])
        names = {p["name"] for p in op.get("parameters", [])}
        where = (path, method)
        if names or "requestBody" in op:
            assert "422" in statuses, where
        if "requestBody" in op:
            assert "413" in statuses, where
        if "flowId" in names:
            assert "400" in statuses, where
        if path.startswith(("/api/", "/patterns/", "/primitives/")):
            assert op["responses"]["401"]["headers"]["WWW-Authenticate"] == {
                "$ref": "#/components/headers/WWW-Authenticate"
            }, where
            assert op["security"] == [{}, {"bearerAuth": []}], where
        for status in ("409", "429"):
            if status in statuses:
                assert "Retry-After" in op["responses"][status]["headers"], where
        for response in op["responses"].values():
            assert "X-Request-ID" in response["headers"], where
    invoke = document["paths"]["/api/v1/flows/{flowId}/rpcs/{rpcName}"]["post"]
    assert {"500", "504"} <= set(invoke["responses"])
    assert document["paths"]["/readyz"]["get"]["responses"]["503"]["content"] == PROBLEM
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_optional_bodies_and_parameters_are_optional_not_nullable(
    document: dict[str, Any],
) -> None:
    for path, method, op in operations(document):
        body = op.get("requestBody")
        if body is not None:
            schema = body["content"]["application/json"]["schema"]
            assert "anyOf" not in schema, (path, method, schema)
        for parameter in op.get("parameters", []):
            if not parameter.get("required"):
                assert {"type": "null"} not in parameter["schema"].get("anyOf", []), (
                    path,
                    method,
                    parameter,
                )
    stop = document["paths"]["/api/v1/flows/{flowId}/stop"]["post"]["requestBody"]
    assert not stop.get("required", False)


def test_problem_schema_lists_its_members_without_null_defaults(document: dict[str, Any]) -> None:
    problem = document["components"]["schemas"]["Problem"]
    assert problem["required"] == ["type", "title", "status", "detail", "code"]
    extensions = {"field", "flowId", "runId", "lockKey", "position", "errorType", "errors"}
    assert extensions <= set(problem["properties"])
    for name, member in problem["properties"].items():
        assert "default" not in member, name
        assert "anyOf" not in member, name
    item = problem["properties"]["errors"]["items"]
    assert item == {"$ref": "#/components/schemas/ValidationErrorItem"}


def test_statuses_and_event_types_are_enums_and_shapes_have_names(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["RunStatus"]["enum"] == [s.value for s in engine.RunStatus]
    assert schemas["HistoryEventType"]["enum"] == [e.value for e in engine.HistoryEventType]
    flow_info = schemas["FlowInfoResponse"]["properties"]
    assert flow_info["status"] == {"$ref": "#/components/schemas/RunStatus"}
    assert flow_info["indexedAttributes"] == {"$ref": "#/components/schemas/IndexedAttributes"}
    event = schemas["HistoryEventResponse"]["properties"]
    assert event["eventType"] == {"$ref": "#/components/schemas/HistoryEventType"}
    # No anonymous object inside a named schema: generated clients would invent its name.
    anonymous = [
        (name, prop)
        for name, schema in schemas.items()
        for prop, member in schema.get("properties", {}).items()
        if member.get("type") == "object"
    ]
    assert anonymous == []


def test_problem_types_are_pages_of_this_server(document: dict[str, Any]) -> None:
    codes = catalog()
    assert all(problem.type_uri.startswith("/problems/") for problem in codes.values())
    assert {"VALIDATION_ERROR", "RPC_LOCK_CONFLICT", "PAGE_NOT_FOUND"} <= set(codes)
    described = document["components"]["schemas"]["Problem"]["properties"]["code"]
    assert all(f"`{code}`" in described["description"] for code in codes)


def test_the_errors_reference_lists_every_problem_code() -> None:
    reference = (ROOT / "docs" / "reference" / "errors.md").read_text()
    listed = set(re.findall(r"^\| `([A-Z_]+)` \| (\d{3}) \|", reference, flags=re.M))
    assert listed == {(code, str(p.status)) for code, p in catalog().items()}


def test_request_only_schemas_state_their_defaults_in_words(document: dict[str, Any]) -> None:
    """openapi-typescript reads ``default`` as "always present": right for a response, wrong
    for a request, where it would make an optional field required."""
    schemas = document["components"]["schemas"]
    options = schemas["StartFlowOptionsBody"]["properties"]
    assert "default" not in options["ignoreAlreadyStarted"]
    assert options["ignoreAlreadyStarted"]["description"].endswith("Default: false.")
    assert "default" not in schemas["IncrementBody"]["properties"]["by"]
    assert "required" not in schemas["IncrementBody"]
