"""Fixtures for the playground tests: a real uvicorn server and Debian's headless Chromium.

Playwright's sync API is used from plain test functions: its own event loop then never meets
the one pytest-asyncio runs for async tests.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
# Keep Chromium quiet and offline: the page must need nothing beyond the app.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_SECONDS = 30.0
DESKTOP = {"width": 1400, "height": 1000}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_healthy(base_url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    with httpx.Client(base_url=base_url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if client.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    pytest.fail(f"the server was not healthy after {STARTUP_SECONDS}s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Run the app in a uvicorn subprocess on a free port; yield its base URL."""
    tmp = tmp_path_factory.mktemp("playground-server")
    # Only this test's settings: a developer's DEXLITE_API_TOKEN must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLITE_")}
    env.update(
        DEXLITE_DATABASE_URL=f"sqlite+aiosqlite:///{tmp}/x.db",
        DEXLITE_BLOB_DIR=str(tmp / "blobs"),
        # The tests need no power-loss durability, and NORMAL keeps bulk setup fast.
        DEXLITE_SQLITE_SYNCHRONOUS="NORMAL",
    )
    port = _free_port()
    log = tmp / "server.log"
    with log.open("wb") as out:
        # sys.executable is the venv's python, so the server runs the code under test.
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                "app.main:create_app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base_url = f"http://127.0.0.1:{port}"
        _wait_until_healthy(base_url, proc, log)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def api(server: str) -> Iterator[httpx.Client]:
    """Return an HTTP client on the server, for setup the page is not under test for."""
    with httpx.Client(base_url=server, timeout=10.0) as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Launch Debian's Chromium headless, once per module."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


def _open_page(browser: Browser, server: str, viewport: dict[str, int]) -> Iterator[Page]:
    context = browser.new_context(base_url=server, viewport=viewport)  # type: ignore[arg-type]
    context.set_default_timeout(5_000)
    page = context.new_page()
    # An uncaught exception in app.js fails the test even when the assertions passed.
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh desktop-sized page (its own context) on the server."""
    yield from _open_page(browser, server, DESKTOP)


@pytest.fixture
def narrow_page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh page 375 CSS pixels wide, the width of a small phone."""
    yield from _open_page(browser, server, {"width": 375, "height": 812})
