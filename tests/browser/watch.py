"""What a page did wrong: console errors, failed requests and error answers.

Every page the fixtures open is watched; when its test ends, anything wrong fails the test, even
when the assertions passed. A test that provokes an error answer on purpose says so first with
:func:`allow_status`, and asserts on it as usual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from playwright.sync_api import ConsoleMessage, Page, Request, Response

# Closing a live Stream follower (another Flow, another view) aborts its request: expected.
STREAM_FOLLOW = re.compile(r"/api/v1/streams/[^?]+/events(\?|$)")
# Chromium logs every error answer to a fetch as a console error too.
LOAD_FAILED = re.compile(r"^Failed to load resource: the server responded with a status of (\d+)")


@dataclass
class PageWatch:
    """The problems one page met, and the error answers its test allowed."""

    allowed: list[tuple[int, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def is_allowed(self, status: int, url: str) -> bool:
        """Return whether the test allowed this status from a URL containing its fragment."""
        return any(status == code and fragment in url for code, fragment in self.allowed)

    def on_response(self, response: Response) -> None:
        """Record an error answer the test did not allow."""
        if response.status >= 400 and not self.is_allowed(response.status, response.url):
            self.problems.append(f"{response.status} {response.request.method} {response.url}")

    def on_request_failed(self, request: Request) -> None:
        """Record a request that got no answer, except a Stream follow being closed."""
        failure = request.failure or ""
        if failure == "net::ERR_ABORTED" and STREAM_FOLLOW.search(request.url):
            return
        self.problems.append(f"request failed ({failure}): {request.method} {request.url}")

    def on_console(self, message: ConsoleMessage) -> None:
        """Record a console error, except the one Chromium logs for an allowed error answer."""
        if message.type != "error":
            return
        loaded = LOAD_FAILED.match(message.text)
        url = str(message.location.get("url", ""))
        if loaded and self.is_allowed(int(loaded.group(1)), url):
            return
        self.problems.append(f"console error: {message.text} ({url})")


_WATCHES: dict[int, PageWatch] = {}


def watch(page: Page) -> PageWatch:
    """Start watching a page; return its watch."""
    found = _WATCHES[id(page)] = PageWatch()
    page.on("response", found.on_response)
    page.on("requestfailed", found.on_request_failed)
    page.on("console", found.on_console)
    return found


def forget(page: Page) -> PageWatch:
    """Stop tracking a page (its context is closed) and return its watch."""
    return _WATCHES.pop(id(page))


def allow_status(page: Page, status: int, url_fragment: str) -> None:
    """Allow `status` answers from URLs containing `url_fragment`: the test provokes them."""
    _WATCHES[id(page)].allowed.append((status, url_fragment))
