"""The history timeline: its derivation of Step bars from history events, run in Chromium on
made-up histories that reach every rule, and its drawing of real ones."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import httpx
from playwright.sync_api import Page, expect

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z, in ms since the epoch


def event(event_id: int, ms: int, event_type: str, **details: Any) -> dict[str, Any]:
    """Return a history event `ms` milliseconds after T0."""
    at = f"2027-01-15T08:00:{ms // 1000:02}.{ms % 1000:03}000Z"
    return {"eventId": event_id, "eventType": event_type, "at": at, "details": details}


HISTORY = [
    event(1, 0, "FLOW_STARTED", flowType="F"),
    event(
        2,
        100,
        "STEP_ATTEMPT_FAILED",
        stepExecutionId="Fetch-1",
        attempt=1,
        errorType="Boom",
        retryAt=(T0 + 300) * 1000,
    ),
    event(
        3,
        500,
        "STEP_CLOSED",
        stepType="Fetch",
        stepExecutionId="Fetch-1",
        decision="GO_TO",
        nextSteps=["Wait", "Wait"],
        canceledSteps=[],
    ),
    event(
        4, 600, "STEP_WAITING", stepType="Wait", stepExecutionId="Wait-1", dueAt=(T0 + 800) * 1000
    ),
    event(
        5,
        600,
        "STEP_WAITING",
        stepType="Wait",
        stepExecutionId="Wait-2",
        dueAt=None,
        channels=["q"],
    ),
    event(6, 700, "RPC_COMMITTED", rpc="poke", canceledSteps=["Wait-1"], nextSteps=["Fetch"]),
    event(7, 900, "CHANNEL_CONSUMED", stepType="Wait", stepExecutionId="Wait-2", channel="q"),
    event(
        8,
        1000,
        "STEP_CLOSED",
        stepType="Wait",
        stepExecutionId="Wait-2",
        decision="FORCE_FAIL",
        errorType="Nope",
        nextSteps=[],
        canceledSteps=[],
    ),
    event(9, 1000, "FLOW_CLOSED", status="FAILED"),
]

DERIVE = """async ([events, options]) => {
  const { deriveTimeline } = await import("/playground/timeline.js");
  const model = deriveTimeline(events, options);
  const rel = (t) => t - model.start;
  return {
    start: model.start, end: rel(model.end),
    runMarks: model.runMarks.map((m) => [m.kind, rel(m.at)]),
    executions: Object.fromEntries(model.executions.map((x) => [x.id, {
      state: x.state, from: rel(x.createdAt), to: rel(x.end),
      segments: x.segments.map((s) => [s.phase, rel(s.from), rel(s.to)]),
      marks: x.marks.map((m) => [m.kind, rel(m.at)]),
    }])),
  };
}"""


def derive(page: Page, events: list[dict[str, Any]], **options: Any) -> Any:
    """Derive the timeline model of `events` with the page's own module."""
    page.goto("/playground/#/flows")
    expect(page.locator("#search-view")).to_be_visible()
    return page.evaluate(DERIVE, [events, {"startStep": "Fetch", **options}])


def test_bars_start_at_creation_split_at_waits_and_end_as_the_history_says(page: Page) -> None:
    model = derive(page, HISTORY, status="FAILED")
    assert model["start"] == T0 and model["end"] == 1000
    assert model["runMarks"] == [["rpc", 700]]
    assert model["executions"] == {
        # The start Step, created by FLOW_STARTED: a failed attempt backs off until its retry
        # (a back-off, not a wait: the Step asked for no timer).
        "Fetch-1": {
            "state": "completed",
            "from": 0,
            "to": 500,
            "segments": [["running", 0, 100], ["backoff", 100, 300], ["running", 300, 500]],
            "marks": [["attempt", 100], ["retry", 300]],
        },
        # Created by nextSteps, numbered in order; canceled by the RPC before its timer fired.
        "Wait-1": {
            "state": "canceled",
            "from": 500,
            "to": 700,
            "segments": [["running", 500, 600], ["waiting", 600, 700]],
            "marks": [],
        },
        # A wait on a Channel ends at the CHANNEL_CONSUMED that meets it; FORCE_FAIL is failed.
        "Wait-2": {
            "state": "failed",
            "from": 500,
            "to": 1000,
            "segments": [["running", 500, 600], ["waiting", 600, 900], ["running", 900, 1000]],
            "marks": [],
        },
        # Created by the RPC; still open when the run closed: canceled.
        "Fetch-2": {
            "state": "canceled",
            "from": 700,
            "to": 1000,
            "segments": [["running", 700, 1000]],
            "marks": [],
        },
    }


def as_rfc3339(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the events with their due and retry times as RFC 3339 strings, as the API now
    writes them (HISTORY has the microseconds since the epoch older events carry)."""
    out = []
    for ev in events:
        details = dict(ev["details"])
        for key in ("dueAt", "retryAt"):
            if isinstance(details.get(key), int):
                at = datetime.fromtimestamp(details[key] / 1_000_000, UTC)
                details[key] = at.isoformat(timespec="microseconds").replace("+00:00", "Z")
        out.append({**ev, "details": details})
    return out


def test_due_and_retry_times_in_rfc_3339_draw_the_bars_their_microseconds_draw(
    page: Page,
) -> None:
    strings = as_rfc3339(HISTORY)
    assert strings[1]["details"]["retryAt"] == "2027-01-15T08:00:00.300000Z"
    assert derive(page, strings, status="FAILED") == derive(page, HISTORY, status="FAILED")
    head = HISTORY[:5]
    assert derive(page, as_rfc3339(head), now=T0 + 2000) == derive(page, head, now=T0 + 2000)


def test_open_bars_run_to_now_or_to_the_last_loaded_event(page: Page) -> None:
    head = HISTORY[:5]
    running = derive(page, head, status="RUNNING", complete=True, now=T0 + 2000)
    assert running["end"] == 2000
    # The timer's due time passed while open: it fired, and the Step runs again.
    assert running["executions"]["Wait-1"] == {
        "state": "running",
        "from": 500,
        "to": 2000,
        "segments": [["running", 500, 600], ["waiting", 600, 800], ["running", 800, 2000]],
        "marks": [["timer", 800]],
    }
    assert running["executions"]["Wait-2"]["state"] == "waiting"
    # More pages to come: drawn up to the last loaded event, not to now.
    partial = derive(page, head, status="RUNNING", complete=False, now=T0 + 2000)
    assert partial["end"] == 600
    assert partial["executions"]["Wait-2"]["to"] == 600
    # Without the start Step's name, its bar starts at the first event naming it.
    unknown = derive(page, HISTORY[:3], startStep=None, status="RUNNING", complete=False)
    assert unknown["executions"]["Fetch-1"]["from"] == 100
    assert unknown["executions"]["Wait-2"]["from"] == 500


def test_a_fan_out_draws_its_wait_its_children_link_back_and_a_failed_child_is_red(
    page: Page, api: httpx.Client
) -> None:
    flow_id = "browser-timeline-fan-out"
    started = api.post(
        "/primitives/subflow/start",
        params={"flowId": flow_id},
        json={"children": 3, "failIndex": 1},
    )
    assert started.status_code == 201, started.text
    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    timer = api.post(
        "/primitives/timer/start",
        params={"flowId": "browser-timeline-timer"},
        json={"seconds": 0.3},
    )
    assert timer.status_code == 201, timer.text

    page.goto(f"/playground/#/flows/{flow_id}")
    bar = page.locator("#fx-timeline .tl-bar")
    expect(bar).to_have_attribute("data-exec", "FanOut-1")
    expect(bar).to_have_class(re.compile(r"\bst-completed\b"))
    expect(bar.locator(".seg-waiting")).to_have_count(1)
    children = page.locator("#fx-summary .fx-children a")
    expect(children).to_have_text([f"SubFlow:{flow_id}-FanOut-1-{n}" for n in range(3)])
    children.nth(1).click()
    expect(page.locator("#fx-title")).to_have_text(f"SubFlow:{flow_id}-FanOut-1-1")
    expect(page.locator("#fx-timeline .tl-bar")).to_have_class(re.compile(r"\bst-failed\b"))
    expect(page.locator("#fx-summary")).to_contain_text("SquareRefused: child 1 was asked to fail")
    page.locator("#fx-summary").get_by_role("link", name=flow_id).click()
    expect(page.locator("#fx-title")).to_have_text(flow_id)

    # A timer: waiting until it fires, marked where it fired.
    result = api.get("/api/v1/flows/browser-timeline-timer/result", params={"waitSeconds": 10})
    assert result.json()["status"] == "COMPLETED"
    page.goto("/playground/#/flows/browser-timeline-timer")
    bar = page.locator('#fx-timeline .tl-bar[data-exec="WaitForTimer-1"]')
    expect(bar.locator(".seg-waiting")).to_have_count(1)
    expect(page.locator("#fx-timeline .tl-rows .mk-timer")).to_have_count(1)
    expect(page.locator("#fx-timeline-summary")).to_contain_text("1 timer firing")
