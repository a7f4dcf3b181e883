"""Time travel from the explorer's Flow page (DESIGN.md §13), driven in real headless Chromium
against a real server: the dialog a Step bar, an event or the beginning opens, its as-of
Attributes checked against the API, a confirmed travel checked through the API, a Cancel and an
Escape that change nothing, a refusal shown as its Problem, and the dialog at 1280 and 390 px
and in the dark scheme.

The screenshots are test artifacts, as in test_layout: ``<tmp_path>/screenshots/travel-*.png``,
copied to ``$DEXLITE_BROWSER_ARTIFACTS`` when that variable names a folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.browser.test_explorer import history, step_closed
from tests.browser.test_layout import SHOTS_ENV, assert_fits, shoot
from tests.browser.watch import allow_status
from tests.support.waiting import wait_until

CHANNEL = "/primitives/channel"
COUNTER = "/primitives/rpc"
HANDLED = "primitive-channel-handled"
HANDLE = "HandlePrioritizedMessage"


def handle_messages(api: httpx.Client, flow_id: str, values: list[str]) -> dict[str, Any]:
    """Start a ChannelFlow and publish `values` one at a time, each handled by its own Step
    execution (HandlePrioritizedMessage-1, -2, ...); return the start's answer."""
    started = api.post(f"{CHANNEL}/start", params={"flowId": flow_id})
    assert started.status_code == 201, started.text
    for n, value in enumerate(values, 1):
        published = api.post(
            f"/api/v1/flows/{flow_id}/channels/prioritized-messages/messages",
            json={"value": value},
        )
        assert published.status_code == 201, published.text
        wait_until(lambda n=n: step_closed(api, flow_id, n), within=10, what=f"handling {value}")
    # The next execution's wait has begun (its STEP_WAITING is in): the history holds still.
    wait_until(lambda: waiting_for_a_message(api, flow_id), within=10, what="the next wait")
    body: dict[str, Any] = started.json()
    return body


def waiting_for_a_message(api: httpx.Client, flow_id: str) -> bool:
    """Return whether the Flow's latest run has a Step execution waiting on its Channel."""
    steps = api.get(f"/api/v1/flows/{flow_id}/pending-steps").json()["steps"]
    return any(step["phase"] == "WAITING" for step in steps)


def latest(api: httpx.Client, flow_id: str) -> dict[str, Any]:
    """Return the Flow ID's latest run (describeFlow)."""
    response = api.get(f"/api/v1/flows/{flow_id}")
    assert response.status_code == 200, response.text
    info: dict[str, Any] = response.json()
    return info


def attributes(api: httpx.Client, flow_id: str, run_id: str, as_of: int | None = None) -> Any:
    """Return a run's Attribute values, now or as of a history event."""
    params: dict[str, Any] = {"runId": run_id}
    if as_of is not None:
        params["asOfEventId"] = as_of
    response = api.get(f"/api/v1/flows/{flow_id}/attributes", params=params)
    assert response.status_code == 200, response.text
    return response.json()["values"]


def event_of(events: list[dict[str, Any]], event_type: str, execution: str) -> dict[str, Any]:
    """Return the first event of a type that names a Step execution."""
    return next(
        e
        for e in events
        if e["eventType"] == event_type and e["details"].get("stepExecutionId") == execution
    )


def compact(value: Any) -> str:
    """Return a value as the dialog shows it: compact JSON."""
    return json.dumps(value, separators=(",", ":"))


def travel_dialog(page: Page) -> Locator:
    """Return the time travel dialog."""
    return page.locator("#travel-dialog")


def expect_values(page: Page, then: dict[str, Any], now: dict[str, Any]) -> None:
    """Check the dialog's table against as-of and current values read through the API."""
    names = sorted(set(then) | set(now))
    rows = travel_dialog(page).locator("#travel-values-body tr")
    expect(rows).to_have_count(len(names))
    for name in names:
        row = travel_dialog(page).locator(f'#travel-values-body tr[data-attribute="{name}"]')
        expect(row.locator(".tt-then")).to_have_text(
            compact(then[name]) if name in then else "unset"
        )
        expect(row.locator(".tt-now")).to_have_text(compact(now[name]) if name in now else "unset")
        same = then.get(name) == now.get(name)
        expect(row).to_have_class("tt-same" if same else "tt-diff")
        expect(row.locator(".tt-flag")).to_have_count(0 if same else 1)


def select_bar(page: Page, execution: str) -> Locator:
    """Press a Step bar of the timeline and return the travels it offers."""
    page.locator(f'#fx-timeline .tl-bar[data-exec="{execution}"]').click()
    offered = page.locator("#fx-travel-step")
    expect(offered).to_contain_text(f"Time travel {execution}:")
    return offered


def test_a_step_bar_travels_to_before_its_execute_and_the_page_opens_the_new_run(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-travel-execute"
    old = handle_messages(api, flow_id, ["a", "b"])["runId"]
    events = history(api, flow_id)
    consumed = event_of(events, "CHANNEL_CONSUMED", f"{HANDLE}-2")["eventId"]

    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-timeline .tl-bar")).to_have_count(3)
    # The third execution still waits for a message: only its WaitFor point is offered.
    offered = select_bar(page, f"{HANDLE}-3")
    expect(offered.get_by_role("button")).to_have_text(["Travel to before WaitFor…"])
    expect(offered).to_contain_text("it has not reached Execute.")
    offered = select_bar(page, f"{HANDLE}-2")
    expect(offered.get_by_role("button")).to_have_text(
        ["Travel to before WaitFor…", "Travel to before Execute…"]
    )
    offered.get_by_role("button", name="Travel to before Execute…").click()

    dialog = travel_dialog(page)
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading", level=2)).to_have_text(
        f"Travel {flow_id} to before the Execute of {HANDLE}-2?"
    )
    expect(dialog.locator("#travel-point")).to_contain_text(
        f"event #{consumed} CHANNEL_CONSUMED at"
    )
    expect(dialog.locator("#travel-values-caption")).to_contain_text(
        f"right after event #{consumed} CHANNEL_CONSUMED"
    )
    expect(dialog.locator("#travel-run")).to_contain_text("closes as TERMINATED")
    # The values before -2 executed (the first message handled), beside the current ones.
    then = attributes(api, flow_id, old, consumed)
    now = attributes(api, flow_id, old)
    assert then == {HANDLED: ["a"]} and now == {HANDLED: ["a", "b"]}
    expect_values(page, then, now)
    expect(dialog.locator("#travel-values-note")).to_have_text("1 Attribute of 1 differs from now.")

    dialog.get_by_label("Reason").fill("handle b again")
    expect(dialog.locator("#travel-body")).to_contain_text('"reason": "handle b again"')
    with page.expect_request(f"**/api/v1/flows/{flow_id}/time-travel") as sent:
        dialog.get_by_role("button", name="Confirm").click()
    to = {"kind": "STEP_EXECUTION", "stepExecutionId": f"{HANDLE}-2", "method": "EXECUTE"}
    assert sent.value.post_data_json == {
        "runId": old,
        "to": to,
        "reason": "handle b again",
        "skipWritesReapply": False,
        "forkToFlowId": None,
    }
    expect(dialog).to_be_hidden()
    result = page.locator("#fx-action-result")
    expect(result).to_contain_text("Traveled to before the Execute of")

    # Through the API: a new latest run that began by this travel; the old one terminated.
    new = latest(api, flow_id)
    assert new["runId"] != old and new["status"] == "RUNNING"
    traveled = [e for e in history(api, flow_id) if e["eventType"] == "TIME_TRAVELED"]
    assert len(traveled) == 1
    assert traveled[0]["details"]["previousRunId"] == old
    assert traveled[0]["details"]["to"] == to
    assert traveled[0]["details"]["reason"] == "handle b again"
    assert latest_status(api, flow_id, old) == "TERMINATED"

    # The page shows the new run, and its address is the new run's deep link.
    expect(page).to_have_url(re.compile(rf"#/flows/{flow_id}\?runId={new['runId']}$"))
    expect(page.locator("#fx-summary")).to_contain_text(new["runId"])
    expect(result).to_have_text(
        f"Traveled to before the Execute of {HANDLE}-2: new run {new['runId']} of {flow_id}, "
        f"from run {old}."
    )
    runs = page.locator("#fx-runs .run-link")
    expect(runs.locator("code")).to_have_text([new["runId"], old])
    expect(runs.first).to_have_attribute("aria-current", "page")
    expect(page.locator('#fx-events .event .ev-type:text-is("TIME_TRAVELED")')).to_have_count(1)
    # -2 executes again with the message its wait consumed: "b" is handled once more.
    wait_until(
        lambda: attributes(api, flow_id, new["runId"]) == {HANDLED: ["a", "b"]},
        within=10,
        what="the re-entered execution",
    )

    # The old run no longer travels; its page links to the latest.
    runs.nth(1).click()
    expect(page.locator("#fx-summary")).to_contain_text(old)
    expect(page.locator("#fx-travel-note")).to_contain_text("Only the latest run of a Flow ID")
    expect(page.get_by_role("button", name="Travel to beginning…")).to_be_hidden()
    expect(page.locator("#fx-events .ev-travel")).to_have_count(0)
    page.locator(f'#fx-timeline .tl-bar[data-exec="{HANDLE}-2"]').click()
    expect(page.locator("#fx-filter-text")).to_contain_text(f"{HANDLE}-2")
    expect(page.locator("#fx-travel-step")).to_be_hidden()
    page.get_by_role("link", name="Open the latest run").click()
    expect(page.locator("#fx-summary")).to_contain_text(new["runId"])


def latest_status(api: httpx.Client, flow_id: str, run_id: str) -> str:
    """Return the status of one run of a Flow ID."""
    response = api.get(f"/api/v1/flows/{flow_id}", params={"runId": run_id})
    assert response.status_code == 200, response.text
    return str(response.json()["status"])


def test_cancel_and_escape_change_nothing(page: Page, api: httpx.Client) -> None:
    flow_id = "browser-travel-cancel"
    started = api.post(f"{COUNTER}/start", params={"flowId": flow_id}).json()
    assert api.post(f"{COUNTER}/increment", params={"flowId": flow_id}, json={"by": 2}).is_success
    held = api.post(f"{COUNTER}/hold", params={"flowId": flow_id}, json={"seconds": 0.1})
    assert held.status_code == 200, held.text
    wait_until(lambda: step_closed(api, flow_id, 1), within=10, what="the hold")

    def incremented() -> bool:
        # The hold's close is in history a moment before its process frees the lock: until
        # then the increment is refused (409 RPC_LOCK_CONFLICT) and changes nothing.
        response = api.post(f"{COUNTER}/increment", params={"flowId": flow_id}, json={"by": 3})
        assert response.status_code in (200, 409), response.text
        return response.status_code == 200

    wait_until(incremented, within=10, what="the increment once the hold let go")
    before = history(api, flow_id)
    # The RPC that queued the hold: the WaitFor point's commit.
    queued = next(e for e in before if e["details"].get("rpc") == "hold_counter_lock")
    travels: list[str] = []
    page.on("request", lambda r: travels.append(r.url) if "/time-travel" in r.url else None)

    page.goto(f"/playground/#/flows/{flow_id}")
    # HoldCounterLock has no WaitFor: it is in its execute phase from the commit that queued it.
    offered = select_bar(page, "HoldCounterLock-1")
    expect(offered.get_by_role("button")).to_have_count(2)
    offered.get_by_role("button", name="Travel to before WaitFor…").click()
    dialog = travel_dialog(page)
    expect(dialog.get_by_role("heading", level=2)).to_have_text(
        f"Travel {flow_id} to before the WaitFor of HoldCounterLock-1?"
    )
    expect(dialog.locator("#travel-values-caption")).to_contain_text(
        f"event #{queued['eventId']} RPC_COMMITTED"
    )
    then = attributes(api, flow_id, started["runId"], queued["eventId"])
    assert then == {"counter": 2}
    expect_values(page, then, {"counter": 5})
    dialog.get_by_label("Reason").fill("not really")
    dialog.get_by_label("Skip writes reapply").check()
    expect(dialog.locator("#travel-body")).to_contain_text('"skipWritesReapply": true')
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()

    # From the event list, then Escape.
    page.get_by_role("button", name="Show all events").click()
    page.locator('#fx-events .event[data-event-id="2"]').get_by_role(
        "button", name="Travel to this event…"
    ).click()
    expect(dialog.get_by_role("heading", level=2)).to_have_text(f"Travel {flow_id} to event #2?")
    # A dialog opens afresh: nothing typed the last time is kept.
    expect(dialog.get_by_label("Reason")).to_have_value("")
    expect(dialog.get_by_label("Skip writes reapply")).not_to_be_checked()
    expect_values(page, attributes(api, flow_id, started["runId"], 2), {"counter": 5})
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # Nothing was sent, and nothing changed.
    expect(page.locator("#fx-action-result")).to_be_hidden()
    assert travels == []
    info = latest(api, flow_id)
    assert info["runId"] == started["runId"] and info["status"] == "RUNNING"
    assert history(api, flow_id) == before
    expect(page.locator("#fx-summary")).to_contain_text(started["runId"])


def test_travel_to_the_beginning_shows_a_refusal_then_forks_to_a_new_flow_id(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-travel-fork-source"
    taken = "browser-travel-fork-taken"
    fork = "browser-travel-fork"
    old = handle_messages(api, flow_id, ["a"])["runId"]
    assert api.post(f"{CHANNEL}/start", params={"flowId": taken}).status_code == 201
    allow_status(page, 409, f"/api/v1/flows/{flow_id}/time-travel")

    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-events .event")).to_have_count(len(history(api, flow_id)))
    page.get_by_role("button", name="Travel to beginning…").click()
    dialog = travel_dialog(page)
    expect(dialog.get_by_role("heading", level=2)).to_have_text(
        f"Travel {flow_id} to its beginning?"
    )
    expect(dialog.locator("#travel-values-caption")).to_contain_text("event #1 FLOW_STARTED")
    expect_values(page, attributes(api, flow_id, old, 1), {HANDLED: ["a"]})

    # A Flow ID with a running run refuses the fork: the Problem shows, the dialog stays.
    dialog.get_by_label(re.compile("^Fork to Flow ID")).fill(taken)
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog.locator("#travel-problem-code")).to_have_text("FLOW_ALREADY_STARTED")
    expect(dialog.locator("#travel-problem-detail")).not_to_be_empty()
    expect(dialog).to_be_visible()
    assert latest(api, taken)["status"] == "RUNNING"

    dialog.get_by_label(re.compile("^Fork to Flow ID")).fill(fork)
    expect(dialog.locator("#travel-run")).to_have_text(
        f"A new run of Flow ID {fork} starts from the point; {flow_id} and its run {old} are "
        "left as they are."
    )
    dialog.get_by_label("Skip writes reapply").check()
    with page.expect_request(f"**/api/v1/flows/{flow_id}/time-travel") as sent:
        dialog.get_by_role("button", name="Confirm").click()
    assert sent.value.post_data_json == {
        "runId": old,
        "to": {"kind": "BEGINNING"},
        "reason": "",
        "skipWritesReapply": True,
        "forkToFlowId": fork,
    }
    expect(dialog).to_be_hidden()
    expect(page.locator("#fx-title")).to_have_text(fork)
    forked = latest(api, fork)
    expect(page).to_have_url(re.compile(rf"#/flows/{fork}\?runId={forked['runId']}$"))
    expect(page.locator("#fx-summary")).to_contain_text(forked["runId"])
    expect(page.locator("#fx-action-result")).to_contain_text(f"new run {forked['runId']}")
    traveled = [e for e in history(api, fork) if e["eventType"] == "TIME_TRAVELED"]
    assert len(traveled) == 1
    assert traveled[0]["details"]["previousFlowId"] == flow_id
    assert traveled[0]["details"]["skipWritesReapply"] is True
    # The original is left as it was.
    original = latest(api, flow_id)
    assert original["runId"] == old and original["status"] == "RUNNING"
    assert attributes(api, flow_id, old) == {HANDLED: ["a"]}


def test_a_hard_delete_attribute_shows_as_kept_not_restored(page: Page, api: httpx.Client) -> None:
    flow_id = "browser-travel-hard-delete"
    key = "primitive-attribute-model-api-key"
    started = api.post(
        "/primitives/attribute/start",
        params={"flowId": flow_id},
        json={"waitSeconds": 600, "modelApiKey": "k-123"},
    )
    assert started.status_code == 201, started.text
    # AttributeStep's WaitFor holds the status locks until it has begun its Timer's wait.
    wait_until(
        lambda: any(e["eventType"] == "STEP_WAITING" for e in history(api, flow_id)),
        within=10,
        what="the Step's wait",
    )
    updated = api.post(
        "/primitives/attribute/update-status", params={"flowId": flow_id}, json={"status": "paid"}
    )
    assert updated.status_code == 200, updated.text
    run_id = started.json()["runId"]
    then = attributes(api, flow_id, run_id, 1)
    now = attributes(api, flow_id, run_id)
    # An as-of read leaves hard-delete values out: a travel neither restores nor reapplies them.
    assert key not in then and now[key] == "k-123"

    page.goto(f"/playground/#/flows/{flow_id}")
    page.get_by_role("button", name="Travel to beginning…").click()
    dialog = travel_dialog(page)
    row = dialog.locator(f'#travel-values-body tr[data-attribute="{key}"]')
    expect(row).to_have_class("tt-same")
    expect(row.locator(".tt-flag")).to_have_text("hard-delete: not restored")
    expect(row.locator(".tt-then")).to_have_text("kept as it is")
    expect(row.locator(".tt-now")).to_have_text('"k-123"')
    status = dialog.locator('#travel-values-body tr[data-attribute="primitive-attribute-status"]')
    expect(status.locator(".tt-then")).to_have_text(compact(then["primitive-attribute-status"]))
    expect(status.locator(".tt-now")).to_have_text('"paid"')
    expect(status).to_have_class("tt-diff")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert latest(api, flow_id)["runId"] == run_id


def test_the_dialog_at_1280_and_390_px_and_in_the_dark_scheme(
    laptop_page: Page, phone_page: Page, dark_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    folder = tmp_path / "screenshots"
    folder.mkdir()
    flow_id = "browser-travel-shots"
    handle_messages(api, flow_id, ["a", "a much longer message to wrap on a narrow screen"])
    saved = []
    for page, name in ((laptop_page, "1280"), (phone_page, "390"), (dark_page, "dark")):
        page.goto(f"/playground/#/flows/{flow_id}")
        offered = select_bar(page, f"{HANDLE}-2")
        width = page.viewport_size["width"] if page.viewport_size else 0
        assert_fits(page, width)
        saved.append(shoot(page, folder, f"travel-page-{name}"))
        offered.get_by_role("button", name="Travel to before Execute…").click()
        dialog = travel_dialog(page)
        expect(dialog.locator("#travel-values-body tr.tt-diff")).to_have_count(1)
        # The dialog opens at its top: its title has the focus.
        expect(dialog.get_by_role("heading", level=2)).to_be_focused()
        assert dialog.evaluate("d => d.scrollTop") == 0
        # Nothing is wider than the screen, and the dialog scrolls only up and down.
        assert_fits(page, width)
        box = dialog.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
        assert dialog.evaluate("d => d.scrollWidth <= d.clientWidth")
        # The screen as the user sees it: the dialog over the page.
        saved.append(folder / f"travel-{name}.png")
        page.screenshot(path=str(saved[-1]))
        if name == "390":
            # On a phone each Attribute is a card of labelled lines.
            expect(dialog.locator(".tt-values thead")).to_be_hidden()
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_be_hidden()

    # The dark scheme's card and difference colours.
    dark_page.locator('#fx-travel-step button[data-method="EXECUTE"]').click()
    expect(travel_dialog(dark_page).locator("tr.tt-diff")).to_have_count(1)
    colours = travel_dialog(dark_page).evaluate(
        "d => [getComputedStyle(d).backgroundColor,"
        " getComputedStyle(d.querySelector('tr.tt-diff')).backgroundColor]"
    )
    assert colours == ["rgb(27, 32, 41)", "rgb(58, 46, 20)"]
    dark_page.keyboard.press("Escape")

    print(f"screenshots: {folder}")
    if target := os.environ.get(SHOTS_ENV):
        out = Path(target)
        out.mkdir(parents=True, exist_ok=True)
        for path in saved:
            shutil.copy2(path, out / path.name)
