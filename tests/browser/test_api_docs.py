"""/docs and /redoc work without the internet: every file they load comes from the server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect


@pytest.fixture
def offline_page(page: Page, server: str) -> Iterator[tuple[Page, list[str]]]:
    """Return the page with every request elsewhere than the server refused and recorded."""
    elsewhere: list[str] = []

    def only_the_server(route: Route) -> None:
        url = route.request.url
        if url.startswith(server) or url.startswith("data:") or url.startswith("blob:"):
            route.continue_()
        else:
            elsewhere.append(url)
            route.abort()

    page.route("**/*", only_the_server)
    yield page, elsewhere


def test_swagger_ui_at_docs_renders_every_operation_offline(
    offline_page: tuple[Page, list[str]],
) -> None:
    page, elsewhere = offline_page
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("dexlite")
    start = page.locator("#operations-flows-startFlow")
    expect(start).to_be_visible()
    start.locator(".opblock-summary").click()  # its request body and answers unfold
    expect(start.locator(".opblock-body")).to_contain_text("flowType")
    assert elsewhere == []


def test_redoc_renders_the_reference_offline(browser: Browser, server: str) -> None:
    # Its own page, not the fixture that fails on any failed request: ReDoc's sidebar badge
    # asks cdn.redoc.ly for its logo whatever the options, and hides the image when that fails.
    context = browser.new_context(base_url=server)
    try:
        page = context.new_page()
        elsewhere: list[str] = []

        def only_the_server(route: Route) -> None:
            if route.request.url.startswith(server):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_the_server)
        page.goto("/redoc")
        expect(page.locator("h1").first).to_contain_text("dexlite")
        expect(page.get_by_text("Return the run's pending Step executions").first).to_be_attached()
        expect(page.locator("img[alt='redocly logo']")).to_have_count(0)  # hidden, not broken
    finally:
        context.close()
    assert elsewhere == ["https://cdn.redoc.ly/redoc/logo-mini.svg"]
