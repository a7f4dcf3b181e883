"""Times as the playground shows them, computed the page's way for the tests to compare."""

from __future__ import annotations

from datetime import UTC, datetime


def parse(rfc3339: str) -> datetime:
    """Return an RFC 3339 time of the API as an aware datetime in UTC."""
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone(UTC)


def clock(rfc3339: str, ref: str | None = None) -> str:
    """Return the time of day the page shows for a time: ``HH:MM:SS`` in UTC, with the date in
    front when it is not the day of ``ref`` (now by default)."""
    at = parse(rfc3339)
    day = parse(ref).date() if ref else datetime.now(UTC).date()
    return at.strftime("%H:%M:%S") if at.date() == day else at.strftime("%Y-%m-%d %H:%M:%S")


def iso_ms(rfc3339: str) -> str:
    """Return a time as a <time datetime> holds it: JavaScript's toISOString, to the ms."""
    at = parse(rfc3339)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03}Z"
