"""The playground on a server of a registry of its own (tests/browser/failing_flows.py, none of
the bundled examples in it), in Chromium: it opens on the Flows explorer with no Examples tab,
an example's address says why it shows nothing, and a Step waiting out a retry back-off is
pending at attempt 2 with its retry time, as its event says too.

Screenshots at 1280 and 390 px are test artifacts (see shots.py):
``registry-explorer-*.png``, ``registry-note-1280.png`` and ``registry-retry-*.png``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.servers import FAILING, serve_registry
from tests.browser.shots import Shots
from tests.browser.test_layout import assert_fits
from tests.browser.times import clock
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Serve the failing registry: PaymentFlow and RefundFlow, no bundled example."""
    yield from serve_registry(tmp_path_factory, FAILING)


def start(api: httpx.Client, flow_type: str, flow_id: str, card: str) -> dict[str, Any]:
    """Start a Flow of the registry through the API; return the start's answer."""
    started = api.post(
        "/api/v1/flows", json={"flowType": flow_type, "flowId": flow_id, "input": card}
    )
    assert started.status_code == 201, started.text
    body: dict[str, Any] = started.json()
    return body


def pending(api: httpx.Client, flow_id: str) -> list[dict[str, Any]]:
    """Return the pending Step executions of the Flow's latest run (listPendingSteps)."""
    response = api.get(f"/api/v1/flows/{flow_id}/pending-steps")
    assert response.status_code == 200, response.text
    steps: list[dict[str, Any]] = response.json()["steps"]
    return steps


def test_the_playground_opens_on_the_explorer_and_lists_no_example(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    start(api, "PaymentFlow", "registry-landing", "c-1")
    shots = Shots(tmp_path)
    catalog_reads: list[str] = []
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.on("request", lambda r: catalog_reads.append(r.url) if "catalog" in r.url else None)
        page.goto("/playground/")
        # The address names where the page landed: Back does not return to an empty view.
        expect(page).to_have_url(re.compile(r"/playground/#/flows$"))
        expect(page.locator("#search-view")).to_be_visible()
        expect(page.locator("#view-examples")).to_be_hidden()
        expect(page.locator("#tab-examples")).to_be_hidden()
        expect(page.get_by_role("link", name="Flows", exact=True)).to_have_attribute(
            "aria-current", "page"
        )
        expect(page.locator("#app-note")).to_be_hidden()
        # The explorer offers what the server serves.
        expect(page.get_by_label("Flow type").locator("option")).to_have_text(
            ["Any type", "PaymentFlow", "RefundFlow"]
        )
        expect(page.locator('#results-body tr[data-flow-id="registry-landing"]')).to_be_visible()
        assert_fits(page, width)
        shots.take(page, f"registry-explorer-{width}")
    # The catalog was read, and none of its examples was listed.
    assert catalog_reads
    expect(laptop_page.locator(".route-link")).to_have_count(0)

    # An example's address, followed from the page or opened afresh: a short note says why
    # there is nothing to show, over the explorer.
    page = laptop_page
    page.goto("/playground/#timer/start")
    note = page.locator("#app-note")
    expect(note).to_have_text(
        "The example “Timer” is not served here: this server runs a registry without "
        "TimerFlow, so the example's routes are not there."
    )
    expect(page).to_have_url(re.compile(r"/playground/#/flows$"))
    expect(page.locator("#search-view")).to_be_visible()
    shots.take(page, "registry-note-1280", full_page=False)
    page.goto("about:blank")
    page.goto("/playground/#subflow/start")
    expect(note).to_contain_text("without FanOutFlow, SquareFlow")
    expect(page.locator("#search-view")).to_be_visible()
    # Going on in the explorer clears it.
    page.locator('#results-body tr[data-flow-id="registry-landing"] .fx-flow-link').click()
    expect(page.locator("#fx-title")).to_have_text("registry-landing")
    expect(note).to_be_hidden()
    shots.publish()


def test_a_retry_waiting_out_its_back_off_is_pending_at_attempt_2_with_its_retry_time(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    flow_id = "registry-refund"
    start(api, "RefundFlow", flow_id, "c-9")
    retrying = wait_until(
        lambda: [s for s in pending(api, flow_id) if s["attempt"] == 2],
        within=10,
        what="the first attempt's failure",
    )
    retry_at = retrying[0]["dueAt"]
    events = api.get(f"/api/v1/flows/{flow_id}/history").json()["events"]
    failed = next(e for e in events if e["eventType"] == "STEP_ATTEMPT_FAILED")
    assert failed["details"]["retryAt"] == retry_at

    shots = Shots(tmp_path)
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.goto(f"/playground/#/flows/{flow_id}")
        item = page.locator('#fx-pending .pending-step[data-exec="Refund-1"]')
        expect(item.locator(".phase")).to_have_text("Execute next")
        attempt = item.locator(".pending-attempt")
        expect(attempt).to_have_text("attempt 2")
        expect(attempt).to_have_class(re.compile(r"\bretry\b"))
        due = item.locator(".pending-due")
        # The back-off is an hour: "in 1 h", or "in 59 min" on a slow machine.
        expect(due).to_have_text(
            re.compile(
                rf"^Attempt 2 retries after its back-off, in (1 h|59 min) \({clock(retry_at)}\)$"
            )
        )
        # The event of the failed attempt says the same, in one line.
        row = page.locator("#fx-events .event").filter(
            has=page.locator(".ev-type", has_text="STEP_ATTEMPT_FAILED")
        )
        expect(row.locator(".ev-summary")).to_have_text(
            "Refund-1 attempt 1 failed: RuntimeError: payment gateway down for c-9, retry at "
            + clock(retry_at, failed["at"])
        )
        # The timeline draws the back-off, still open.
        bar = page.locator('#fx-timeline .tl-bar[data-exec="Refund-1"]')
        expect(bar).to_have_class(re.compile(r"\bst-backoff\b"))
        expect(bar.locator(".seg-backoff")).to_have_count(1)
        assert_fits(page, width)
        shots.take(page, f"registry-retry-{width}")

    # The raw JSON of the event is one click away.
    page = laptop_page
    row = page.locator('#fx-events .event[data-event-id="2"]')
    raw = row.locator("details.ev-raw")
    expect(raw.locator("pre")).to_be_hidden()
    raw.get_by_text("Details (JSON)").click()
    expect(raw.locator("pre")).to_be_visible()
    expect(raw.locator("pre")).to_contain_text(f'"retryAt": "{retry_at}"')
    shots.publish()
