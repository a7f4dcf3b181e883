"""The playground, driven in real headless Chromium against a real server."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.browser.watch import allow_status

CATALOG = Path(__file__).resolve().parents[2] / "playground" / "catalog.json"
EXAMPLE = "sequentially-chunked-attribute-map"
PREFIX = f"/patterns/{EXAMPLE}"
START = f"{EXAMPLE}/start"
REGISTER = f"{EXAMPLE}/register"
SUBSCRIBERS = f"{EXAMPLE}/subscribers"


def open_route(page: Page, route: str) -> None:
    """Open the playground on one catalog route and wait for its form."""
    page.goto(f"/playground/#{route}")
    expect(page.locator("#route-form")).to_be_visible()
    expect(page.locator(f'.route-link[data-route="{route}"]')).to_have_attribute(
        "aria-current", "page"
    )


def send(page: Page) -> tuple[int, Any]:
    """Press Send and return the status and JSON body the page shows."""
    page.get_by_role("button", name="Send request").click()
    # The page shows "Sending…" from the click until the answer is rendered.
    status = page.locator("#status")
    expect(status).to_have_text(re.compile(r"^\d{3} "))
    code = int((status.text_content() or "").split()[0])
    return code, json.loads(page.locator("#body").text_content() or "null")


def start_flow(api: httpx.Client, flow_id: str) -> None:
    response = api.post(f"{PREFIX}/start", params={"flowId": flow_id})
    assert response.status_code == 201, response.text


def test_root_redirects_to_the_playground(page: Page, server: str) -> None:
    response = page.goto("/")
    assert response is not None and response.ok
    assert response.request.redirected_from is not None
    assert page.url == f"{server}/playground/"
    expect(page).to_have_title("dexlite playground")


def test_page_lists_every_route_of_the_catalog(page: Page) -> None:
    catalog = json.loads(CATALOG.read_text())
    expected = {
        (route["method"], route["path"])
        for example in catalog["examples"]
        for route in example["routes"]
    }
    assert {
        ("POST", f"{PREFIX}/start"),
        ("POST", f"{PREFIX}/register"),
        ("GET", f"{PREFIX}/subscribers"),
    } <= expected
    page.goto("/playground/")
    links = page.locator(".route-link")
    expect(links).to_have_count(len(expected))
    shown = {
        (link.locator(".method").inner_text(), link.locator(".route-path").inner_text())
        for link in links.all()
    }
    assert shown == expected
    expect(page.get_by_role("heading", name="Sequentially Chunked AttributeMap")).to_be_visible()


def test_an_example_added_to_the_catalog_runs_without_code_changes(page: Page) -> None:
    # A catalog entry with path, JSON body and typed params, served in place of the real file.
    catalog = json.loads(CATALOG.read_text())
    flow_id = {"name": "flowId", "in": "path", "default": "browser-extended"}
    catalog["examples"].append(
        {
            "id": "engine-api",
            "kind": "primitive",
            "title": "Engine API",
            "description": "The generic REST API.",
            "flow": {"flowIdParam": "flowId", "defaultFlowId": "", "attributes": []},
            "routes": [
                {
                    "id": "start",
                    "title": "Start any Flow",
                    "method": "POST",
                    "path": "/api/v1/flows",
                    "params": [
                        {"name": "flowType", "in": "body", "default": "ChunkedSubscriberFlow"},
                        {"name": "flowId", "in": "body", "default": "browser-extended"},
                        {"name": "input", "in": "body", "type": "json", "default": None},
                        {
                            "name": "options",
                            "in": "body",
                            "type": "json",
                            "default": {"timeoutSeconds": 600},
                        },
                    ],
                },
                {
                    "id": "describe",
                    "title": "Describe a Flow",
                    "method": "GET",
                    "path": "/api/v1/flows/{flowId}",
                    "params": [flow_id, {"name": "runId", "in": "query", "default": ""}],
                },
            ],
        }
    )
    page.route(
        "**/playground/catalog.json",
        lambda route: route.fulfill(json=catalog),
    )
    open_route(page, "engine-api/start")
    expect(page.locator(".route-link")).to_have_count(
        sum(len(example["routes"]) for example in catalog["examples"])
    )
    expect(page.get_by_label("options")).to_have_value('{\n  "timeoutSeconds": 600\n}')
    with page.expect_request("**/api/v1/flows") as sent:
        status, body = send(page)
    assert (status, body["flowId"], body["started"]) == (201, "browser-extended", True)
    assert json.loads(sent.value.post_data or "") == {
        "flowType": "ChunkedSubscriberFlow",
        "flowId": "browser-extended",
        "input": None,
        "options": {"timeoutSeconds": 600},
    }

    page.get_by_role("link", name=re.compile("Describe a Flow")).click()
    status, info = send(page)
    assert (status, info["flowId"], info["status"]) == (200, "browser-extended", "RUNNING")
    # The path param is filled in and the empty optional query param is left out.
    assert "/api/v1/flows/browser-extended'" in page.locator("#curl").inner_text()
    expect(page.locator("#state-flow-id")).to_have_text("browser-extended")
    expect(page.locator("#history .ev-type")).to_have_text(["FLOW_STARTED"])


def test_start_register_and_list_show_real_responses_and_flow_state(page: Page) -> None:
    # The only test on the default Flow ID, so the sequences start at 1.
    open_route(page, START)
    assert page.get_by_label("flowId").input_value() == EXAMPLE
    status, body = send(page)
    assert (status, body["started"], body["flowId"]) == (201, True, EXAMPLE)
    status, again = send(page)
    assert (status, again["started"], again["runId"]) == (200, False, body["runId"])

    # The start commits the log's initial layout: sequence 1, no archive yet.
    expect(page.locator("#attributes-note")).to_contain_text(f"Run ID {body['runId']}")
    expect(page.locator("#attributes")).to_contain_text('"nextSequence": 1')
    expect(page.locator("#history .ev-type")).to_have_text(["FLOW_STARTED"])

    page.get_by_role("link", name=re.compile("Register a subscriber")).click()
    expect(page.locator("#request-card")).to_be_hidden()
    page.get_by_label("email").fill("grace@example.com")
    page.get_by_label("name").fill("Grace Hopper")
    status, first = send(page)
    assert (status, first["sequence"], first["email"]) == (201, 1, "grace@example.com")
    attributes = page.locator("#attributes")
    expect(attributes).to_contain_text('"SubscriberArchiveState": {\n    "nextSequence": 2')
    page.get_by_label("email").fill("alan@example.com")
    page.get_by_label("name").fill("Alan Turing")
    status, second = send(page)
    assert (status, second["sequence"], second["name"]) == (201, 2, "Alan Turing")
    expect(attributes).to_contain_text('"nextSequence": 3')
    expect(attributes).to_contain_text("grace@example.com")
    expect(page.locator("#history .ev-type")).to_have_text(
        ["RPC_COMMITTED", "RPC_COMMITTED", "FLOW_STARTED"]
    )

    page.get_by_role("link", name=re.compile("List subscribers")).click()
    assert page.get_by_label("pageToken").input_value() == "current"
    status, listing = send(page)
    assert status == 200
    assert [s["sequence"] for s in listing["subscribers"]] == [2, 1]
    assert [s["email"] for s in listing["subscribers"]] == ["alan@example.com", "grace@example.com"]
    assert listing["nextPageToken"] == ""
    expect(page.locator("#next-page-bar")).to_be_hidden()
    expect(page.locator("#problem")).to_be_hidden()
    if shot := os.environ.get("PLAYGROUND_SCREENSHOT"):
        page.screenshot(path=shot, full_page=True)


def test_register_before_start_shows_the_problem_code(page: Page) -> None:
    allow_status(page, 404, f"{PREFIX}/register")
    open_route(page, REGISTER)
    page.get_by_label("flowId").fill("browser-never-started")
    status, body = send(page)
    assert (status, body["code"]) == (404, "FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    expect(page.locator("#problem-code")).to_have_text("FLOW_NOT_ACTIVE_OR_NOT_FOUND")
    expect(page.locator("#history-note")).to_contain_text("No Flow with this ID yet")
    expect(page.locator("#state-flow-id")).to_have_text("browser-never-started")
    # The other routes of the example now act on the same Flow.
    page.get_by_role("link", name=re.compile("List subscribers")).click()
    expect(page.get_by_label("flowId")).to_have_value("browser-never-started")


def test_malformed_page_token_shows_invalid_page_token(page: Page, api: httpx.Client) -> None:
    start_flow(api, "browser-bad-token")
    allow_status(page, 400, f"{PREFIX}/subscribers")
    allow_status(page, 404, f"{PREFIX}/subscribers")
    open_route(page, SUBSCRIBERS)
    page.get_by_label("flowId").fill("browser-bad-token")
    page.get_by_label("pageToken").fill("not-a-token")
    status, body = send(page)
    assert (status, body["code"]) == (400, "INVALID_PAGE_TOKEN")
    expect(page.locator("#status")).to_have_class(re.compile(r"\berr\b"))
    expect(page.locator("#problem")).to_be_visible()
    expect(page.locator("#problem-code")).to_have_text("INVALID_PAGE_TOKEN")
    expect(page.locator("#problem-detail")).to_have_text(body["detail"])

    # Well formed, on a chunk boundary, but never archived.
    page.get_by_label("pageToken").fill("00000000000000000101")
    status, body = send(page)
    assert (status, body["code"]) == (404, "PAGE_NOT_FOUND")
    expect(page.locator("#problem-code")).to_have_text("PAGE_NOT_FOUND")


def test_curl_line_matches_the_request_sent(page: Page, api: httpx.Client, server: str) -> None:
    start_flow(api, "browser-curl")
    open_route(page, REGISTER)
    page.get_by_label("Bearer token").fill("s3cret")
    page.get_by_label("flowId").fill("browser-curl")
    page.get_by_label("email").fill("miles@example.com")
    # A quote in a value is what shell quoting most easily gets wrong.
    page.get_by_label("name").fill("Miles O'Brien")
    with page.expect_request(lambda r: r.url.startswith(f"{server}{PREFIX}/")) as sent:
        status, body = send(page)
    assert (status, body["name"]) == (201, "Miles O'Brien")
    request = sent.value

    argv = shlex.split(page.locator("#curl").inner_text())
    assert argv[:4] == ["curl", "-i", "-X", "POST"]
    assert argv[4] == request.url == f"{server}{PREFIX}/register?flowId=browser-curl"
    headers = dict(argv[i + 1].split(": ", 1) for i, flag in enumerate(argv) if flag == "-H")
    sent_headers = request.all_headers()
    for name, value in headers.items():
        assert sent_headers[name.lower()] == value
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/json"
    assert argv[-2] == "--data-raw"
    assert argv[-1] == request.post_data
    assert json.loads(argv[-1]) == {"email": "miles@example.com", "name": "Miles O'Brien"}


def test_next_page_button_fills_the_page_token_and_loads_the_older_chunk(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-paging"
    start_flow(api, flow_id)
    for n in range(1, 102):  # one full chunk of 100 is archived, 101 starts the new current
        response = api.post(
            f"{PREFIX}/register",
            params={"flowId": flow_id},
            json={"email": f"s{n}@example.com", "name": f"S{n}"},
        )
        assert response.status_code == 201, response.text

    # Keyboard only: follow the route link, then submit the form with Enter.
    page.goto("/playground/")
    page.locator(f'.route-link[data-route="{SUBSCRIBERS}"]').focus()
    page.keyboard.press("Enter")
    expect(page.get_by_label("pageToken")).to_be_visible()
    page.get_by_label("flowId").fill(flow_id)
    page.get_by_label("flowId").press("Enter")
    expect(page.locator("#status")).to_have_text(re.compile(r"^200 "))
    newest = json.loads(page.locator("#body").inner_text())
    assert [s["sequence"] for s in newest["subscribers"]] == [101]
    assert newest["nextPageToken"] == "00000000000000000001"
    expect(page.locator("#attributes")).to_contain_text(
        '"newestArchivedToken": "00000000000000000001"'
    )

    next_page = page.get_by_role("button", name="Next page")
    expect(next_page).to_be_visible()
    next_page.click()
    expect(page.get_by_label("pageToken")).to_have_value("00000000000000000001")
    expect(page.locator("#status")).to_have_text(re.compile(r"^200 "))
    older = json.loads(page.locator("#body").inner_text())
    assert [s["sequence"] for s in older["subscribers"]] == list(range(100, 0, -1))
    assert older["nextPageToken"] == ""
    expect(next_page).to_be_hidden()
    assert "pageToken=00000000000000000001" in page.locator("#curl").inner_text()


def test_page_fits_a_375px_wide_screen(narrow_page: Page, api: httpx.Client) -> None:
    page = narrow_page
    start_flow(api, "browser-narrow")
    api.post(
        f"{PREFIX}/register",
        params={"flowId": "browser-narrow"},
        json={"email": "a-rather-long-address-for-wrapping@example.com", "name": "N" * 120},
    )
    open_route(page, SUBSCRIBERS)
    page.get_by_label("flowId").fill("browser-narrow")
    status, body = send(page)
    assert status == 200 and len(body["subscribers"]) == 1
    expect(page.locator("#attributes")).to_contain_text("SubscriberArchiveState")
    expect(page.locator("#history .event")).to_have_count(2)

    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,"
        " view: document.documentElement.clientWidth})"
    )
    assert widths["view"] == 375
    assert widths["doc"] <= widths["view"] and widths["body"] <= widths["view"], widths
    for control in (
        page.get_by_role("button", name="Send request"),
        page.locator("#curl"),
        page.get_by_label("pageToken"),
        page.locator("#attributes"),
    ):
        box = control.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, box
