"""When a Schedule's actions are due: times every N seconds (aligned to the Unix epoch) or of a
cron line in a time zone, and the Flow ID each time starts.

Cron lines are read by cronsim, which also decides what a daylight-saving change does to them
(as cron does: a time the clocks skip fires at the change, a time they repeat fires once).
Times are microseconds since the epoch, like every stored time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from engine.errors import InvalidArgumentError

MICROS = 1_000_000

#: The ``@`` aliases of cron lines, as five fields (cronsim reads only fields).
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: The longest interval of ``every``: a year of seconds is already more than anyone asks.
MAX_EVERY = timedelta(days=366)


class Times:
    """The scheduled times of one Schedule: ``every`` seconds, or a cron line in a zone."""

    def __init__(self, every_seconds: int | None, cron: str | None, timezone: str) -> None:
        self.every = None if every_seconds is None else every_seconds * MICROS
        self.cron = None if cron is None else ALIASES.get(cron.strip().lower(), cron.strip())
        self.zone = ZoneInfo(timezone)

    def after(self, moment: int) -> Iterator[int]:
        """Yield the scheduled times strictly after ``moment``, in order, without end."""
        if self.every is not None:
            step = self.every
            when = (moment // step + 1) * step
            while True:
                yield when
                when += step
        assert self.cron is not None
        start = datetime.fromtimestamp(moment / MICROS, self.zone)
        for moment_in_zone in CronSim(self.cron, start):
            yield round(moment_in_zone.timestamp() * MICROS)

    def next(self, moment: int) -> int:
        """Return the first scheduled time strictly after ``moment``."""
        return next(self.after(moment))

    def count_before(self, start: int, bound: int) -> tuple[int, int]:
        """Count the times in [start, bound) (those a catch-up skips) and return the count and
        the first time at or after ``bound`` (``start`` itself when it is not before it)."""
        if start >= bound:
            return 0, start
        if self.every is not None:
            step = self.every
            first = -(-bound // step) * step  # the first multiple at or after bound
            return (first - start) // step, first
        for count, when in enumerate(self.after(start - 1)):
            if when >= bound:
                return count, when
        raise AssertionError("a cron line has times without end")

    def between(self, start: int, end: int, limit: int) -> list[int]:
        """Return the scheduled times in [start, end), at most ``limit`` of them."""
        found: list[int] = []
        for when in self.after(start - 1):
            if when >= end or len(found) >= limit:
                break
            found.append(when)
        return found


def check_times(every: timedelta | None, cron: str | None, timezone: str) -> Times:
    """Return the times of a Schedule's spec, or raise InvalidArgumentError naming the field
    that is wrong (both or neither of every and cron, a bad interval, line or zone)."""
    if (every is None) == (cron is None):
        raise InvalidArgumentError(
            "a Schedule needs exactly one of everySeconds and cron", field="everySeconds"
        )
    seconds = None
    if every is not None:
        if not isinstance(every, timedelta) or every.microseconds or every.total_seconds() < 1:
            raise InvalidArgumentError(
                "everySeconds must be a whole number of seconds, at least 1", field="everySeconds"
            )
        if every > MAX_EVERY:
            raise InvalidArgumentError(
                "everySeconds must be at most 366 days", field="everySeconds"
            )
        seconds = int(every.total_seconds())
    if not isinstance(timezone, str) or not timezone:
        raise InvalidArgumentError("timezone must be an IANA time zone name", field="timezone")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgumentError(
            f"timezone {timezone!r} is not a known IANA time zone (e.g. 'Europe/Paris')",
            field="timezone",
        ) from None
    if cron is not None:
        line = ALIASES.get(cron.strip().lower(), cron.strip()) if isinstance(cron, str) else ""
        try:
            CronSim(line, datetime(2000, 1, 1, tzinfo=UTC))
        except (CronSimError, ValueError) as exc:
            raise InvalidArgumentError(
                f"cron {cron!r} is not a cron line: {exc} (five fields: minute hour "
                "day-of-month month day-of-week, or @hourly, @daily, @weekly, @monthly, @yearly)",
                field="cron",
            ) from None
    return Times(seconds, cron, timezone)


def action_flow_id(schedule_id: str, when: int) -> str:
    """Return the Flow ID the action of time ``when`` starts: ``<id>-YYYYMMDDTHHMMSSZ``."""
    moment = datetime.fromtimestamp(when // MICROS, UTC)
    return f"{schedule_id}-{moment:%Y%m%dT%H%M%SZ}"
