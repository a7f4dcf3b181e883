"""Each PostgreSQL function's current text is one file, and the migrations are frozen history.

``engine/_storage/postgres/functions/<name>.sql`` is the whole current text of every function
the migrations install; a migration holds a frozen copy of what it installs and never reads,
imports or rewrites another's text.
"""

from __future__ import annotations

import ast
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "engine" / "_storage" / "postgres" / "functions"
VERSIONS = ROOT / "engine" / "_storage" / "migrations" / "versions"

_DEFINITIONS = text(
    "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc AS p "
    "JOIN pg_namespace AS n ON n.oid = p.pronamespace "
    "WHERE n.nspname = current_schema() AND p.proname LIKE 'dexlite\\_%'"
)


async def _definitions(engine: AsyncEngine) -> dict[str, str]:
    async with engine.connect() as conn:
        return {name: body for name, body in (await conn.execute(_DEFINITIONS)).all()}


async def test_every_installed_function_is_exactly_the_text_of_its_file(
    pg_engine: AsyncEngine,
) -> None:
    installed = await _definitions(pg_engine)
    files = {path.stem: path.read_text() for path in FUNCTIONS.glob("*.sql")}
    assert sorted(installed) == sorted(files)
    # Installing every file again changes nothing: each file is what the migrations left.
    async with pg_engine.begin() as conn:
        for body in files.values():
            await conn.exec_driver_sql(body)
    assert await _definitions(pg_engine) == installed


async def test_a_function_file_that_differs_from_the_database_is_seen(
    pg_engine: AsyncEngine,
) -> None:
    """The comparison above notices one changed line of a body (it is not blind to bodies)."""
    installed = await _definitions(pg_engine)
    body = (FUNCTIONS / "dexlite_end_step.sql").read_text()
    changed = body.replace("BEGIN\n", "BEGIN\n    -- a changed line\n", 1)
    assert changed != body
    async with pg_engine.begin() as conn:
        await conn.exec_driver_sql(changed)
    assert await _definitions(pg_engine) != installed


def test_no_migration_imports_or_reads_another() -> None:
    allowed = {"__future__", "alembic", "sqlalchemy", "typing"}
    for path in sorted(VERSIONS.glob("0*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in (
                "import_module",
                "read_text",
                "open",
            ):
                roots = {"<dynamic>"}
            else:
                continue
            assert roots <= allowed, f"{path.name} imports or reads {roots - allowed}"
