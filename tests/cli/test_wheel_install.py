"""An installed wheel (what `pipx install .` or `uv tool install .` puts in place) serves the
API, the playground and the offline API pages, and has the `dexlite` command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server import ROOT, free_port
from tests.support.backends import backend_independent
from tests.support.waiting import wait_until

SOURCES = ("pyproject.toml", "README.md", "engine", "app", "patterns", "playground")


pytestmark = backend_independent("the wheel, and an installed server on a SQLite file")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the project's wheel from a copy of its sources (the build writes beside them)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(source)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [path] = tmp.glob("dexlite-*.whl")
    return path


def test_the_wheel_holds_the_playground_migrations_and_the_command(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    playground = {n for n in names if n.startswith("playground/")}
    assert {f"playground/{p.name}" for p in (ROOT / "playground").iterdir()} <= playground
    migrations = {p.name for p in (ROOT / "engine/_storage/migrations/versions").glob("*.py")}
    assert {f"engine/_storage/migrations/versions/{m}" for m in migrations} <= names
    assert "engine/_storage/search/grammar.lark" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "dexlite = app.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    assert not any(n.startswith(("tests/", "bench/", "docs/")) for n in names)


@pytest.fixture(scope="module")
def installed_server(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Serve from the wheel's files alone, in a directory without the repository."""
    tmp = tmp_path_factory.mktemp("installed")
    site = tmp / "site"
    zipfile.ZipFile(wheel).extractall(site)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
    env.update(
        PYTHONPATH=str(site),  # ahead of the repository's editable install
        DEXLITE_DATABASE_URL=f"sqlite+aiosqlite:///{tmp / 'dexlite.db'}",
        DEXLITE_BLOB_DIR=str(tmp / "blobs"),
    )
    code = "import app, sys; print(app.__file__); sys.exit(__import__('app.cli').cli.main())"
    log = (tmp / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError((tmp / "server.log").read_text())
        try:
            return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, within=60, what="the installed server's start")
        # The code that answers is the wheel's, not the repository's.
        assert (tmp / "server.log").read_text().splitlines()[0] == str(site / "app/__init__.py")
        yield url
    finally:
        process.terminate()
        process.wait(15)
        log.close()


def test_an_installed_server_serves_the_api_the_playground_and_the_api_pages(
    installed_server: str,
) -> None:
    with httpx.Client(base_url=installed_server, timeout=10) as client:
        started = client.post(
            "/api/v1/flows", json={"flowType": "CounterFlow", "flowId": "installed"}
        )
        playground = client.get("/playground/")
        script = client.get("/playground/app.js")
        docs = client.get("/docs")
        swagger = client.get("/api-docs-assets/swagger-ui-bundle.js")
        redoc = client.get("/api-docs-assets/redoc.standalone.js")
    assert started.status_code == 201, started.text
    assert playground.status_code == 200 and "<title>" in playground.text
    assert script.status_code == 200
    assert docs.status_code == 200 and "/api-docs-assets/swagger-ui-bundle.js" in docs.text
    assert "cdn." not in docs.text
    assert swagger.status_code == 200 and redoc.status_code == 200
