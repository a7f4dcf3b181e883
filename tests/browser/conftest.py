"""Fixtures for the playground tests: a real uvicorn server and Debian's headless Chromium.

Playwright's sync API is used from plain test functions: its own event loop then never meets
the one pytest-asyncio runs for async tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.browser.watch import forget, watch
from tests.server import ServerProcess
from tests.support.backends import backend_independent_directory

# Assertions poll until this bound; on a loaded 2-core machine 5 s (the default) was too short.
expect.set_options(timeout=15_000)

CHROMIUM = Path("/usr/bin/chromium")
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
DESKTOP = {"width": 1400, "height": 1000}
# The widths the screenshots are taken at: a laptop and a phone.
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the browser tests in the SQLite half only: the page speaks HTTP, and every answer
    it reads is tested on both backends by the API tests."""
    backend_independent_directory(
        items, Path(__file__).resolve().parent, "the page speaks HTTP; the API tests cover both"
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Run the app in a uvicorn subprocess on a free port; yield its base URL."""
    tmp = tmp_path_factory.mktemp("playground-server")
    # The tests need no power-loss durability, and NORMAL keeps bulk setup fast.
    with ServerProcess(tmp, env={"DEXLITE_SQLITE__SYNCHRONOUS": "NORMAL"}) as process:
        yield process.url


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


def _open_page(
    browser: Browser, server: str, viewport: dict[str, int], color_scheme: str = "light"
) -> Iterator[Page]:
    context = browser.new_context(
        base_url=server,
        viewport=viewport,  # type: ignore[arg-type]
        color_scheme=color_scheme,  # type: ignore[arg-type]
    )
    # An upper bound, not a wait: on a 2-core CI machine running four workers a Swagger UI
    # click's hash navigation took over 5 s to settle.
    context.set_default_timeout(15_000)
    page = context.new_page()
    # An uncaught exception in the page's modules, a console error, a failed request or an
    # error answer the test did not provoke fails the test even when the assertions passed.
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    watch(page)
    try:
        yield page
    finally:
        context.close()
        problems = forget(page).problems
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not problems, f"The page met problems: {problems}"


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh desktop-sized page (its own context) on the server."""
    yield from _open_page(browser, server, DESKTOP)


@pytest.fixture
def narrow_page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh page 375 CSS pixels wide, the width of a small phone."""
    yield from _open_page(browser, server, {"width": 375, "height": 812})


@pytest.fixture
def laptop_page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh page 1280 CSS pixels wide."""
    yield from _open_page(browser, server, LAPTOP)


@pytest.fixture
def phone_page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh page 390 CSS pixels wide, the width of a common phone."""
    yield from _open_page(browser, server, PHONE)


@pytest.fixture
def dark_page(browser: Browser, server: str) -> Iterator[Page]:
    """Return a fresh desktop-sized page whose browser prefers a dark colour scheme."""
    yield from _open_page(browser, server, DESKTOP, color_scheme="dark")
