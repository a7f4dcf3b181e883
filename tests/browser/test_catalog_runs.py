"""Every example of the catalog, started from clicks in real headless Chromium."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_playground import CATALOG, PREFIX, send

EXAMPLES: list[dict[str, Any]] = json.loads(CATALOG.read_text())["examples"]
#: The examples whose start route starts a Flow (the Schedule example's creates a Schedule).
STARTS = [
    example
    for example in EXAMPLES
    if "flow" in example and any(r["id"] == "start" for r in example["routes"])
]


def click_route(page: Page, route: str) -> None:
    """Follow a route's link in the catalog and wait for its form."""
    page.locator(f'.route-link[data-route="{route}"]').click()
    expect(page.locator(f'.route-link[data-route="{route}"]')).to_have_attribute(
        "aria-current", "page"
    )


def test_every_example_has_a_start_route() -> None:
    for example in EXAMPLES:
        assert any(r["id"] == "start" for r in example["routes"]), example["id"]
    assert {example["id"] for example in EXAMPLES if "flow" not in example} == {"schedule"}


def test_the_schedule_example_creates_its_schedule_from_a_click(
    page: Page, api: httpx.Client
) -> None:
    page.goto("/playground/")
    click_route(page, "schedule/start")
    page.get_by_label(re.compile(r"^everySeconds\b")).fill("86400")  # nothing fires meanwhile
    try:
        status, body = send(page)
        assert status == 201, body
        assert (body["scheduleId"], body["everySeconds"], body["overlap"]) == (
            "primitive-schedule",
            86400,
            "SKIP",
        )
        assert api.get("/api/v1/schedules/primitive-schedule").status_code == 200
    finally:
        api.delete("/api/v1/schedules/primitive-schedule")


@pytest.mark.parametrize("example", STARTS, ids=[example["id"] for example in STARTS])
def test_every_example_starts_its_flow_from_a_click(
    page: Page, api: httpx.Client, example: dict[str, Any]
) -> None:
    flow_id = f"browser-start-{example['id']}"
    page.goto("/playground/")
    click_route(page, f"{example['id']}/start")
    page.get_by_label(re.compile(rf"^{example['flow']['flowIdParam']}\b")).fill(flow_id)
    status, body = send(page)
    assert status == 201, body
    assert (body["flowId"], body["started"]) == (flow_id, True)
    described = api.get(f"/api/v1/flows/{flow_id}").json()
    assert described["runId"] == body["runId"]
    # The state panel shows the new run; the explorer link names it.
    expect(page.locator("#attributes-note")).to_contain_text(f"Run ID {body['runId']}")
    expect(
        page.get_by_role("link", name=f"Open {flow_id} in the Flows explorer")
    ).to_have_attribute("href", f"#/flows/{flow_id}?runId={body['runId']}")


def test_the_chunked_pattern_registers_three_subscribers_and_pages_back(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-chunked-three"
    page.goto("/playground/")
    click_route(page, "sequentially-chunked-attribute-map/start")
    page.get_by_label("flowId").fill(flow_id)
    status, _ = send(page)
    assert status == 201

    click_route(page, "sequentially-chunked-attribute-map/register")
    expect(page.get_by_label("flowId")).to_have_value(flow_id)
    people = [
        ("ada@example.com", "Ada"),
        ("grace@example.com", "Grace"),
        ("alan@example.com", "Alan"),
    ]
    for sequence, (email, name) in enumerate(people, start=1):
        page.get_by_label("email").fill(email)
        page.get_by_label("name").fill(name)
        status, registered = send(page)
        assert (status, registered["sequence"], registered["email"]) == (201, sequence, email)
    expect(page.locator("#attributes")).to_contain_text('"nextSequence": 4')

    click_route(page, "sequentially-chunked-attribute-map/subscribers")
    status, listing = send(page)
    assert status == 200
    assert [s["email"] for s in listing["subscribers"]] == [e for e, _ in reversed(people)]
    assert listing["nextPageToken"] == ""
    expect(page.get_by_role("button", name="Next page")).to_be_hidden()

    # 98 more fill the first chunk of 100 and start the next: the three are now one page back.
    for n in range(4, 102):
        response = api.post(
            f"{PREFIX}/register",
            params={"flowId": flow_id},
            json={"email": f"s{n}@example.com", "name": f"S{n}"},
        )
        assert response.status_code == 201, response.text
    status, newest = send(page)
    assert [s["sequence"] for s in newest["subscribers"]] == [101]
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_label("pageToken")).to_have_value("00000000000000000001")
    expect(page.locator("#status")).to_have_text(re.compile(r"^200 "))
    older = json.loads(page.locator("#body").inner_text())
    assert [s["sequence"] for s in older["subscribers"]] == list(range(100, 0, -1))
    assert [s["email"] for s in older["subscribers"][-3:]] == [e for e, _ in reversed(people)]
    expect(page.get_by_role("button", name="Next page")).to_be_hidden()
