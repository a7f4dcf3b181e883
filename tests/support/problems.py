"""Asserting problem+json error responses."""

from __future__ import annotations

from typing import Any

import httpx

PROBLEM_JSON = "application/problem+json"


def assert_problem(
    response: httpx.Response, status: int, code: str, *, field: str | None = None
) -> dict[str, Any]:
    """Assert ``response`` is a problem+json of ``status`` and ``code`` (and ``field``); return
    its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON), response.headers
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert body["status"] == status, body
    assert {"type", "title", "detail"} <= set(body), body
    if field is not None:
        assert body.get("field") == field, body
    return body
