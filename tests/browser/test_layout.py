"""The playground's layout: the examples menu on a phone, the keyboard, the colour scheme, and
screenshots of both views at 1280 and 390 CSS pixels.

The screenshots are test artifacts: each run saves them under the test's pytest ``tmp_path``
(``.../screenshots/<view>-<width>.png``, printed with ``-s``), and copies them to the folder
named by the ``DEXLITE_BROWSER_ARTIFACTS`` environment variable when it is set (for example
``tests/browser/artifacts/``, which git ignores).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.browser.test_live_stream import fill
from tests.browser.test_playground import PREFIX, send

SHOTS_ENV = "DEXLITE_BROWSER_ARTIFACTS"


def assert_fits(page: Page, width: int) -> None:
    """Assert nothing on the page is wider than the viewport."""
    widths = page.evaluate(
        "() => ({doc: document.documentElement.scrollWidth, body: document.body.scrollWidth,"
        " view: document.documentElement.clientWidth})"
    )
    assert widths["view"] == width
    assert widths["doc"] <= width and widths["body"] <= width, widths


def in_view(page: Page, selector: str) -> bool:
    """Return whether an element is inside the viewport without scrolling."""
    box = page.locator(selector).bounding_box()
    viewport = page.viewport_size
    assert box is not None and viewport is not None
    return box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"]


def test_on_a_phone_the_catalog_is_a_menu_and_the_form_is_in_view(phone_page: Page) -> None:
    page = phone_page
    page.goto("/playground/")
    toggle = page.locator("#catalog-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator(".route-link").first).to_be_hidden()
    # The form of the first route is on the first screen, not after every example.
    expect(page.get_by_role("button", name="Send request")).to_be_visible()
    assert in_view(page, "#send")
    assert_fits(page, 390)

    # The menu opens and closes from the keyboard.
    toggle.focus()
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.locator(".route-link").first).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator(".route-link").first).to_be_focused()
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()

    # Picking a route closes the menu, names the route on its button and shows its form.
    toggle.click()
    page.get_by_role("link", name=re.compile("Register a subscriber")).click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_contain_text("Register a subscriber")
    expect(page.locator("#call")).to_be_focused()
    expect(page.get_by_label("email")).to_be_visible()
    assert in_view(page, "#route-title")


def test_the_page_follows_the_preferred_colour_scheme(page: Page, dark_page: Page) -> None:
    colours = []
    for each in (page, dark_page):
        each.goto("/playground/#/flows")
        expect(each.locator("#search-view")).to_be_visible()
        colours.append(
            each.evaluate(
                "() => [getComputedStyle(document.body).backgroundColor,"
                " getComputedStyle(document.body).color]"
            )
        )
    assert colours[0] == ["rgb(245, 246, 248)", "rgb(28, 34, 48)"]
    assert colours[1] == ["rgb(18, 21, 28)", "rgb(228, 232, 239)"]


def shoot(page: Page, folder: Path, name: str) -> Path:
    """Save a full-page screenshot and return its path."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def test_screenshots_at_1280_and_390_px(
    laptop_page: Page, phone_page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    """Screenshot the examples view, the search and a Flow page at 1280 and 390 px.

    Artifacts: ``<tmp_path>/screenshots/{examples,search,flow}-{1280,390}.png``, copied to
    ``$DEXLITE_BROWSER_ARTIFACTS`` when that variable names a folder.
    """
    folder = tmp_path / "screenshots"
    folder.mkdir()
    flow_id = "browser-shot-report"
    started = api.post(
        "/primitives/rpc-canceling-steps/start",
        params={"flowId": flow_id},
        json={"sections": 4, "sectionSeconds": 0.1, "deliverySeconds": 0.2},
    )
    assert started.status_code == 201, started.text
    done = api.get(f"/api/v1/flows/{flow_id}/result", params={"waitSeconds": 10}).json()
    assert done["status"] == "COMPLETED"
    chunked = "browser-shot-chunked"
    assert api.post(f"{PREFIX}/start", params={"flowId": chunked}).status_code == 201

    saved = []
    for page, width in ((laptop_page, 1280), (phone_page, 390)):
        page.goto("/playground/#sequentially-chunked-attribute-map/register")
        fill(page, flowId=chunked, email=f"shot-{width}@example.com", name=f"Width {width}")
        status, _ = send(page)
        assert status == 201
        expect(page.locator("#history .event")).to_have_count(2 if width == 1280 else 3)
        assert_fits(page, width)
        saved.append(shoot(page, folder, f"examples-{width}"))

        page.goto("/playground/#/flows?query=FlowId+STARTS_WITH+%27browser-%27")
        expect(page.locator("#results-body tr").first).to_be_visible()
        assert_fits(page, width)
        saved.append(shoot(page, folder, f"search-{width}"))

        page.goto(f"/playground/#/flows/{flow_id}")
        expect(page.locator("#fx-timeline .tl-bar")).to_have_count(2)
        expect(page.locator("#fx-streams .stream-message")).to_have_count(4)
        assert_fits(page, width)
        saved.append(shoot(page, folder, f"flow-{width}"))

    print(f"screenshots: {folder}")
    if target := os.environ.get(SHOTS_ENV):
        out = Path(target)
        out.mkdir(parents=True, exist_ok=True)
        for path in saved:
            shutil.copy2(path, out / path.name)
        print(f"screenshots copied to {out}")
