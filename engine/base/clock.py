"""The one clock: everything that needs "now" asks a Clock, nothing reads the wall clock.

A clock is any zero-argument callable returning a datetime. The engine keeps times as
naive ISO-8601 text (the seed article's format), so aware datetimes are converted to UTC
and made naive at the boundary.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Callable

Clock = Callable[[], dt.datetime]


def system_clock() -> dt.datetime:
    """The wall clock in UTC (naive, as every stored time), used only when the caller
    injects nothing. Not the local time: an aware time given (an expiry with an offset)
    is converted to UTC (a local time, east of UTC, would read an expiry an hour ahead
    as already past)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class FixedClock:
    """A clock that stands still until moved: for tests, scenarios and `--now`."""

    def __init__(self, start: dt.datetime | str):
        self.now = parse_time(start) if isinstance(start, str) else naive(start)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, delta: dt.timedelta) -> None:
        self.now = self.now + delta

    def set(self, when: dt.datetime) -> None:
        self.now = naive(when)


def naive(when: dt.datetime) -> dt.datetime:
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when


def iso(when: dt.datetime) -> str:
    """The stored text form: seconds precision, no zone, like the article's rows."""
    return naive(when).isoformat(timespec="seconds")


def parse_time(text: str) -> dt.datetime:
    """ISO date or datetime text to a naive datetime; raises ValueError with the text."""
    try:
        return naive(dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00")))
    except (ValueError, OverflowError):  # 9999-12-31T23:59:59-05:00 is past year 9999 in UTC
        raise ValueError(f"not an ISO-8601 date or time: {text!r}") from None


def is_bare_date(text: str) -> bool:
    """A date with no time, in any ISO-8601 spelling (2026-03-15, 20260315, 2026-W11-7)."""
    try:
        dt.date.fromisoformat(str(text).strip())
    except ValueError:
        return False
    return True


def until_end_of_day(text: str) -> dt.datetime:
    """An expiry as written: a bare date (2026-03-15, or 20260315) is true through the end
    of that day, a date and time is that moment. The one place this rule lives."""
    when = parse_time(text)
    if is_bare_date(text):
        when = when.replace(hour=23, minute=59, second=59)
    return when


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str | int | float) -> dt.timedelta:
    """'90m', '23h', '6d', '2w', '1d12h' (or a number of seconds) to a timedelta."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        try:
            return dt.timedelta(seconds=text)
        except (OverflowError, ValueError):
            raise ValueError(f"not a usable duration: {text!r}") from None
    s = str(text).strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhdw])", s)
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([smhdw])", "", s).strip():
        raise ValueError(f"not a duration (use e.g. 90m, 23h, 6d, 2w): {text!r}")
    try:
        return dt.timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))
    except OverflowError:
        raise ValueError(f"duration too long: {text!r}") from None


AHEAD = dt.timedelta(days=1)  # how far a given time may run ahead of the wall clock


def far_ahead(now: dt.datetime, wall_run: str | None) -> str | None:
    """Why a given `now` (`--now`) is refused, or None: on a store whose passes have run on
    the wall clock (`wall_run`, the latest such run), a time more than a day ahead of it
    would age, archive and expire memories as if that time had passed, and every run on
    the real clock afterwards would find its passes ran in the future (docs/time.md)."""
    wall = system_clock()
    if wall_run is None or naive(now) <= wall + AHEAD:
        return None
    return (
        f"--now {iso(now)} is {(naive(now) - wall).days} days ahead of the clock "
        f"({iso(wall)}) on a store whose passes run on it (last at {wall_run}); "
        "pass --force-time to run at that time anyway"
    )
