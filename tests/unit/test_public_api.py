"""The public surface of ``engine`` and the layering rules."""

from __future__ import annotations

import ast
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parents[2]


def test_engine_all_is_sorted_and_complete() -> None:
    assert engine.__all__ == sorted(engine.__all__)
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_design_required_names_that_exist_so_far_are_exported() -> None:
    required = {
        "Flow",
        "Step",
        "StepList",
        "Registry",
        "rpc",
        "RPCResult",
        "Context",
        "Attribute",
        "AttributeMap",
        "AttributeIndex",
        "IndexType",
        "AttributeLock",
        "StepOptions",
        "RetryPolicy",
        "StepDecision",
        "StepMovement",
        "go_to",
        "go_to_many",
        "graceful_complete",
        "force_complete",
        "force_fail",
        "dead_end",
        "StartFlowOptions",
        "IdReusePolicy",
        "StopType",
        "RPCInvokeOptions",
        "Engine",
        "EngineConfig",
        "Timer",
        "Wait",
        "EngineError",
        "RPCLockConflictError",
        "AttributeMapNotLoadedError",
        "FlowNotActiveOrNotFoundError",
        "DefinitionError",
    }
    assert required <= set(engine.__all__)


def _imports(package: str) -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update((str(path), alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((str(path), node.module))
    return found


def test_engine_never_imports_app_patterns_or_fastapi() -> None:
    bad = {
        (path, module)
        for path, module in _imports("engine")
        if module.split(".")[0] in {"app", "patterns", "fastapi", "starlette"}
    }
    assert bad == set()


def test_app_and_patterns_use_only_public_engine_names() -> None:
    bad = {
        (path, module)
        for package in ("app", "patterns")
        for path, module in _imports(package)
        if module.startswith("engine.") and module.split(".")[1].startswith("_")
    }
    assert bad == set()
