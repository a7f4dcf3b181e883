"""The public surface of ``engine`` and the layering rules."""

from __future__ import annotations

import ast
import pathlib
import types
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 500


def test_engine_all_is_sorted_and_complete() -> None:
    assert engine.__all__ == sorted(engine.__all__)
    for name in engine.__all__:
        assert hasattr(engine, name), name


def test_engine_all_lists_exactly_the_public_names() -> None:
    # dir(): Engine is imported on first use, so it is not in vars() until then.
    public = sorted(
        name
        for name in dir(engine)
        if not name.startswith("_") and not isinstance(getattr(engine, name), types.ModuleType)
    )
    assert engine.__all__ == public


def _top_level_definitions(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_internal_records_live_in_private_modules() -> None:
    internal = {"FlowSpec", "StepSpec", "RPCDefinition", "RPC_MARKER", "DecisionKind", "NO_RETRY"}
    assert internal.isdisjoint(engine.__all__)
    public_modules = [p for p in (ROOT / "engine").glob("*.py") if not p.name.startswith("_")]
    defined = {p.name: internal & _top_level_definitions(p) for p in public_modules}
    assert {name: found for name, found in defined.items() if found} == {}


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


def _private_engine_imports(package: str) -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from engine import _codec`` reaches a private module too.
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "engine" and any(p.startswith("_") for p in parts[1:2]):
                    found.add((str(path), name))
    return found


def test_app_and_patterns_use_only_public_engine_names() -> None:
    bad = _private_engine_imports("app") | _private_engine_imports("patterns")
    assert bad == set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _engine_import_graph() -> dict[str, set[str]]:
    """Every import between modules of engine/, TYPE_CHECKING and function-level ones too."""
    paths = {_module_name(p): p for p in (ROOT / "engine").rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in paths
                    else node.module
                    for alias in node.names
                ]
            for target in targets:
                found = resolve(target)
                if found is not None and found != name:
                    graph[name].add(found)
    return graph


def test_the_engine_import_graph_has_no_cycle() -> None:
    graph = _engine_import_graph()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(node) :] + [node]))
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def test_storage_imports_no_public_declaration_module() -> None:
    """Storage knows rows, records and the shared enums (``engine._enums``), never the Flow,
    Attribute or option classes: of the public modules it may import the errors only."""
    graph = _engine_import_graph()
    public = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("engine._storage")
        for target in targets
        if not target.split(".")[1].startswith("_") and target != "engine.errors"
    }
    assert public == set()


#: The per-backend packages, in pairs: a module name both of a pair have is one role, played
#: by each backend.
BACKEND_PACKAGES = (
    ["engine/_runtime/postgres", "engine/_runtime/sqlite"],
    ["engine/_storage/postgres", "engine/_storage/sqlite"],
)


def test_every_engine_module_name_is_unique() -> None:
    """A module's name says its role on its own: no two modules of engine/ share one, except
    a role each backend package plays its own way (``sqlite/database.py``,
    ``postgres/database.py``)."""
    seen: dict[str, list[str]] = {}
    for path in (ROOT / "engine").rglob("*.py"):
        if path.name != "__init__.py" and "migrations" not in path.parts:
            seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert {
        name: paths
        for name, paths in shared.items()
        if sorted(str(pathlib.PurePath(p).parent) for p in paths) not in BACKEND_PACKAGES
    } == {}


def test_no_engine_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / "engine").rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_public_names_say_engine_is_their_module() -> None:
    defined_here = [
        getattr(engine, name)
        for name in engine.__all__
        if getattr(getattr(engine, name), "__name__", None) == name
    ]
    assert defined_here, "no public class or function found"
    assert {value.__module__ for value in defined_here} == {"engine"}
    assert repr(engine.Engine) == "<class 'engine.Engine'>"
    assert f"{engine.RunStatus.__module__}.{engine.RunStatus.__qualname__}" == "engine.RunStatus"
