"""The playground's Flows explorer, driven in real headless Chromium against a real server."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.browser.test_live_stream import fill, start_progress
from tests.browser.test_playground import send
from tests.browser.watch import allow_status
from tests.support.waiting import wait_until

SHIPMENTS = "/primitives/client-apis"
COUNTER = "/primitives/rpc"
CHANNEL = "/primitives/channel"


def search(
    page: Page, query: str, *, flow_type: str = "", status: str = "", size: str = ""
) -> None:
    """Fill the explorer's search form and submit it."""
    page.get_by_label(re.compile("^Query")).fill(query)
    page.get_by_label("Flow type").select_option(flow_type)
    page.get_by_label("Status", exact=True).select_option(status)
    if size:
        page.get_by_label("Per page").select_option(size)
    page.get_by_role("button", name="Search", exact=True).click()


def rows(page: Page) -> Locator:
    """Return the results table's rows."""
    return page.locator("#results-body tr")


def history(api: httpx.Client, flow_id: str) -> list[dict[str, Any]]:
    """Return the latest run's whole history through the API."""
    response = api.get(f"/api/v1/flows/{flow_id}/history", params={"pageSize": 1000})
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def step_closed(api: httpx.Client, flow_id: str, count: int) -> bool:
    """Return whether the latest run has at least `count` STEP_CLOSED events."""
    events = history(api, flow_id)
    return sum(e["eventType"] == "STEP_CLOSED" for e in events) >= count


def confirm(page: Page, title: str, button: str) -> None:
    """Check the confirmation dialog's title, then press one of its buttons."""
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text(title)
    dialog.get_by_role("button", name=button, exact=True).click()
    expect(dialog).to_be_hidden()


def test_the_explorer_finds_flows_by_a_query_pages_them_and_remembers_the_queries(
    page: Page, api: httpx.Client
) -> None:
    ids = [f"browser-explorer-page-{n:02}" for n in range(12)]
    for n, flow_id in enumerate(ids):
        assert api.post(f"{SHIPMENTS}/start", params={"flowId": flow_id}).status_code == 201
        if n % 2:
            staged = api.post(
                f"{SHIPMENTS}/set-stage", params={"flowId": flow_id}, json={"stage": "packed"}
            )
            assert staged.status_code == 200, staged.text

    page.goto("/playground/#/flows")
    expect(page.get_by_role("link", name="Flows", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    search(page, "FlowId STARTS_WITH 'browser-explorer-page-'", flow_type="ShipmentFlow", size="10")
    expect(page.locator("#search-sent code")).to_have_text(
        "FlowType = 'ShipmentFlow' AND (FlowId STARTS_WITH 'browser-explorer-page-')"
    )
    # Newest first, ten to a page.
    expect(rows(page).locator(".fx-flow-link")).to_have_text(ids[::-1][:10])
    first = rows(page).first
    expect(first.locator(".badge")).to_have_text("RUNNING")
    expect(first.locator(".badge")).to_have_class(re.compile(r"\bst-running\b"))
    expect(first.locator("td[data-label=Attributes]")).to_have_text("keyword1=packed")
    expect(rows(page).nth(1).locator("td[data-label=Attributes]")).to_have_text("keyword1=created")
    expect(page.locator("#search-count")).to_have_text("Page 1: 10 runs.")
    previous, following = (
        page.get_by_role("button", name="Previous"),
        page.get_by_role("button", name="Next"),
    )
    expect(previous).to_be_disabled()
    following.click()
    expect(rows(page).locator(".fx-flow-link")).to_have_text([ids[1], ids[0]])
    expect(page.locator("#search-count")).to_have_text("Page 2: 2 runs.")
    expect(following).to_be_disabled()
    previous.click()
    expect(rows(page)).to_have_count(10)
    expect(previous).to_be_disabled()

    # An indexed Attribute in the query, a status filter that leaves nothing.
    search(page, "keyword1 = 'packed' AND FlowId STARTS_WITH 'browser-explorer-page-'")
    expect(rows(page)).to_have_count(6)
    search(page, "FlowId STARTS_WITH 'browser-explorer-page-'", status="COMPLETED")
    expect(page.locator("#search-count")).to_have_text("No run matches.")
    expect(page.locator("#results-table")).to_be_hidden()

    # The session remembers the queries, newest first, across a reload; one click runs one.
    page.reload()
    recent = page.locator("#recent-searches button")
    expect(recent).to_have_text(
        [
            "Status = 'COMPLETED' AND (FlowId STARTS_WITH 'browser-explorer-page-')",
            "keyword1 = 'packed' AND FlowId STARTS_WITH 'browser-explorer-page-'",
            "FlowType = 'ShipmentFlow' AND (FlowId STARTS_WITH 'browser-explorer-page-')",
        ]
    )
    recent.nth(1).click()
    expect(rows(page)).to_have_count(6)
    expect(page.get_by_label(re.compile("^Query"))).to_have_value(
        "keyword1 = 'packed' AND FlowId STARTS_WITH 'browser-explorer-page-'"
    )


def test_an_invalid_query_shows_the_problem_and_its_position(page: Page) -> None:
    allow_status(page, 400, "/api/v1/flows?")
    page.goto("/playground/#/flows")
    search(page, "FlowI = 'x' ORDER BY StartTime ASC")
    expect(page.locator("#search-problem-code")).to_have_text("INVALID_QUERY")
    expect(page.locator("#search-problem-detail")).to_contain_text("position 0")
    expect(page.locator("#search-problem-detail")).to_contain_text("did you mean 'FlowId'")
    expect(page.locator("#results-table")).to_be_hidden()
    # A failed query is not remembered.
    expect(page.locator("#recent-box")).to_be_hidden()


def test_the_flow_page_draws_one_bar_per_step_execution_and_lists_its_events(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-explorer-counter"
    started = api.post(f"{COUNTER}/start", params={"flowId": flow_id}).json()
    assert api.post(f"{COUNTER}/increment", params={"flowId": flow_id}, json={"by": 2}).is_success
    for holds in (1, 2):  # one at a time: a hold keeps the counter's lock while it runs
        held = api.post(f"{COUNTER}/hold", params={"flowId": flow_id}, json={"seconds": 0.2})
        assert held.status_code == 200, held.text
        wait_until(lambda n=holds: step_closed(api, flow_id, n), within=10, what="the hold")
    assert api.post(f"{COUNTER}/finish", params={"flowId": flow_id}).is_success
    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    events = history(api, flow_id)

    page.goto("/playground/#/flows")
    search(page, f"FlowId = '{flow_id}'")
    expect(rows(page)).to_have_count(1)
    rows(page).get_by_role("link", name=flow_id).click()
    expect(page).to_have_url(re.compile(rf"#/flows/{flow_id}\?runId={started['runId']}$"))
    expect(page.locator("#fx-title")).to_have_text(flow_id)
    expect(page.locator("#fx-title")).to_be_focused()
    summary = page.locator("#fx-summary")
    expect(summary).to_contain_text("COMPLETED")
    expect(summary).to_contain_text(started["runId"])
    expect(summary).to_contain_text('"stepExecutionId": "FinishCounting-1"')
    expect(summary).to_contain_text("null (no input)")  # CounterFlow starts without one
    expect(page.locator("#fx-attributes")).to_contain_text('"counter": 2')

    # Two holds and the finish: three Step executions, each closed; four RPC commits.
    bars = page.locator("#fx-timeline .tl-bar")
    expect(bars).to_have_count(3)
    assert [bar.get_attribute("data-exec") for bar in bars.all()] == [
        "HoldCounterLock-1",
        "HoldCounterLock-2",
        "FinishCounting-1",
    ]
    for bar in bars.all():
        expect(bar).to_have_class(re.compile(r"\bst-completed\b"))
    expect(page.locator("#fx-timeline .tl-run-row .mk-rpc")).to_have_count(4)
    expect(page.locator("#fx-timeline-summary")).to_contain_text(
        "3 Step executions · 4 RPC commits · 0 timer firings"
    )
    listed = page.locator("#fx-events .event")
    expect(listed).to_have_count(len(events))
    expect(listed.locator(".ev-type")).to_have_text([e["eventType"] for e in events])
    expect(page.locator("#fx-events-note")).to_have_text(
        f"{len(events)} events loaded: the whole history."
    )

    # A bar, pressed from the keyboard, shows only its execution's events: the RPC that created
    # it and its close.
    second = bars.nth(1)
    second.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#fx-timeline .tl-bar").nth(1)).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#fx-timeline .tl-bar").nth(1)).to_be_focused()
    expect(listed.locator(".ev-type")).to_have_text(["RPC_COMMITTED", "STEP_CLOSED"])
    expect(page.locator("#fx-filter-text")).to_have_text(
        "Showing the 2 events of HoldCounterLock-2."
    )
    page.get_by_role("button", name="Show all events").click()
    expect(listed).to_have_count(len(events))
    # A finished run takes no action.
    expect(page.locator("#fx-actions-note")).to_contain_text("This run is COMPLETED")
    expect(page.locator("#fx-actions form")).to_have_count(0)


def test_a_deep_link_opens_an_older_run_and_the_runs_of_the_flow_id_are_selectable(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-explorer-runs"
    older = start_progress(api, flow_id, 1)
    newer = start_progress(api, flow_id, 2)
    page.goto(f"/playground/#/flows/{flow_id}?runId={older['runId']}")
    expect(page.locator("#fx-summary")).to_contain_text(older["runId"])
    runs = page.locator("#fx-runs .run-link")
    expect(runs.locator("code")).to_have_text([newer["runId"], older["runId"]])
    expect(runs.nth(1)).to_have_attribute("aria-current", "page")
    expect(page.locator("#fx-timeline .tl-bar")).to_have_count(1)
    expect(page.locator("#fx-timeline .tl-bar")).to_have_attribute("data-exec", "WriteProgress-1")

    runs.first.click()
    expect(page).to_have_url(re.compile(rf"runId={newer['runId']}$"))
    expect(page.locator("#fx-summary")).to_contain_text(newer["runId"])
    expect(page.locator("#fx-runs .run-link").first).to_have_attribute("aria-current", "page")
    # Without a run ID the page shows the latest run.
    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-summary")).to_contain_text(newer["runId"])
    page.goto("/playground/#/flows/browser-explorer-never-started")
    expect(page.locator("#fx-note")).to_have_text(
        "No Flow with the ID browser-explorer-never-started."
    )
    expect(page.locator("#fx-body")).to_be_hidden()


def test_the_flow_page_follows_a_stream_live(page: Page, api: httpx.Client) -> None:
    flow_id = "browser-explorer-live"
    response = api.post(
        "/primitives/stream/start",
        params={"flowId": flow_id},
        json={"sections": 6, "delaySeconds": 0.6},
    )
    assert response.status_code == 201, response.text
    page.goto(f"/playground/#/flows/{flow_id}")
    page.evaluate("window.notReloaded = true")
    messages = page.locator("#fx-streams .stream-message .sm-value")
    expect(messages.first).to_have_text("section 1 of 6 done")
    # The first message is on the page while the Step is still writing the others.
    assert api.get(f"/api/v1/flows/{flow_id}").json()["status"] == "RUNNING"
    expect(page.locator("#fx-timeline .tl-bar.st-running")).to_have_count(1)
    expect(messages).to_have_text([f"section {n} of 6 done" for n in range(1, 7)])
    expect(page.locator("#fx-streams .stream-state")).to_have_text("Following live · 6 messages")
    assert page.evaluate("window.notReloaded") is True

    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    page.get_by_role("button", name="Refresh").click()
    expect(page.locator("#fx-status .badge")).to_have_text("COMPLETED")
    expect(page.locator("#fx-timeline .tl-bar.st-completed")).to_have_count(1)
    # A refresh keeps the follow: the messages are not read twice.
    expect(messages).to_have_count(6)


def test_the_flow_page_invokes_rpcs_from_their_schemas_and_stops_the_flow_after_confirmation(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-explorer-stop"
    started = api.post(f"{COUNTER}/start", params={"flowId": flow_id}).json()
    page.goto(f"/playground/#/flows/{flow_id}")
    expect(page.locator("#fx-status .badge")).to_have_text("RUNNING")
    expect(page.locator("#fx-timeline .tl-bar")).to_have_count(0)

    # increment takes an integer: one field, sent as a number.
    page.get_by_label("RPC", exact=True).select_option("increment")
    page.get_by_label(re.compile(r"^input\b")).fill("5")
    expect(page.locator("#fx-rpc-preview")).to_have_text("5")
    with page.expect_request(f"**/api/v1/flows/{flow_id}/rpcs/increment") as sent:
        page.get_by_role("button", name="Invoke…").click()
        confirm(page, f"Invoke increment on {flow_id}?", "Invoke")
    assert sent.value.post_data_json == {"input": 5, "runId": started["runId"]}
    expect(page.locator("#fx-action-result")).to_have_text("RPC increment answered.")
    expect(page.locator("#fx-attributes")).to_contain_text('"counter": 5')
    expect(page.locator("#fx-rpc-output")).to_contain_text('"output": 5')

    # hold_counter_lock starts a Step that holds the lock: a running bar.
    page.get_by_label("RPC", exact=True).select_option("hold_counter_lock")
    page.get_by_label(re.compile(r"^input\b")).fill("30")
    page.get_by_role("button", name="Invoke…").click()
    confirm(page, f"Invoke hold_counter_lock on {flow_id}?", "Invoke")
    expect(page.locator("#fx-action-result")).to_have_text("RPC hold_counter_lock answered.")
    bar = page.locator('#fx-timeline .tl-bar[data-exec="HoldCounterLock-1"]')
    expect(bar).to_have_class(re.compile(r"\bst-running\b"))

    # Going back from the dialog sends nothing.
    page.get_by_label(re.compile("^TERMINATE")).check()
    page.get_by_label("Reason").fill("stopped from the explorer")
    page.get_by_role("button", name="Stop…").click()
    expect(page.locator("#confirm-body")).to_contain_text('"type": "TERMINATE"')
    confirm(page, f"TERMINATE {flow_id}?", "Go back")
    assert api.get(f"/api/v1/flows/{flow_id}").json()["status"] == "RUNNING"
    # Nor does Escape.
    page.get_by_role("button", name="Stop…").click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#confirm-dialog")).to_be_hidden()
    assert api.get(f"/api/v1/flows/{flow_id}").json()["status"] == "RUNNING"

    with page.expect_request(f"**/api/v1/flows/{flow_id}/stop?runId=*") as stopped:
        page.get_by_role("button", name="Stop…").click()
        confirm(page, f"TERMINATE {flow_id}?", "Terminate the run")
    assert stopped.value.post_data_json == {
        "type": "TERMINATE",
        "reason": "stopped from the explorer",
    }
    expect(page.locator("#fx-action-result")).to_have_text("Stopped with TERMINATE.")
    expect(page.locator("#fx-status .badge")).to_have_text("TERMINATED")
    expect(page.locator("#fx-summary")).to_contain_text("stopped from the explorer")
    expect(bar).to_have_class(re.compile(r"\bst-canceled\b"))
    expect(page.locator("#fx-timeline .tl-run-row .mk-rpc")).to_have_count(2)
    expect(page.locator("#fx-actions form")).to_have_count(0)
    assert api.get(f"/api/v1/flows/{flow_id}").json()["status"] == "TERMINATED"


def test_the_flow_page_publishes_to_a_channel_and_moves_the_message_with_an_rpc(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-explorer-channel"
    assert api.post(f"{CHANNEL}/start", params={"flowId": flow_id}).status_code == 201
    page.goto(f"/playground/#/flows/{flow_id}")
    queued = page.locator('#fx-channels .channel[data-channel="queued-messages"]')
    expect(queued.locator(".channel-size")).to_have_text("0 pending")
    expect(page.locator("#fx-timeline .tl-bar.st-waiting")).to_have_count(1)

    page.get_by_label("Channel", exact=True).fill("queued-messages")
    page.get_by_label("Message (JSON)").fill('"hello"')
    page.get_by_role("button", name="Publish…").click()
    confirm(page, "Publish to queued-messages?", "Publish")
    expect(page.locator("#fx-action-result")).to_contain_text("to queued-messages.")
    expect(queued.locator(".channel-size")).to_have_text("1 pending")
    expect(queued.locator(".cm-value")).to_have_text(["hello"])
    message_id = queued.locator(".cm-id").inner_text()

    # The move RPC's input is an object: one field per property, the required one marked.
    page.get_by_label("RPC", exact=True).select_option(
        "move_queued_message_to_prioritized_messages"
    )
    field = page.get_by_label(re.compile(r"^messageId\b"))
    expect(page.locator("#fx-rpc-fields .required")).to_have_text(["required"])
    field.fill(message_id)
    page.get_by_role("button", name="Invoke…").click()
    confirm(page, f"Invoke move_queued_message_to_prioritized_messages on {flow_id}?", "Invoke")
    expect(page.locator("#fx-action-result")).to_have_text(
        "RPC move_queued_message_to_prioritized_messages answered."
    )
    expect(page.locator("#fx-rpc-output")).to_contain_text('"output": null')

    # HandlePrioritizedMessage consumes it just after the move, then waits again.
    wait_until(lambda: step_closed(api, flow_id, 1), within=10, what="the handling")
    page.get_by_role("button", name="Refresh").click()
    expect(page.locator("#fx-attributes")).to_contain_text('"hello"')
    bars = page.locator("#fx-timeline .tl-bar")
    expect(bars).to_have_count(2)
    expect(bars.first).to_have_class(re.compile(r"\bst-completed\b"))
    expect(bars.last).to_have_class(re.compile(r"\bst-waiting\b"))
    # The first execution waited for the message, then ran.
    expect(bars.first.locator(".seg-waiting")).to_have_count(1)
    expect(queued.locator(".channel-size")).to_have_text("0 pending")


def test_an_example_response_opens_its_flow_in_the_explorer_in_one_click(page: Page) -> None:
    flow_id = "browser-explorer-from-example"
    page.goto("/playground/#timer/start")
    fill(page, flowId=flow_id, seconds="0.2")
    status, started = send(page)
    assert status == 201
    page.get_by_role("link", name=f"Open {flow_id} in the Flows explorer").click()
    expect(page).to_have_url(re.compile(rf"#/flows/{flow_id}\?runId={started['runId']}$"))
    expect(page.locator("#view-examples")).to_be_hidden()
    expect(page.locator("#fx-title")).to_have_text(flow_id)
    expect(page.locator("#fx-summary")).to_contain_text(started["runId"])
    expect(page.locator('#fx-timeline .tl-bar[data-exec="WaitForTimer-1"]')).to_be_visible()

    # Back returns to the example, its answer still shown.
    page.go_back()
    expect(page.locator("#view-flows")).to_be_hidden()
    expect(page.locator("#status")).to_have_text(re.compile(r"^201 "))
    expect(page.get_by_role("link", name="Examples", exact=True)).to_have_attribute(
        "aria-current", "page"
    )


def test_a_long_history_is_read_a_page_at_a_time_and_map_instances_on_demand(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-explorer-long"
    chunked = "/patterns/sequentially-chunked-attribute-map"
    assert api.post(f"{chunked}/start", params={"flowId": flow_id}).status_code == 201
    for n in range(1, 121):
        response = api.post(
            f"{chunked}/register",
            params={"flowId": flow_id},
            json={"email": f"long{n}@example.com", "name": f"L{n}"},
        )
        assert response.status_code == 201, response.text
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if "/history" in r.url else None)
    page.goto(f"/playground/#/flows/{flow_id}")
    listed = page.locator("#fx-events .event")
    expect(listed).to_have_count(100)
    expect(page.locator("#fx-events-note")).to_have_text(
        "100 events loaded, oldest first; more follow."
    )
    expect(page.locator("#fx-timeline-summary")).to_contain_text("99 RPC commits")
    expect(page.locator("#fx-timeline-summary")).to_contain_text(
        "Drawn from the events loaded so far."
    )
    # The run is open, so the page reads it again every few seconds: paused here, the reads
    # are the pages alone (a live update reads no history while pages are left unread).
    page.get_by_role("button", name="Pause live updates").click()
    page.get_by_role("button", name="Load more events").click()
    expect(listed).to_have_count(121)
    expect(page.locator("#fx-events-note")).to_have_text("121 events loaded: the whole history.")
    expect(page.locator("#fx-timeline-summary")).to_contain_text("120 RPC commits")
    expect(page.get_by_role("button", name="Load more events")).to_be_hidden()
    assert len(reads) == 2 and all("pageSize=100" in url for url in reads), reads
    assert "pageToken=" in reads[1]

    # AttributeMap instances are read only when asked for: the archive and the current chunk.
    loader = page.locator('.map-loader[data-map="SubscriberChunks"]')
    expect(page.locator("#fx-attributes")).not_to_contain_text("long1@example.com")
    loader.get_by_label("Instance of SubscriberChunks").fill("00000000000000000001")
    loader.get_by_role("button", name="Read").click()
    expect(loader.locator("pre")).to_contain_text('"email": "long1@example.com"')
    loader.get_by_label("Instance of SubscriberChunks").fill("current")
    loader.get_by_role("button", name="Read").click()
    expect(loader.locator("pre")).to_contain_text('"email": "long120@example.com"')
    expect(loader.locator("pre")).not_to_contain_text('"email": "long1@example.com"')
    loader.get_by_label("Instance of SubscriberChunks").fill("00000000000000000201")
    loader.get_by_role("button", name="Read").click()
    expect(loader.locator("pre")).to_have_text("SubscriberChunks/00000000000000000201 is unset.")
