"""The explorer's Schedules view, in Chromium against a real server: Schedules created through
the API are listed; a Schedule's page pauses it with a note, triggers it (the started Flow's
link leads to its Flow page) and unpauses it; a backfill of a two-hour range of an hourly
Schedule lists two actions. Every Schedule fires hourly on an hour-long Timer, so nothing fires
on its own during a test. Screenshots at 1280 and 390 px are test artifacts (see shots.py):
``schedules-*.png``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.browser.shots import Shots
from tests.browser.test_layout import assert_fits
from tests.browser.times import iso_ms
from tests.browser.watch import allow_status

HOUR = 3600
# Each action's Flow waits an hour on its Timer: it is still RUNNING when the test looks.
INPUT = {"seconds": 3600}


def create(api: httpx.Client, schedule_id: str, **spec: Any) -> dict[str, Any]:
    """Create a Schedule of TimerFlow through the API; return its description."""
    body = {"scheduleId": schedule_id, "flowType": "TimerFlow", "input": INPUT, **spec}
    response = api.post("/api/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    described: dict[str, Any] = response.json()
    return described


def describe(api: httpx.Client, schedule_id: str) -> dict[str, Any]:
    """Return a Schedule's description (describeSchedule)."""
    response = api.get(f"/api/v1/schedules/{schedule_id}")
    assert response.status_code == 200, response.text
    described: dict[str, Any] = response.json()
    return described


def note_dialog(page: Page, title: str, note: str) -> None:
    """Answer the note dialog a Pause or Unpause opens."""
    dialog = page.locator("#sc-note-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("h2")).to_have_text(title)
    dialog.get_by_label("Note").fill(note)
    dialog.locator("#sc-note-ok").click()
    expect(dialog).to_be_hidden()


def test_schedules_are_listed_and_one_pauses_triggers_and_unpauses(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    hourly = create(api, "browser-sched-hourly", everySeconds=HOUR)
    create(
        api,
        "browser-sched-cron",
        cron="30 6 * * *",
        timezone="Europe/Paris",
        overlap="ALLOW_ALL",
        paused=True,
        note="not yet",
    )
    shots = Shots(tmp_path)

    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.goto("/playground/#/schedules")
        expect(page.locator("#tab-schedules")).to_have_attribute("aria-current", "page")
        row = page.locator('#sc-body tr[data-schedule-id="browser-sched-hourly"]')
        expect(row.locator('td[data-label="Flow type"]')).to_have_text("TimerFlow")
        expect(row.locator('td[data-label="Times"]')).to_have_text("every 1 h")
        expect(row.locator('td[data-label="Overlap"]')).to_have_text("SKIP")
        expect(row.locator('td[data-label="State"]')).to_have_text("Active")
        # The next time relative, the absolute time in its tooltip.
        nxt = row.locator('td[data-label="Next time"] time.rel')
        expect(nxt).to_have_text(re.compile(r"^in (\d+ s|\d+ min|1 h)$"))
        expect(nxt).to_have_attribute("datetime", iso_ms(hourly["nextActionTimes"][0]))
        expect(nxt).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:00:00\.000 UTC$"))
        expect(row.locator('td[data-label="Running"]')).to_have_text("0")
        expect(row.locator('td[data-label="Skipped"]')).to_have_text("0")
        cron = page.locator('#sc-body tr[data-schedule-id="browser-sched-cron"]')
        expect(cron.locator('td[data-label="Times"]')).to_have_text(
            "cron 30 6 * * * in Europe/Paris"
        )
        expect(cron.locator('td[data-label="Overlap"]')).to_have_text("ALLOW_ALL")
        expect(cron.locator('td[data-label="State"]')).to_have_text("Pausednot yet")
        expect(cron.locator('td[data-label="Next time"]')).to_have_text("none while paused")
        assert_fits(page, width)
        shots.take(page, f"schedules-list-{width}")

    page = laptop_page
    page.get_by_role("link", name="browser-sched-hourly").click()
    expect(page).to_have_url(re.compile(r"#/schedules/browser-sched-hourly$"))
    expect(page.locator("#sc-title")).to_have_text("browser-sched-hourly")
    expect(page.locator("#sc-title")).to_be_focused()
    expect(page.locator("#sc-state .badge")).to_have_text("Active")
    expect(page.locator("#sc-next li")).to_have_count(5)
    expect(page.locator("#sc-next li time.rel").first).to_have_attribute(
        "datetime", iso_ms(hourly["nextActionTimes"][0])
    )
    expect(page.locator("#sc-actions-note")).to_have_text("None yet.")
    expect(page.locator("#sc-running-note")).to_have_text("None running.")

    # Pause, with a note: the page shows it paused, with the note, and no next time.
    page.get_by_role("button", name="Pause…").click()
    note_dialog(page, "Pause browser-sched-hourly?", "maintenance window")
    expect(page.locator("#sc-state .badge")).to_have_text("Paused")
    expect(page.locator("#sc-state-note")).to_have_text("maintenance window")
    expect(page.locator("#sc-next-note")).to_have_text(
        "None while paused: it starts nothing on its own."
    )
    expect(page.get_by_role("button", name="Unpause…")).to_be_visible()
    assert describe(api, "browser-sched-hourly")["paused"] is True

    # Trigger it (a paused Schedule can be): the started Flow is linked, listed and running.
    page.get_by_role("button", name="Trigger now").click()
    started = page.locator("#sc-started")
    expect(started).to_have_text(re.compile(r"^browser-sched-hourly-\d{8}T\d{6}Z$"))
    flow_id = started.inner_text()
    action = describe(api, "browser-sched-hourly")["recentActions"][0]
    assert action["flowId"] == flow_id
    expect(started).to_have_attribute("href", f"#/flows/{flow_id}?runId={action['runId']}")
    expect(page.locator("#sc-actions .sc-action")).to_have_count(1)
    item = page.locator(f'#sc-actions .sc-action[data-flow-id="{flow_id}"]')
    expect(item.locator(".badge")).to_have_text("RUNNING")
    expect(item.get_by_role("link", name=flow_id)).to_have_attribute(
        "href", f"#/flows/{flow_id}?runId={action['runId']}"
    )
    expect(page.locator("#sc-running li")).to_have_text([flow_id])
    expect(page.get_by_role("link", name="Search every Flow it started")).to_have_attribute(
        "href", "#/flows?query=ScheduleId+%3D+%27browser-sched-hourly%27"
    )
    assert_fits(page, 1280)
    shots.take(page, "schedules-page-1280")
    phone_page.goto("/playground/#/schedules/browser-sched-hourly")
    expect(phone_page.locator("#sc-actions .sc-action")).to_have_count(1)
    expect(phone_page.locator("#sc-state-note")).to_have_text("maintenance window")
    assert_fits(phone_page, 390)
    shots.take(phone_page, "schedules-page-390")

    # The link leads to the started Flow's page.
    started.click()
    expect(page.locator("#fx-title")).to_have_text(flow_id)
    expect(page.locator("#fx-status .badge")).to_have_text("RUNNING")
    expect(page.locator("#tab-flows")).to_have_attribute("aria-current", "page")

    # Back on the Schedule: unpause it with a note.
    page.go_back()
    expect(page.locator("#sc-title")).to_have_text("browser-sched-hourly")
    page.get_by_role("button", name="Unpause…").click()
    note_dialog(page, "Unpause browser-sched-hourly?", "back to normal")
    expect(page.locator("#sc-state .badge")).to_have_text("Active")
    expect(page.locator("#sc-state-note")).to_have_text("back to normal")
    expect(page.locator("#sc-next li")).to_have_count(5)
    assert describe(api, "browser-sched-hourly")["paused"] is False
    shots.publish()


def test_a_backfill_of_two_hours_lists_two_actions(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    schedule_id = "browser-sched-backfill"
    # ALLOW_ALL: the first hour's Flow still runs when the second hour's starts.
    create(api, schedule_id, everySeconds=HOUR, overlap="ALLOW_ALL")
    first, second = f"{schedule_id}-20261201T000000Z", f"{schedule_id}-20261201T010000Z"
    page = laptop_page
    page.goto(f"/playground/#/schedules/{schedule_id}")
    expect(page.locator("#sc-actions-note")).to_have_text("None yet.")
    page.get_by_label("Start (UTC)").fill("2026-12-01T00:00")
    page.get_by_label("End (UTC)").fill("2026-12-01T02:00")
    page.get_by_role("button", name="Backfill", exact=True).click()
    expect(page.locator("#sc-result")).to_have_text(
        f"Backfill started 2 Flows: {first}, {second}; 0 skipped."
    )
    actions = describe(api, schedule_id)["recentActions"]
    assert sorted(a["flowId"] for a in actions) == [first, second]
    listed = page.locator("#sc-actions .sc-action")
    expect(listed).to_have_count(2)
    # Newest first, each linked to its run's Flow page.
    for i, action in enumerate(actions):
        expect(listed.nth(i)).to_have_attribute("data-flow-id", action["flowId"])
        expect(listed.nth(i).get_by_role("link")).to_have_attribute(
            "href", f"#/flows/{action['flowId']}?runId={action['runId']}"
        )
    expect(page.locator(f'#sc-actions .sc-action[data-flow-id="{first}"] time').first).to_have_text(
        "2026-12-01 00:00:00"
    )
    expect(page.locator("#sc-running li")).to_have_count(2)
    shots = Shots(tmp_path)
    assert_fits(page, 1280)
    shots.take(page, "schedules-backfill-1280")
    phone_page.goto(f"/playground/#/schedules/{schedule_id}")
    expect(phone_page.locator("#sc-actions .sc-action")).to_have_count(2)
    assert_fits(phone_page, 390)
    shots.take(phone_page, "schedules-backfill-390")
    shots.publish()


def test_an_unknown_schedule_says_so(page: Page) -> None:
    allow_status(page, 404, "/api/v1/schedules/browser-no-such")
    page.goto("/playground/#/schedules/browser-no-such")
    expect(page.locator("#sc-note")).to_have_text(
        re.compile(r"^No Schedule with the ID browser-no-such: \S")
    )
    expect(page.locator("#sc-grid")).to_be_hidden()
