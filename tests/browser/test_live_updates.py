"""Live updates of the Flow page, in Chromium against a real server: the page of an open run
picks up what happens to it without a click (a Channel message and an RPC sent through the
API), keeps the selected bar, the rows already listed and the scroll position, pauses and
resumes on the user's word and while the page is hidden, and stops reading when the run closes
or the user leaves.

Where a test must know that the page read nothing, its timers run on Playwright's fake clock
and a wrapped fetch counts the page's reads: no test sleeps. Screenshots at 1280 and 390 px
are test artifacts (see shots.py): ``live-*.png``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.browser.shots import Shots
from tests.browser.test_explorer import history
from tests.browser.test_layout import assert_fits
from tests.browser.test_time_travel import HANDLE, handle_messages

COUNTER = "/primitives/rpc"
# Counts the page's calls to the API, by URL, before any module of the page runs.
COUNT_READS = """(() => {
  const fetch = window.fetch;
  window.apiReads = [];
  window.fetch = (url, ...rest) => {
    if (String(url).includes("/api/v1/")) window.apiReads.push(String(url));
    return fetch(url, ...rest);
  };
})()"""


# The page's visibility as a browser sets it when another tab comes to the front, and back.
HIDE = """() => {
  Object.defineProperty(document, "hidden", { value: true, configurable: true });
  document.dispatchEvent(new Event("visibilitychange"));
}"""
SHOW = """() => {
  Object.defineProperty(document, "hidden", { value: false, configurable: true });
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def reads(page: Page) -> int:
    """Return how many API calls the page has made."""
    return int(page.evaluate("window.apiReads.length"))


def publish(api: httpx.Client, flow_id: str, value: str) -> None:
    """Publish a message to the ChannelFlow's prioritized-messages Channel through the API."""
    published = api.post(
        f"/api/v1/flows/{flow_id}/channels/prioritized-messages/messages", json={"value": value}
    )
    assert published.status_code == 201, published.text


def test_an_open_runs_page_picks_up_new_events_and_keeps_the_selection_and_the_scroll(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-live-channel"
    handle_messages(api, flow_id, ["a"])
    before = len(history(api, flow_id))
    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-live")).to_be_visible()
    expect(page.locator("#fx-live-text")).to_have_text("Live: updates every 2 s")
    listed = page.locator("#fx-events .event")
    expect(listed).to_have_count(before)

    # The second execution waits for a message: select its bar, scroll, mark what must stay.
    bar = page.locator(f'#fx-timeline .tl-bar[data-exec="{HANDLE}-2"]')
    bar.click()
    expect(bar).to_have_attribute("aria-pressed", "true")
    expect(listed.locator(".ev-type")).to_have_text(["STEP_CLOSED", "STEP_WAITING"])
    page.evaluate("window.scrollTo(0, 400)")
    scrolled = page.evaluate("window.scrollY")
    assert scrolled > 0
    kept = listed.first.get_attribute("data-event-id")
    page.evaluate(
        "document.querySelector('#fx-events .event').dataset.mark = 'kept';"
        "window.notReloaded = true"
    )

    # A message sent through the API: the page shows its handling, with no click.
    publish(api, flow_id, "b")
    expect(listed.locator(".ev-type")).to_have_text(
        ["STEP_CLOSED", "STEP_WAITING", "CHANNEL_CONSUMED", "STEP_CLOSED"]
    )
    expect(listed.nth(2).locator(".ev-summary")).to_have_text(
        f"{HANDLE}-2 took 1 message from prioritized-messages"
    )
    expect(page.locator(f'#fx-timeline .tl-bar[data-exec="{HANDLE}-2"]')).to_have_class(
        re.compile(r"\bst-completed\b")
    )
    expect(page.locator("#fx-attributes")).to_contain_text('"b"')
    expect(page.locator("#fx-pending .pending-step")).to_have_attribute("data-exec", f"{HANDLE}-3")
    # The bar stays selected and focused, the rows listed before stay as they were, the page
    # where it was.
    redrawn = page.locator(f'#fx-timeline .tl-bar[data-exec="{HANDLE}-2"]')
    expect(redrawn).to_have_attribute("aria-pressed", "true")
    expect(redrawn).to_be_focused()
    expect(page.locator('#fx-events .event[data-mark="kept"]')).to_have_count(1)
    assert page.evaluate("window.scrollY") == scrolled
    assert page.evaluate("window.notReloaded") is True

    # Every event again: the new ones are listed after the ones already there.
    page.get_by_role("button", name="Show all events").click()
    expect(listed).to_have_count(len(history(api, flow_id)))
    expect(page.locator(f'#fx-events .event[data-event-id="{kept}"]')).to_have_attribute(
        "data-mark", "kept"
    )


def test_live_updates_pause_resume_and_stop_when_the_run_closes_or_the_page_is_left(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-live-counter"
    assert api.post(f"{COUNTER}/start", params={"flowId": flow_id}).status_code == 201
    page.add_init_script(COUNT_READS)
    # The page's timers fire only when the test moves its clock.
    page.clock.install()
    page.clock.pause_at(time.time() + 1)
    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-live-text")).to_have_text("Live: updates every 2 s")
    rows = page.locator("#fx-events .event")
    expect(rows).to_have_count(1)

    # An RPC through the API: the next update shows it.
    assert api.post(f"{COUNTER}/increment", params={"flowId": flow_id}, json={"by": 2}).is_success
    page.clock.run_for(2_100)
    expect(rows).to_have_count(2)
    expect(rows.nth(1).locator(".ev-summary")).to_have_text(
        "RPC increment committed; wrote counter"
    )
    expect(page.locator("#fx-attributes")).to_contain_text('"counter": 2')

    # Paused, the page reads nothing, however long it waits.
    toggle = page.get_by_role("button", name="Pause live updates")
    toggle.click()
    expect(page.locator("#fx-live-text")).to_have_text("Live updates paused")
    expect(page.locator("#fx-live")).to_have_attribute("data-state", "paused")
    paused_at = reads(page)
    assert api.post(f"{COUNTER}/increment", params={"flowId": flow_id}, json={"by": 3}).is_success
    page.clock.run_for(20_000)
    assert reads(page) == paused_at
    expect(rows).to_have_count(2)
    # Resumed, it reads at once.
    page.get_by_role("button", name="Resume live updates").click()
    expect(rows).to_have_count(3)
    expect(page.locator("#fx-attributes")).to_contain_text('"counter": 5')
    expect(page.locator("#fx-live-text")).to_have_text("Live: updates every 2 s")

    # A hidden page (another tab in front) reads nothing; shown again, it reads at once.
    page.evaluate(HIDE)
    hidden_at = reads(page)
    page.clock.run_for(20_000)
    assert reads(page) == hidden_at
    assert api.post(f"{COUNTER}/increment", params={"flowId": flow_id}, json={"by": 1}).is_success
    page.evaluate(SHOW)
    expect(rows).to_have_count(4)
    expect(page.locator("#fx-attributes")).to_contain_text('"counter": 6')

    # The run closes: the next update shows it, and then the page stops reading.
    stopped = api.post(f"/api/v1/flows/{flow_id}/stop", json={"type": "CANCEL", "reason": "done"})
    assert stopped.status_code == 202, stopped.text
    page.clock.run_for(2_100)
    expect(page.locator("#fx-status .badge")).to_have_text("CANCELED")
    expect(page.locator("#fx-live")).to_be_hidden()
    expect(page.locator("#fx-pending-note")).to_have_text("None: the run is closed.")
    closed_at = reads(page)
    page.clock.run_for(20_000)
    assert reads(page) == closed_at

    # A running run's page, then another view: the page stops reading the run.
    other = "browser-live-counter-left"
    assert api.post(f"{COUNTER}/start", params={"flowId": other}).status_code == 201
    page.goto(f"/playground/#/flows/{other}")
    expect(page.locator("#fx-live")).to_be_visible()
    page.get_by_role("link", name="← Flows").click()
    expect(page.locator("#search-view")).to_be_visible()
    left_at = reads(page)
    page.clock.run_for(20_000)
    assert reads(page) == left_at


def test_live_updates_at_1280_and_390_px(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    flow_id = "browser-live-shots"
    handle_messages(api, flow_id, ["first"])
    shots = Shots(tmp_path)
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.goto(f"/playground/#/flows/{flow_id}")
        expect(page.locator("#fx-live-text")).to_have_text("Live: updates every 2 s")
        expect(page.locator("#fx-pending .pending-step")).to_have_count(1)
        assert_fits(page, width)
        shots.take(page, f"live-{width}", full_page=False)
    # Both pages follow the same run: one message, and each shows it without a click.
    publish(api, flow_id, "second")
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        expect(page.locator("#fx-events .ev-type", has_text="CHANNEL_CONSUMED")).to_have_count(2)
        page.get_by_role("button", name="Pause live updates").click()
        expect(page.locator("#fx-live-text")).to_have_text("Live updates paused")
        assert_fits(page, width)
        shots.take(page, f"live-paused-{width}", full_page=False)
    shots.publish()
