"""The Attribute primitive example, run from the playground in real headless Chromium."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.test_live_stream import fill
from tests.browser.test_playground import open_route, send

KEY = "sk-browser-not-a-real-key"


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
