"""The Attribute, Channel and SubFlow primitive examples, run from the playground in real
headless Chromium."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.browser.test_live_stream import fill
from tests.browser.test_playground import open_route, send
from tests.browser.watch import allow_status

KEY = "sk-browser-not-a-real-key"
CHANNEL = "/primitives/channel"
QUEUED = '#channels .channel[data-channel="queued-messages"]'
PRIORITIZED = '#channels .channel[data-channel="prioritized-messages"]'
SUBFLOW = "/primitives/subflow"
SUBFLOWS = "#subflows .subflow"


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
    allow_status(page, 404, f"{CHANNEL}/move")
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


def child(parent: str, index: int) -> str:
    return f"SubFlow:{parent}-FanOut-1-{index}"


def test_the_subflow_example_lists_the_children_opens_one_and_goes_back_to_the_parent(
    page: Page,
) -> None:
    flow_id = "browser-subflow"
    ids = [child(flow_id, i) for i in range(4)]
    open_route(page, "subflow/start")
    fill(page, flowId=flow_id, children="4", failIndex="2")
    status, started = send(page)
    assert (status, started["flowId"], started["started"]) == (201, flow_id, True)

    page.get_by_role("link", name=re.compile("The parent's result")).click()
    expect(page.get_by_label("flowId")).to_have_value(flow_id)
    status, result = send(page)  # waits for the parent to close, so every child has closed
    assert (status, result["status"], result["runId"]) == (200, "COMPLETED", started["runId"])
    assert result["output"]["squares"] == [1, 4, None, 16]
    assert result["output"]["children"][2]["errorType"] == "SquareRefused"
    # The panel refreshed after the call: the parent's children, in index order.
    children = page.locator(SUBFLOWS)
    expect(page.get_by_role("heading", name="SubFlows")).to_be_visible()
    expect(children.locator(".sf-id")).to_have_text(ids)
    expect(children.locator(".sf-status")).to_have_text(
        ["COMPLETED", "COMPLETED", "FAILED", "COMPLETED"]
    )
    expect(page.locator("#subflows-note")).to_have_text("4 SubFlows: 3 COMPLETED, 1 FAILED.")
    expect(page.locator("#subflow-parent")).to_be_hidden()
    expect(page.locator("#state-opened")).to_be_hidden()
    expect(page.locator("#attributes")).to_contain_text('"primitive-subflow-status": "completed"')
    expect(page.locator("#history .ev-type", has_text="SUBFLOW_CLOSED")).to_have_count(4)

    page.get_by_role("link", name=re.compile("List the children")).click()
    status, listed = send(page)
    assert status == 200
    assert [c["flowId"] for c in listed["children"]] == ids
    assert {(c["parentFlowId"], c["parentRunId"]) for c in listed["children"]} == {
        (flow_id, started["runId"])
    }
    assert [c["output"] and c["output"]["square"] for c in listed["children"]] == [1, 4, None, 16]

    # Open a child: the panel shows it (all of its Attributes), and names its parent.
    page.get_by_role("button", name=f"Open SubFlow {ids[1]}").click()
    expect(page.locator("#state-flow-id")).to_have_text(ids[1])
    expect(page.locator("#state-title")).to_be_focused()
    expect(page.locator("#state-opened")).to_be_visible()
    expect(page.locator("#attributes")).to_contain_text('"primitive-subflow-square": 4')
    expect(page.locator("#attributes")).not_to_contain_text("primitive-subflow-status")
    expect(page.locator("#subflow-parent")).to_have_text(re.compile(f"^SubFlow of {flow_id}"))
    expect(children).to_have_count(0)
    expect(page.locator("#subflows-note")).to_be_hidden()
    expect(page.locator("#history .ev-type", has_text="FLOW_STARTED")).to_have_count(1)
    # The form still names the parent: the panel opened the child on its own.
    expect(page.get_by_label("flowId")).to_have_value(flow_id)

    page.get_by_role("button", name=f"Open parent Flow {flow_id}").click()
    expect(page.locator("#state-flow-id")).to_have_text(flow_id)
    expect(page.locator("#state-opened")).to_be_hidden()
    expect(page.locator("#subflow-parent")).to_be_hidden()
    expect(children.locator(".sf-id")).to_have_text(ids)
    expect(page.locator("#attributes")).to_contain_text('"primitive-subflow-status": "completed"')

    # The failed child has no Attribute set; Back returns to the form's Flow.
    page.get_by_role("button", name=f"Open SubFlow {ids[2]}").click()
    expect(page.locator("#state-flow-id")).to_have_text(ids[2])
    expect(page.locator("#attributes-note")).to_contain_text("No Attribute is set yet.")
    page.get_by_role("button", name="Back to the form's Flow").click()
    expect(page.locator("#state-flow-id")).to_have_text(flow_id)
    expect(children).to_have_count(4)

    # A call acts on the form's Flow, so the panel goes back to it.
    page.get_by_role("button", name=f"Open SubFlow {ids[3]}").click()
    expect(page.locator("#state-flow-id")).to_have_text(ids[3])
    send(page)
    expect(page.locator("#state-flow-id")).to_have_text(flow_id)
    expect(page.locator("#state-opened")).to_be_hidden()

    # describeFlow of a child names the parent run too.
    page.get_by_role("link", name=re.compile("Describe a child")).click()
    fill(page, childFlowId=ids[0])
    status, described = send(page)
    assert status == 200
    assert (described["parentFlowId"], described["parentRunId"]) == (flow_id, started["runId"])

    # A Flow with neither a parent nor children shows no SubFlows box.
    page.get_by_role("link", name=re.compile("Timer status")).click()
    expect(page.locator("#subflows-box")).to_be_hidden()


def test_the_subflows_box_fits_a_375px_wide_screen(narrow_page: Page, api: httpx.Client) -> None:
    page = narrow_page
    flow_id = "browser-subflow-narrow-with-a-rather-long-flow-id-for-wrapping"
    started = api.post(f"{SUBFLOW}/start", params={"flowId": flow_id}, json={"children": 12})
    assert started.status_code == 201, started.text
    done = api.get(f"{SUBFLOW}/result", params={"flowId": flow_id, "waitSeconds": 10})
    assert done.json()["status"] == "COMPLETED", done.text
    open_route(page, "subflow/children")
    fill(page, flowId=flow_id)
    page.get_by_role("button", name="Refresh").click()
    children = page.locator(SUBFLOWS)
    # Numeric order: index 2 comes before index 10.
    expect(children.locator(".sf-id")).to_have_text([child(flow_id, i) for i in range(12)])
    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,"
        " view: document.documentElement.clientWidth})"
    )
    assert widths["view"] == 375
    assert widths["doc"] <= widths["view"] and widths["body"] <= widths["view"], widths
    for control in (
        page.locator("#subflows-box"),
        children.first,
        children.first.locator(".sf-id"),
        children.first.locator(".sf-status"),
        children.first.get_by_role("button"),
    ):
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    # The buttons work by keyboard too, in both directions.
    children.nth(10).get_by_role("button").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#state-flow-id")).to_have_text(child(flow_id, 10))
    parent = page.get_by_role("button", name=f"Open parent Flow {flow_id}")
    box = parent.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
    parent.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#state-flow-id")).to_have_text(flow_id)

    # A new parent run with fewer children: the two it did not start are the earlier run's.
    again = api.post(f"{SUBFLOW}/start", params={"flowId": flow_id}, json={"children": 10})
    assert again.status_code == 201, again.text
    done = api.get(f"{SUBFLOW}/result", params={"flowId": flow_id, "waitSeconds": 10})
    assert done.json()["runId"] == again.json()["runId"], done.text
    page.get_by_role("button", name="Refresh").click()
    earlier = children.filter(has=page.locator(".sf-earlier"))
    expect(earlier.locator(".sf-id")).to_have_text([child(flow_id, 10), child(flow_id, 11)])
    expect(earlier.first.locator(".sf-earlier")).to_have_text("from an earlier run")
    expect(children).to_have_count(12)
