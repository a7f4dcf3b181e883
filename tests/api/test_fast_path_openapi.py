"""The fast path answers every operation of ``openapi.json`` as FastAPI does, generated from the
document, so a new route or a new FastAPI cannot drift from it unseen.

For each operation the test builds requests from its parameters and body schema: a minimal
valid one, query parameters of the wrong type, and bodies that are malformed, of the wrong JSON
type, with an unknown field, or with a wrong-typed required field. Each goes to two apps over
two databases in the same state, one with the fast path and one without, in the same order,
each on a manual clock and settled after every request, so the Steps the bundled examples run
in the background have done the same by the next one. Refusals must match byte for byte (once
run IDs and times are masked); an accepted request must match in status, content type and the
shape of its body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.settings import Settings
from engine.testing import settle
from tests.api.test_fast_path import _answer, _settings
from tests.conftest import manual_clock_config, served_app

ROOT = Path(__file__).resolve().parents[2]
JSON = {"content-type": "application/json"}
#: Path parameter values that name things the bundled examples have.
PATH_VALUES = {
    "flowId": "generated",
    "flowType": "CounterFlow",
    "rpcName": "increment",
    "stream": "counter-lock",
    "channel": "queued-messages",
    "scheduleId": "generated-schedule",
    "messageId": "00000000-0000-7000-8000-000000000000",
}
#: Left out: an event stream never ends, and /metrics counts what each app itself served.
SKIPPED = {("get", "/api/v1/streams/{flowType}/{flowId}/{stream}/events"), ("get", "/metrics")}

Request = tuple[str, str, list[tuple[str, str]], bytes | None, dict[str, str]]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = document
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def sample(document: dict[str, Any], schema: dict[str, Any]) -> Any:
    """Return a small value ``schema`` accepts (required object members only)."""
    schema = _resolve(document, schema)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            choices = [c for c in schema[key] if _resolve(document, c).get("type") != "null"]
            return sample(document, choices[0]) if choices else None
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        value = {name: sample(document, properties[name]) for name in schema.get("required", [])}
        # A wait or a hold as short as allowed: their defaults would have the test wait them out.
        for name, member in properties.items():
            if name.lower().endswith("seconds"):
                value[name] = _shortest(_resolve(document, member))
        return value
    if kind == "array":
        return []
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return max(float(schema.get("minimum", 1)), 1.0)
    if kind == "boolean":
        return False
    if kind == "string":
        if schema.get("format") == "date-time":
            return "2026-01-01T00:00:00Z"
        return "x" * max(int(schema.get("minLength", 1)), 1)
    return None


def _shortest(schema: dict[str, Any]) -> float:
    """Return the smallest duration ``schema`` allows (a hundredth over an exclusive bound)."""
    for choice in schema.get("anyOf", [schema]):
        if "exclusiveMinimum" in choice:
            return float(choice["exclusiveMinimum"]) + 0.01
        if "minimum" in choice:
            return float(choice["minimum"])
    return 0.0


def requests_of(document: dict[str, Any]) -> Iterator[Request]:
    """Yield the generated requests of every operation, in the document's order."""
    for template, operations in document["paths"].items():
        for method, operation in operations.items():
            if (method, template) in SKIPPED:
                continue
            path = template.format(**{name: PATH_VALUES.get(name, "x") for name in PATH_VALUES})
            parameters = [p for p in operation.get("parameters", []) if p["in"] == "query"]
            query = [
                (p["name"], json.dumps(v) if not isinstance(v, str) else v)
                for p in parameters
                if p.get("required") and (v := sample(document, p["schema"])) is not None
            ]
            content = operation.get("requestBody", {}).get("content", {})
            body_schema = content.get("application/json", {}).get("schema")
            body = None if body_schema is None else sample(document, body_schema)
            encoded = None if body_schema is None else json.dumps(body).encode()
            headers = JSON if body_schema is not None else {}
            verb = method.upper()
            yield verb, path, query, encoded, headers
            for p in parameters:
                kind = _resolve(document, p["schema"]).get("type")
                if kind in ("integer", "number", "boolean"):
                    yield verb, path, [*query, (p["name"], "not-a-number")], encoded, headers
            if body_schema is None:
                continue
            for bad in (b"{", b"[]", b"null", b"\xff"):
                yield verb, path, query, bad, JSON
            if isinstance(body, dict):
                yield verb, path, query, json.dumps({**body, "bogusField": 1}).encode(), JSON
                for name, value in body.items():
                    if isinstance(value, str):
                        wrong = json.dumps({**body, name: 7}).encode()
                        yield verb, path, query, wrong, JSON


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return "list"
    return type(value).__name__


async def test_every_openapi_operation_answers_alike_with_and_without_the_fast_path(
    settings: Settings, tmp_path: Path
) -> None:
    document = json.loads((ROOT / "openapi.json").read_text())
    generated = list(requests_of(document))
    operations = {(m.lower(), t) for t, ops in document["paths"].items() for m in ops}
    fast_settings = _settings(settings, tmp_path, "fast", True)
    slow_settings = _settings(settings, tmp_path, "slow", False)
    refusals = 0
    fast_config, _ = manual_clock_config(fast_settings)
    slow_config, _ = manual_clock_config(slow_settings)
    async with (
        served_app(fast_settings, engine_config=fast_config) as fast,
        served_app(slow_settings, engine_config=slow_config) as slow,
    ):
        for method, path, query, body, headers in generated:
            answers = []
            for served in (fast, slow):
                response = await served.client.request(
                    method, path, params=query, content=body, headers=headers
                )
                answers.append(_answer(response))
                await settle(served.engine)
            (status, head, content), (other_status, other_head, other_content) = answers
            where = f"{method} {path} {query} {body!r}"
            assert (status, head) == (other_status, other_head), f"{where}: {answers}"
            if status >= 400:
                refusals += 1
                assert content == other_content, where
            else:
                assert _shape(content) == _shape(other_content), where
    assert len(operations - SKIPPED) >= 70  # the document really was read
    assert len(generated) > 3 * len(operations - SKIPPED)
    assert refusals > len(operations - SKIPPED)  # the refusal paths were exercised
