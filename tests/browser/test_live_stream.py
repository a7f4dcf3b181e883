"""The playground's live Stream view and the two primitive examples, in real headless Chromium."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.browser.test_playground import open_route, send
from tests.browser.watch import allow_status

STREAM = "/primitives/stream"
MESSAGES = "#live-stream .stream-message"


def start_progress(api: httpx.Client, flow_id: str, sections: int) -> Any:
    """Start a ProgressFlow with no delay and return its finished result."""
    response = api.post(
        f"{STREAM}/start",
        params={"flowId": flow_id},
        json={"sections": sections, "delaySeconds": 0},
    )
    assert response.status_code == 201, response.text
    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    return done


def fill(page: Page, **values: str) -> None:
    """Fill form fields by label; a label also names where the param goes ("flowId query")."""
    for name, value in values.items():
        page.get_by_label(re.compile(rf"^{name}\b")).fill(value)


def test_stream_messages_appear_live_while_the_flow_runs_without_a_reload(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-live"
    open_route(page, "stream/start")
    fill(page, flowId=flow_id, sections="6", delaySeconds="0.3")
    page.evaluate("window.notReloaded = true")
    status, body = send(page)
    assert (status, body["flowId"], body["started"]) == (201, flow_id, True)

    messages = page.locator(MESSAGES)
    expect(messages.first).to_contain_text("section 1 of 6 done")
    # The first message is on the page while the Step is still writing the others.
    running = api.get(f"/api/v1/flows/{flow_id}").json()
    assert running["status"] == "RUNNING"
    expect(messages).to_have_count(6)
    expect(page.locator("#live-stream .stream-state")).to_have_text("Following live · 6 messages")

    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10}).json()
    source = f"#{done['completions'][0]['stepExecutionId']}"
    expect(messages.locator(".sm-value")).to_have_text(
        [f"section {n} of 6 done" for n in range(1, 7)]
    )
    expect(messages.locator(".sm-source")).to_have_text([source] * 6)
    assert page.evaluate("window.notReloaded") is True


def test_the_live_view_follows_a_new_flow_id_and_closes_the_previous_follow(
    page: Page, api: httpx.Client
) -> None:
    start_progress(api, "browser-live-a", 2)
    start_progress(api, "browser-live-b", 3)
    open_route(page, "stream/messages")
    fill(page, flowId="browser-live-a")
    status, listed = send(page)
    assert status == 200 and len(listed["messages"]) == 2
    values = page.locator(f"{MESSAGES} .sm-value")
    # Oldest first, as they were written (the listing is newest first).
    expect(values).to_have_text(["section 1 of 2 done", "section 2 of 2 done"])

    with page.expect_event(
        "requestfailed", lambda r: "/browser-live-a/progress/events" in r.url
    ) as closed:
        fill(page, flowId="browser-live-b")
        send(page)
    assert closed.value.failure == "net::ERR_ABORTED"
    expect(values).to_have_text([f"section {n} of 3 done" for n in range(1, 4)])

    # Another example declares no Stream: the box goes away and its follow is closed.
    with page.expect_event("requestfailed", lambda r: "/browser-live-b/" in r.url):
        page.get_by_role("link", name=re.compile("List subscribers")).click()
    expect(page.locator("#live-stream")).to_be_hidden()


def test_with_a_bearer_token_the_live_view_follows_with_fetch_and_sends_the_token(
    page: Page, server: str
) -> None:
    flow_id = "browser-live-token"
    open_route(page, "stream/start")
    events = f"{server}/api/v1/streams/ProgressFlow/{flow_id}/progress/events"
    with page.expect_request(lambda r: r.url.startswith(events)) as followed:
        fill(page, **{"Bearer token": "s3cret"})
        fill(page, flowId=flow_id, sections="3", delaySeconds="0")
        status, _ = send(page)
    assert status == 201
    assert followed.value.resource_type == "fetch"
    assert followed.value.all_headers()["authorization"] == "Bearer s3cret"
    expect(page.locator(f"{MESSAGES} .sm-value")).to_have_text(
        [f"section {n} of 3 done" for n in range(1, 4)]
    )


def test_the_report_example_starts_and_stops_from_the_page(page: Page) -> None:
    flow_id = "browser-report"
    open_route(page, "rpc-canceling-steps/start")
    fill(page, flowId=flow_id, sections="20", sectionSeconds="0.1")
    status, started = send(page)
    assert (status, started["started"]) == (201, True)
    expect(page.locator("#attributes")).to_contain_text('"report-status": "generating"')
    # The first section's progress message shows GenerateReport is at work.
    expect(page.locator(f"{MESSAGES} .sm-value").first).to_have_text("1")

    page.get_by_role("link", name=re.compile("Stop the report")).click()
    expect(page.get_by_label("flowId")).to_have_value(flow_id)
    status, stopped = send(page)
    assert (status, stopped) == (200, {"stopped": True})

    page.get_by_role("link", name=re.compile("Report status")).click()
    for _ in range(50):  # FinishReportStop commits just after the RPC
        status, seen = send(page)
        if seen["flowStatus"] != "RUNNING":
            break
    assert status == 200
    assert seen == {
        "flowId": flow_id,
        "runId": started["runId"],
        "flowStatus": "COMPLETED",
        "reportStatus": "stopped",
        "report": None,
    }
    expect(page.locator("#attributes")).to_contain_text('"report-status": "stopped"')
    assert page.locator(MESSAGES).count() < 20

    page.get_by_role("link", name=re.compile("Stop the report")).click()
    status, again = send(page)
    assert (status, again) == (200, {"stopped": False})
    allow_status(page, 404, "/primitives/rpc-canceling-steps/stop")
    fill(page, flowId="browser-report-missing")
    status, missing = send(page)
    assert (status, missing["code"]) == (404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    expect(page.locator("#problem-code")).to_have_text("FLOW_NOT_ACTIVE_OR_NOT_FOUND")


def test_the_live_stream_box_fits_a_375px_wide_screen(narrow_page: Page, api: httpx.Client) -> None:
    page = narrow_page
    start_progress(api, "browser-live-narrow", 4)
    open_route(page, "stream/messages")
    fill(page, flowId="browser-live-narrow")
    status, _ = send(page)
    assert status == 200
    messages = page.locator(MESSAGES)
    expect(messages).to_have_count(4)
    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,"
        " view: document.documentElement.clientWidth})"
    )
    assert widths["view"] == 375
    assert widths["doc"] <= widths["view"] and widths["body"] <= widths["view"], widths
    for control in (page.locator("#live-stream"), messages.last, messages.last.locator("time")):
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    assert json.loads(page.locator("#body").inner_text())["nextPageToken"] == ""
