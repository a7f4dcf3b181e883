"""The Attribute and Channel primitive examples, run from the playground in real headless
Chromium."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.browser.test_live_stream import fill
from tests.browser.test_playground import open_route, send

KEY = "sk-browser-not-a-real-key"
CHANNEL = "/primitives/channel"
QUEUED = '#channels .channel[data-channel="queued-messages"]'
PRIORITIZED = '#channels .channel[data-channel="prioritized-messages"]'


def test_the_attribute_example_starts_and_reads_its_attributes_from_the_page(page: Page) -> None:
    flow_id = "browser-attribute"
    open_route(page, "attribute/start")
    fill(page, flowId=flow_id, note="from the page", waitSeconds="1", modelApiKey=f'"{KEY}"')
    status, started = send(page)
    assert (status, started["flowId"], started["started"]) == (201, flow_id, True)
    # The initial Attributes committed with the start; the key is still there while it waits.
    attributes = page.locator("#attributes")
    expect(attributes).to_contain_text('"primitive-attribute-status": "pending"')
    expect(attributes).to_contain_text(f'"primitive-attribute-model-api-key": "{KEY}"')

    page.get_by_role("link", name=re.compile("Read the Attributes")).click()
    expect(page.get_by_label("flowId")).to_have_value(flow_id)
    for _ in range(100):  # AttributeStep completes once its one-second Timer fires
        status, seen = send(page)
        if seen["status"] != "pending":
            break
    assert status == 200
    assert seen == {
        "flowId": flow_id,
        "runId": started["runId"],
        "status": "completed",
        "payment": None,
        "modelApiKey": None,
    }
    assert (
        f"/primitives/attribute/attributes?flowId={flow_id}'" in page.locator("#curl").inner_text()
    )
    # The deleted hard-delete key is gone from the state panel too.
    expect(attributes).to_contain_text('"primitive-attribute-status": "completed"')
    expect(attributes).not_to_contain_text("model-api-key")


def send_for_status(page: Page) -> tuple[int, str]:
    """Press Send and return the status and the body text the page shows (204 has none)."""
    page.get_by_role("button", name="Send request").click()
    status = page.locator("#status")
    expect(status).to_have_text(re.compile(r"^\d{3} "))
    return int((status.text_content() or "").split()[0]), page.locator("#body").inner_text()


def pending_values(channel: Locator) -> Locator:
    return channel.locator(".channel-message .cm-value")


def test_the_channel_example_moves_a_queued_message_and_shows_both_queues(page: Page) -> None:
    flow_id = "browser-channel"
    open_route(page, "channel/start")
    fill(page, flowId=flow_id)
    status, started = send(page)
    assert (status, started["flowId"], started["started"]) == (201, flow_id, True)
    queued, prioritized = page.locator(QUEUED), page.locator(PRIORITIZED)
    expect(page.get_by_role("heading", name=re.compile("^Channels"))).to_be_visible()
    expect(queued.locator(".channel-size")).to_have_text("0 pending")
    expect(prioritized.locator(".channel-size")).to_have_text("0 pending")
    expect(page.locator("#attributes")).to_contain_text('"primitive-channel-handled": []')

    page.get_by_role("link", name=re.compile("Queue a message")).click()
    expect(page.get_by_label("flowId")).to_have_value(flow_id)
    ids = []
    for value in ("first", "second"):
        fill(page, value=value)
        status, queued_message = send(page)
        assert (status, queued_message["value"]) == (201, value)
        ids.append(queued_message["messageId"])
    expect(queued.locator(".channel-size")).to_have_text("2 pending")
    expect(pending_values(queued)).to_have_text(["first", "second"])
    expect(queued.locator(".cm-id")).to_have_text(ids)
    expect(page.locator("#channels-note")).to_have_text("2 pending messages.")
    # The queue route takes no message ID, so there is nothing to fill.
    expect(page.get_by_role("button", name=re.compile("^Use message ID"))).to_have_count(0)

    page.get_by_role("link", name=re.compile("Move a message")).click()
    page.get_by_role("button", name=f"Use message ID {ids[1]}").click()
    expect(page.get_by_label(re.compile(r"^messageId\b"))).to_have_value(ids[1])
    expect(page.get_by_label(re.compile(r"^messageId\b"))).to_be_focused()
    status, moved = send(page)
    assert (status, moved) == (200, {"messageId": ids[1]})

    page.get_by_role("link", name=re.compile("Handled messages")).click()
    for _ in range(100):  # HandlePrioritizedMessage consumes it just after the move commits
        status, seen = send(page)
        if seen["handled"]:
            break
    assert (status, seen["handled"]) == (200, ["second"])
    # Refreshed after the Step consumed it: one message left queued, none prioritized.
    expect(pending_values(queued)).to_have_text(["first"])
    expect(prioritized.locator(".channel-size")).to_have_text("0 pending")
    expect(prioritized).to_contain_text("No pending message.")
    expect(page.locator("#attributes")).to_contain_text('"second"')

    # A concurrent consumer takes the first message; the move of it then commits nothing.
    page.get_by_role("link", name=re.compile("Delete a queued message")).click()
    page.get_by_role("button", name=f"Use message ID {ids[0]}").click()
    status, body = send_for_status(page)
    assert (status, body) == (204, "(empty body)")
    assert f"/channels/queued-messages/messages/{ids[0]}'" in page.locator("#curl").inner_text()
    expect(queued.locator(".channel-size")).to_have_text("0 pending")

    page.get_by_role("link", name=re.compile("Move a message")).click()
    fill(page, messageId=ids[0])
    status, refused = send(page)
    assert (status, refused["code"]) == (404, "CHANNEL_MESSAGE_NOT_FOUND")
    expect(page.locator("#problem-code")).to_have_text("CHANNEL_MESSAGE_NOT_FOUND")
    expect(queued.locator(".channel-size")).to_have_text("0 pending")
    expect(prioritized.locator(".channel-size")).to_have_text("0 pending")
    expect(page.locator("#channels-note")).to_have_text("0 pending messages.")

    page.get_by_role("link", name=re.compile("List both queues")).click()
    status, listed = send(page)
    assert status == 200
    assert listed["queued"] == {"size": 0, "messages": []}
    assert listed["prioritized"] == {"size": 0, "messages": []}

    # Another example declares no Channel: the box goes away.
    page.get_by_role("link", name=re.compile("Timer status")).click()
    expect(page.locator("#channels-box")).to_be_hidden()


def test_the_channels_box_fits_a_375px_wide_screen(narrow_page: Page, api: httpx.Client) -> None:
    page = narrow_page
    flow_id = "browser-channel-narrow"
    assert api.post(f"{CHANNEL}/start", params={"flowId": flow_id}).status_code == 201
    for value in ("a-rather-long-message-for-wrapping-" * 5, "short"):
        queued = api.post(f"{CHANNEL}/queue", params={"flowId": flow_id}, json={"value": value})
        assert queued.status_code == 201, queued.text
    open_route(page, "channel/move")
    fill(page, flowId=flow_id)
    page.get_by_role("button", name="Refresh").click()
    messages = page.locator(f"{QUEUED} .channel-message")
    expect(messages).to_have_count(2)
    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,"
        " view: document.documentElement.clientWidth})"
    )
    assert widths["view"] == 375
    assert widths["doc"] <= widths["view"] and widths["body"] <= widths["view"], widths
    for control in (
        page.locator("#channels-box"),
        messages.first,
        messages.first.locator(".cm-id"),
        messages.first.get_by_role("button", name=re.compile("^Use message ID")),
        messages.last.locator("time"),
    ):
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    # The button works by keyboard too.
    messages.last.get_by_role("button").focus()
    page.keyboard.press("Enter")
    listed = api.get(f"{CHANNEL}/queues", params={"flowId": flow_id}).json()
    last_id = listed["queued"]["messages"][-1]["messageId"]
    expect(page.get_by_label(re.compile(r"^messageId\b"))).to_have_value(last_id)
