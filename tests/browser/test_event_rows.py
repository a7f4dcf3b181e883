"""The Flow page's history events as rows people read, and its times, in Chromium against a
real server: each event's ID, type, time and one line saying what happened, checked against the
history the API gives, its raw JSON one click away; the summaries of made-up events of every
type, with times in details in both wire forms (RFC 3339, and the microseconds older events
carry); and times shown relative to now, the absolute ones at hand, rewritten as time passes
(Playwright's fake clock moves it: no test sleeps). Screenshots at 1280 and 390 px are test
artifacts (see shots.py): ``events-*.png``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

from tests.browser.shots import Shots
from tests.browser.test_explorer import history, step_closed
from tests.browser.test_layout import assert_fits
from tests.browser.times import clock, iso_ms, parse
from tests.support.waiting import wait_until

TIMER = "/primitives/timer"
COUNTER = "/primitives/rpc"


def summaries(page: Page) -> list[str]:
    """Return the summary lines of the events listed."""
    return page.locator("#fx-events .ev-summary").all_inner_texts()


def expected_timer_lines(events: list[dict[str, Any]]) -> list[str]:
    """Return what the rows of a finished TimerFlow run of 0.3 s say, from its history."""
    waiting = next(e for e in events if e["eventType"] == "STEP_WAITING")
    due = clock(waiting["details"]["dueAt"], waiting["at"])
    return [
        'Run started as TimerFlow with input {"seconds":0.3}',
        f"WaitForTimer-1 waits until {due}; wrote timer-status",
        "WaitForTimer-1 completed; wrote timer-status",
        "Run closed COMPLETED",
    ]


def test_each_event_is_a_row_with_a_readable_summary_and_its_json_one_click_away(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    timer = "browser-rows-timer"
    assert api.post(f"{TIMER}/start", params={"flowId": timer}, json={"seconds": 0.3}).is_success
    done = api.get(f"/api/v1/flows/{timer}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    events = history(api, timer)
    assert [e["eventType"] for e in events] == [
        "FLOW_STARTED",
        "STEP_WAITING",
        "STEP_CLOSED",
        "FLOW_CLOSED",
    ]
    # The due time is an RFC 3339 string now (older events carry microseconds).
    assert isinstance(events[1]["details"]["dueAt"], str)

    shots = Shots(tmp_path)
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.goto(f"/playground/#/flows/{timer}")
        rows = page.locator("#fx-events .event")
        expect(rows).to_have_count(len(events))
        expect(rows.locator(".ev-id")).to_have_text([f"#{e['eventId']}" for e in events])
        expect(rows.locator(".ev-type")).to_have_text([e["eventType"] for e in events])
        expect(rows.locator(".ev-summary")).to_have_text(expected_timer_lines(events))
        # Each row's time: relative, its time of day beside it, the absolute one in a tooltip.
        for row, event in zip(rows.all(), events, strict=True):
            when = row.locator(".ev-when time")
            expect(when).to_have_count(2)
            expect(when.first).to_have_text(re.compile(r"^(now|\d+ s ago)$"))
            expect(when.last).to_have_text(clock(event["at"]))
            expect(when.first).to_have_attribute("datetime", iso_ms(event["at"]))
        assert_fits(page, width)
        shots.take(page, f"events-{width}")

    # The raw JSON is folded under each row; one click shows it, as the API gave it.
    page = laptop_page
    raw = page.locator('#fx-events .event[data-event-id="2"] details.ev-raw')
    expect(raw.locator("pre")).to_be_hidden()
    raw.get_by_text("Details (JSON)").click()
    expect(raw.locator("pre")).to_be_visible()
    assert json.loads(raw.locator("pre").inner_text()) == events[1]["details"]

    # RPCs and the Steps they start, the Step that forces the run's completion.
    counter = "browser-rows-counter"
    assert api.post(f"{COUNTER}/start", params={"flowId": counter}).is_success
    assert api.post(f"{COUNTER}/increment", params={"flowId": counter}, json={"by": 2}).is_success
    held = api.post(f"{COUNTER}/hold", params={"flowId": counter}, json={"seconds": 0.1})
    assert held.status_code == 200, held.text
    wait_until(lambda: step_closed(api, counter, 1), within=10, what="the hold")
    assert api.post(f"{COUNTER}/finish", params={"flowId": counter}).is_success
    done = api.get(f"/api/v1/flows/{counter}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    page.goto(f"/playground/#/flows/{counter}")
    expect(page.locator("#fx-events .ev-summary")).to_have_text(
        [
            "Run started as CounterFlow with no input; set counter",
            "RPC increment committed; wrote counter",
            "RPC hold_counter_lock committed; next HoldCounterLock",
            "HoldCounterLock-1 closed at a dead end",
            "RPC finish committed; next FinishCounting",
            "FinishCounting-1 completed the run (force complete)",
            "Run closed COMPLETED",
        ]
    )
    shots.publish()


# Made-up events of the types no bundled example reaches in a few calls.
T = "2027-01-15T08:00:00.000000Z"
RETRY = "2027-01-15T08:00:05.250000Z"
RETRY_MICROS = int(parse(RETRY).timestamp() * 1_000_000)
DUE = "2027-01-16T09:30:00Z"
RUN = "01a2449f-0000-7000-8000-000000000001"
MESSAGE = "01a2449f-1111-7000-8000-000000000002"
MADE_UP: list[tuple[str, dict[str, Any], str]] = [
    (
        "STEP_ATTEMPT_FAILED",
        {
            "stepExecutionId": "Ship-1",
            "attempt": 2,
            "errorType": "RuntimeError",
            "errorMessage": "payment gateway down",
            "retryAt": RETRY,
            "traceback": "Traceback …",
        },
        "Ship-1 attempt 2 failed: RuntimeError: payment gateway down, retry at 08:00:05",
    ),
    (
        "STEP_ATTEMPT_FAILED",
        {
            "stepExecutionId": "Ship-1",
            "attempt": 2,
            "errorType": "RuntimeError",
            "errorMessage": "payment gateway down",
            "retryAt": RETRY_MICROS,
        },
        "Ship-1 attempt 2 failed: RuntimeError: payment gateway down, retry at 08:00:05",
    ),
    (
        "STEP_WAITING",
        {"stepExecutionId": "Ship-1", "dueAt": DUE, "attributes": []},
        "Ship-1 waits until 2027-01-16 09:30:00",
    ),
    (
        "STEP_WAITING",
        {"stepExecutionId": "Ship-1", "dueAt": int(parse(DUE).timestamp() * 1_000_000)},
        "Ship-1 waits until 2027-01-16 09:30:00",
    ),
    (
        "STEP_WAITING",
        {"stepExecutionId": "Pack-2", "dueAt": None, "attributes": ["stage"]},
        "Pack-2 moves on to Execute; wrote stage",
    ),
    (
        "STEP_CLOSED",
        {
            "stepExecutionId": "Pay-1",
            "attempt": 3,
            "decision": "FAILED",
            "errorType": "RuntimeError",
            "errorMessage": "down",
            "nextSteps": [],
            "canceledSteps": ["Ship-1"],
            "attributes": [],
        },
        "Pay-1 failed after 3 attempts: RuntimeError: down; canceled Ship-1",
    ),
    (
        "RPC_COMMITTED",
        {
            "rpc": "add_note",
            "attributes": ["notes", "log/2027"],
            "canceledSteps": [],
            "nextSteps": ["Ship", "Ship"],
        },
        "RPC add_note committed; wrote notes, log/2027; next Ship, Ship",
    ),
    ("ATTRIBUTES_SET", {"attributes": ["stage"], "erase": False}, "A client set stage"),
    (
        "ATTRIBUTES_SET",
        {"attributes": ["secret"], "erase": True},
        "Erased the hard-delete values of secret",
    ),
    (
        "CHANNEL_MESSAGE_DELETED",
        {"channel": "queue/eu", "messageId": MESSAGE},
        "Message 01a2449f-1111… deleted from queue/eu",
    ),
    (
        "SUBFLOW_ATTACHED",
        {
            "stepExecutionId": "FanOut-1",
            "index": 0,
            "flowType": "Square",
            "flowId": "child-0",
            "runId": RUN,
        },
        "FanOut-1 attached to the running SubFlow child-0",
    ),
    (
        "TIME_TRAVELED",
        {
            "previousRunId": RUN,
            "previousFlowId": "order-1",
            "to": {"kind": "STEP_EXECUTION", "stepExecutionId": "Ship-1", "method": "WAIT_FOR"},
            "reason": "retry shipping",
            "skipWritesReapply": True,
        },
        "Traveled from run 01a2449f-0000… to before the WaitFor of Ship-1: retry shipping "
        "(writes not reapplied)",
    ),
    (
        "TIME_TRAVELED",
        {
            "previousRunId": RUN,
            "previousFlowId": "order-0",
            "to": {"kind": "EVENT", "eventId": 7},
            "reason": "",
            "skipWritesReapply": False,
        },
        "Traveled from run 01a2449f-0000… of order-0 to event #7",
    ),
    (
        "WRITES_REAPPLIED",
        {
            "sourceEventId": 9,
            "attributes": ["stage"],
            "published": [{"channel": "q", "messageId": MESSAGE}],
            "deleted": [],
        },
        "Reapplied event #9: wrote stage, published 1 message",
    ),
    (
        "FLOW_CLOSED",
        {"status": "FAILED", "errorType": "Stopped", "errorMessage": "by hand"},
        "Run closed FAILED: Stopped: by hand",
    ),
]


def test_made_up_events_of_every_type_read_in_one_line_with_times_in_both_forms(
    page: Page,
) -> None:
    page.goto("/playground/#/flows")
    expect(page.locator("#search-view")).to_be_visible()
    rows = [
        {"eventId": n, "eventType": kind, "at": T, "details": details}
        for n, (kind, details, _) in enumerate(MADE_UP, 1)
    ]
    lines = page.evaluate(
        """async (events) => {
          const { eventRow } = await import("/playground/events.js");
          return events.map((ev) => {
            const row = eventRow(ev, "order-1");
            return [row.querySelector(".ev-summary").textContent,
                    row.querySelector(".ev-details")?.textContent ?? "",
                    row.querySelectorAll("details.traceback").length];
          });
        }""",
        rows,
    )
    assert [line[0] for line in lines] == [expected for _, _, expected in MADE_UP]
    # The traceback is folded apart, not in the JSON.
    assert lines[0][2] == 1 and "traceback" not in lines[0][1]
    assert json.loads(lines[1][1]) == MADE_UP[1][1]


def test_times_are_relative_with_the_absolute_at_hand_and_move_on_with_the_clock(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-rows-relative"
    started = api.post(f"{TIMER}/start", params={"flowId": flow_id}, json={"seconds": 3600})
    assert started.status_code == 201, started.text
    wait_until(
        lambda: len(history(api, flow_id)) >= 2, within=10, what="the Step's wait for its Timer"
    )
    run = api.get(f"/api/v1/flows/{flow_id}").json()
    # The page's timers fire only when the test moves its clock.
    page.clock.install()
    page.clock.pause_at(time.time() + 1)
    page.goto(f"/playground/#/flows/{flow_id}")
    summary = page.locator("#fx-summary")
    started_at = summary.locator("dd").nth(3)
    expect(started_at.locator("time")).to_have_text(re.compile(r"^(now|\d+ s ago)$"))
    expect(started_at.locator("time")).to_have_attribute("datetime", iso_ms(run["startedAt"]))
    expect(started_at.locator("time")).to_have_attribute(
        "title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$")
    )
    # The absolute time is shown beside it too, to the second.
    expect(started_at).to_contain_text(f"({run['startedAt'][:10]} {run['startedAt'][11:19]} UTC)")
    due = page.locator("#fx-pending .pending-due time.rel")
    expect(due).to_have_text(re.compile(r"^in (1 h|59 min)$"))
    first_event = page.locator("#fx-events .event .ev-when time.rel").first

    # Half an hour later, with no click: the page's words follow the clock.
    page.clock.fast_forward("30:00")
    expect(due).to_have_text(re.compile(r"^in (30|29) min$"))
    expect(first_event).to_have_text(re.compile(r"^(30|31) min ago$"))
    expect(started_at.locator("time")).to_have_text(re.compile(r"^(30|31) min ago$"))
    expect(summary.locator(".elapsed")).to_have_text(re.compile(r"^(30|31) min$"))
