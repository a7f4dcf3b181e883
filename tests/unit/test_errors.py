"""The error tree: each error's base decides its HTTP status, its own class its problem code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import engine
from app.errors import engine_error_response, status_and_code

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = [
    (engine.InvalidArgumentError("x"), 400, "INVALID_ARGUMENT"),
    (engine.InvalidQueryError("x"), 400, "INVALID_QUERY"),
    (engine.InvalidPageTokenError("x"), 400, "INVALID_PAGE_TOKEN"),
    (engine.FlowTypeNotFoundError("x"), 404, "FLOW_TYPE_NOT_FOUND"),
    (engine.FlowNotFoundError("x"), 404, "FLOW_NOT_FOUND"),
    (engine.FlowNotActiveOrNotFoundError("x"), 404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND"),
    (engine.RPCNotFoundError("x"), 404, "RPC_NOT_FOUND"),
    (engine.StreamNotFoundError("x"), 404, "STREAM_NOT_FOUND"),
    (engine.ChannelMessageNotFoundError("x"), 404, "CHANNEL_MESSAGE_NOT_FOUND"),
    (engine.FlowAlreadyStartedError("x"), 409, "FLOW_ALREADY_STARTED"),
    (engine.RPCLockConflictError("k", "a Step"), 409, "RPC_LOCK_CONFLICT"),
    (engine.FailedPreconditionError("x"), 409, "FAILED_PRECONDITION"),
    (engine.ResourceExhaustedError("x"), 429, "RESOURCE_EXHAUSTED"),
    (engine.RPCHandlerError("x", error_type="ValueError"), 500, "RPC_HANDLER_ERROR"),
    (engine.RPCTimeoutError("x"), 504, "RPC_TIMEOUT"),
    (engine.DefinitionError("x"), 500, "RPC_HANDLER_ERROR"),
    (engine.AttributeMapNotLoadedError("x"), 500, "RPC_HANDLER_ERROR"),
    (engine.ChannelMessagesNotLoadedError("x"), 500, "RPC_HANDLER_ERROR"),
    (engine.InvalidStepResultError("x"), 500, "RPC_HANDLER_ERROR"),
]


@pytest.mark.parametrize(("error", "status", "code"), EXPECTED, ids=lambda v: type(v).__name__)
def test_each_error_maps_to_the_status_of_its_base_and_its_own_code(
    error: engine.EngineError, status: int, code: str
) -> None:
    assert error.code == code
    assert status_and_code(error) == (status, code)


def test_intermediate_bases_group_the_leaves() -> None:
    assert issubclass(engine.FlowNotActiveOrNotFoundError, engine.NotFoundError)
    assert issubclass(engine.RPCLockConflictError, engine.ConflictError)
    assert issubclass(engine.DefinitionError, engine.ProgrammingError)
    assert issubclass(engine.InvalidQueryError, engine.InvalidArgumentError)


def test_only_lock_conflicts_and_capacity_refusals_are_retryable() -> None:
    retryable = {type(e).__name__ for e, _, _ in EXPECTED if e.retryable}
    assert retryable == {"RPCLockConflictError", "ResourceExhaustedError"}
    assert engine.ResourceExhaustedError("never fits", retryable=False).retryable is False


def test_retryable_errors_carry_retry_after_and_others_do_not() -> None:
    conflict = engine_error_response(engine.RPCLockConflictError("status", "a Step"))
    assert conflict.headers["Retry-After"] == "1"
    never = engine_error_response(engine.ResourceExhaustedError("too big", retryable=False))
    assert "Retry-After" not in never.headers
    assert "Retry-After" not in engine_error_response(engine.FlowNotFoundError("x")).headers


def test_an_application_error_needs_no_entry_in_the_http_layer() -> None:
    class ReportMissingError(engine.NotFoundError):
        code = "REPORT_MISSING"

    assert status_and_code(ReportMissingError("no report")) == (404, "REPORT_MISSING")


def test_the_http_error_module_imports_no_example() -> None:
    tree = ast.parse((ROOT / "app" / "errors.py").read_text())
    modules = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not {m for m in modules if m.split(".")[0] == "patterns"}
