"""A failed run on the Flow page, in Chromium: its traceback under the error in the summary,
each failed attempt's traceback folded under its event, and its retries on the timeline."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.servers import FAILING, serve_registry


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Serve the failing registry (the playground's explorer works for any registry)."""
    yield from serve_registry(tmp_path_factory, FAILING)


def test_a_failed_run_shows_its_traceback_and_each_attempts(page: Page, server: str) -> None:
    with httpx.Client(base_url=server, timeout=10) as api:
        started = api.post(
            "/api/v1/flows", json={"flowType": "PaymentFlow", "flowId": "pay-1", "input": "c-1"}
        )
        assert started.status_code == 201, started.text
        done = api.get("/api/v1/flows/pay-1/result", params={"waitSeconds": 20}).json()
    assert done["status"] == "FAILED", done

    page.goto(f"/playground/#/flows/pay-1?runId={started.json()['runId']}")
    summary = page.locator("#fx-summary")
    expect(summary).to_contain_text("RuntimeError: payment gateway down for c-1")
    trace = summary.locator("details.traceback")
    expect(trace).to_have_attribute("open", "")
    expect(trace.locator("pre")).to_contain_text(re.compile(r'failing_flows\.py", line \d+'))
    expect(trace.locator("pre")).to_contain_text('raise RuntimeError(f"payment gateway down')

    # The timeline: one bar, failed, its back-off between the two attempts, no timer.
    bar = page.locator("#fx-timeline .tl-bar")
    expect(bar).to_have_count(1)
    expect(bar).to_have_class(re.compile(r"\bst-failed\b"))
    expect(bar.locator(".seg-backoff")).to_have_count(1)
    expect(page.locator("#fx-timeline .tl-rows .mk-attempt")).to_have_count(1)
    expect(page.locator("#fx-timeline .tl-rows .mk-retry")).to_have_count(1)
    expect(page.locator("#fx-timeline .tl-rows .mk-timer")).to_have_count(0)
    expect(page.locator("#fx-timeline-summary")).to_contain_text(
        "1 Step execution · 0 RPC commits · 0 timer firings · 1 failed attempt · 1 retry over"
    )

    events = page.locator("#fx-events .event")
    failed = events.filter(has=page.locator(".ev-type", has_text="STEP_ATTEMPT_FAILED"))
    closed = events.filter(has=page.locator(".ev-type", has_text="STEP_CLOSED"))
    expect(failed).to_have_count(1)
    expect(closed).to_have_count(1)
    for item in (failed, closed):
        folded = item.locator("details.traceback")
        expect(folded).not_to_have_attribute("open", "")
        # The JSON beside it leaves the traceback out; the fold holds it.
        expect(item.locator(".ev-details")).not_to_contain_text("Traceback")
        folded.locator("summary").click()
        expect(folded.locator("pre")).to_be_visible()
        expect(folded.locator("pre")).to_contain_text("RuntimeError: payment gateway down for c-1")
