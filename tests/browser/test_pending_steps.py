"""The Flow page's Pending Steps card, in Chromium against a real server: a Step waiting on a
long Timer shows when it fires, one waiting on a Channel names it, a closed run has none, and
each pending execution's button shows its events. (A retry waiting out its back-off is in
test_custom_registry.) Screenshots at 1280 and 390 px are test artifacts (see shots.py):
``pending-*.png``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.browser.shots import Shots
from tests.browser.test_layout import assert_fits
from tests.browser.times import clock, iso_ms
from tests.browser.watch import allow_status
from tests.support.waiting import wait_until

TIMER = "/primitives/timer"
CHANNEL = "/primitives/channel"


def pending(api: httpx.Client, flow_id: str) -> list[dict[str, Any]]:
    """Return the pending Step executions of the Flow's latest run (listPendingSteps)."""
    response = api.get(f"/api/v1/flows/{flow_id}/pending-steps")
    assert response.status_code == 200, response.text
    steps: list[dict[str, Any]] = response.json()["steps"]
    return steps


def test_a_step_waiting_on_a_long_timer_shows_when_it_fires(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    flow_id = "browser-pending-timer"
    started = api.post(f"{TIMER}/start", params={"flowId": flow_id}, json={"seconds": 3600})
    assert started.status_code == 201, started.text
    # Its wait_for asks for the Timer: from then on its execute is due when the Timer fires.
    steps = wait_until(
        lambda: [s for s in pending(api, flow_id) if s["timers"]], within=10, what="the Timer"
    )
    assert steps[0]["timers"] == [steps[0]["dueAt"]]
    fires = steps[0]["dueAt"]

    shots = Shots(tmp_path)
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.goto(f"/playground/#/flows/{flow_id}")
        expect(page.locator("#fx-pending-note")).to_have_text(
            "1 pending Step execution, oldest first."
        )
        item = page.locator('#fx-pending .pending-step[data-exec="WaitForTimer-1"]')
        expect(item.locator(".phase")).to_have_text("Execute next")
        expect(item.locator(".pending-attempt")).to_have_text("attempt 1")
        due = item.locator(".pending-due")
        # An hour from the start: "in 1 h", or "in 59 min" on a slow machine.
        expect(due).to_have_text(
            re.compile(rf"^Its Timer fires in (1 h|59 min) \({clock(fires)}\)$")
        )
        # Relative, with the absolute time in the tooltip and machine-readable.
        for when in (due.locator("time.rel"), due.locator("time.clock")):
            expect(when).to_have_attribute("datetime", iso_ms(fires))
            expect(when).to_have_attribute(
                "title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$")
            )
        expect(item).to_contain_text("Pending since")
        assert_fits(page, width)
        shots.take(page, f"pending-timer-{width}")

    # Its button shows its events: its bar selected in the timeline.
    page = laptop_page
    page.get_by_role("button", name="Show the events of WaitForTimer-1").click()
    bar = page.locator('#fx-timeline .tl-bar[data-exec="WaitForTimer-1"]')
    expect(bar).to_have_attribute("aria-pressed", "true")
    expect(bar).to_be_focused()
    expect(page.locator("#fx-filter-text")).to_have_text("Showing the 2 events of WaitForTimer-1.")
    shots.publish()


def test_a_step_waiting_on_a_channel_names_it_and_a_closed_run_has_none(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-pending-channel"
    assert api.post(f"{CHANNEL}/start", params={"flowId": flow_id}).status_code == 201
    wait_until(
        lambda: [s for s in pending(api, flow_id) if s["phase"] == "WAITING"],
        within=10,
        what="the wait on the Channel",
    )
    page.goto(f"/playground/#/flows/{flow_id}")
    item = page.locator('#fx-pending .pending-step[data-exec="HandlePrioritizedMessage-1"]')
    expect(item.locator(".phase")).to_have_text("Waiting")
    expect(item.locator(".pending-due")).to_have_text("Runs once its Wait is met:")
    expect(item.locator(".pending-waits li")).to_have_text(["Channels: prioritized-messages"])

    # Stopped through the API: the page's next live update shows no pending Step.
    stopped = api.post(f"/api/v1/flows/{flow_id}/stop", json={"type": "TERMINATE"})
    assert stopped.status_code == 202, stopped.text
    expect(page.locator("#fx-status .badge")).to_have_text("TERMINATED")
    expect(page.locator("#fx-pending-note")).to_have_text("None: the run is closed.")
    expect(page.locator("#fx-pending .pending-step")).to_have_count(0)


def test_a_wait_on_timers_channels_and_subflows_lists_each(page: Page, api: httpx.Client) -> None:
    """The card's drawing of an answer no bundled example gives: a Wait on all three."""
    flow_id = "browser-pending-drawn"
    assert api.post(f"{CHANNEL}/start", params={"flowId": flow_id}).status_code == 201
    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-pending .pending-step")).to_have_count(1)
    # Hold the live updates, so only the made-up answer is on the card.
    page.get_by_role("button", name="Pause live updates").click()
    step = {
        "stepExecutionId": "Gather-1",
        "stepType": "Gather",
        "phase": "WAITING",
        "attempt": 1,
        "createdAt": "2027-01-15T08:00:00Z",
        "dueAt": "2027-01-15T09:00:00.250Z",
        "timers": ["2027-01-15T09:00:00.250Z"],
        "channels": ["orders", "payments/eu"],
        "subFlows": ["SubFlow:x-Gather-1-0", "SubFlow:x-Gather-1-1"],
    }
    page.evaluate(
        """async (step) => {
          const { renderPending } = await import("/playground/pending.js");
          renderPending({ ok: true, steps: [step] }, () => {});
        }""",
        step,
    )
    item = page.locator('#fx-pending .pending-step[data-exec="Gather-1"]')
    waits = item.locator(".pending-waits li")
    expect(waits).to_have_count(3)
    expect(waits.nth(0)).to_have_text(re.compile(r"^Timers: \S.* \(2027-01-15 09:00:00\)$"))
    expect(waits.nth(1)).to_have_text("Channels: orders, payments/eu")
    expect(waits.nth(2)).to_have_text("SubFlows: SubFlow:x-Gather-1-0, SubFlow:x-Gather-1-1")
    expect(waits.nth(2).get_by_role("link", name="SubFlow:x-Gather-1-1")).to_have_attribute(
        "href", "#/flows/SubFlow%3Ax-Gather-1-1"
    )


def test_skip_timer_fires_a_long_timer_and_the_run_completes_at_once(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    flow_id = "browser-pending-skip"
    started = api.post(f"{TIMER}/start", params={"flowId": flow_id}, json={"seconds": 3600})
    assert started.status_code == 201, started.text
    wait_until(
        lambda: [s for s in pending(api, flow_id) if s["timers"]], within=10, what="the Timer"
    )
    shots = Shots(tmp_path)
    # The phone first: the run is still waiting on its hour-long Timer there.
    for page, width in ((phone_page, 390), (laptop_page, 1280)):
        page.goto(f"/playground/#/flows/{flow_id}")
        item = page.locator('#fx-pending .pending-step[data-exec="WaitForTimer-1"]')
        expect(item.get_by_role("button", name="Skip the timer of WaitForTimer-1")).to_have_text(
            "Skip timer"
        )
        assert_fits(page, width)
        shots.take(page, f"pending-skip-{width}")

    page = laptop_page
    page.get_by_role("button", name="Skip the timer of WaitForTimer-1").click()
    dialog = page.locator("#confirm-dialog")
    expect(dialog.locator("h2")).to_have_text("Skip the timer of WaitForTimer-1?")
    dialog.get_by_role("button", name="Skip timer").click()
    expect(page.locator("#fx-action-result")).to_have_text(
        "Skipped the timer of WaitForTimer-1: 1 Timer fired."
    )
    # The run completes without waiting out its hour.
    expect(page.locator("#fx-status .badge")).to_have_text("COMPLETED", timeout=10_000)
    expect(page.locator("#fx-pending-note")).to_have_text("None: the run is closed.")
    assert api.get(f"/api/v1/flows/{flow_id}/attributes").json()["values"]["timer-status"] == (
        "fired"
    )
    shots.take(page, "pending-skipped-1280")
    shots.publish()


def test_skip_timer_refused_shows_the_problem_detail(page: Page, api: httpx.Client) -> None:
    """A wait with no Timer left: skipTimers answers 400, and the card shows its detail."""
    flow_id = "browser-pending-skip-refused"
    assert api.post(f"{CHANNEL}/start", params={"flowId": flow_id}).status_code == 201
    allow_status(page, 400, "/timers/skip")
    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-pending .pending-step")).to_have_count(1)
    # Its execution waits on a Channel only, so it has no button of its own.
    expect(page.locator(".pending-skip")).to_have_count(0)
    page.get_by_role("button", name="Pause live updates").click()
    # Drawn as if it waited on a Timer too, so the button is offered and refused.
    step = {
        "stepExecutionId": "HandlePrioritizedMessage-1",
        "stepType": "HandlePrioritizedMessage",
        "phase": "WAITING",
        "attempt": 1,
        "createdAt": "2027-01-15T08:00:00Z",
        "dueAt": "2099-01-15T09:00:00Z",
        "timers": ["2099-01-15T09:00:00Z"],
        "channels": ["prioritized-messages"],
        "subFlows": [],
    }
    page.evaluate(
        """async ([step, flowId]) => {
          const { renderPending } = await import("/playground/pending.js");
          renderPending({ ok: true, steps: [step] }, () => {}, { flowId, runId: null });
        }""",
        [step, flow_id],
    )
    page.get_by_role("button", name="Skip the timer of HandlePrioritizedMessage-1").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Skip timer").click()
    error = page.locator(".pending-skip-error")
    expect(error).to_be_visible()
    expect(error).to_have_text(re.compile(r"^Refused: \S.*[Tt]imer"))
