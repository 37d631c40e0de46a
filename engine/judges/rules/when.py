"""When a question asks about: a past day or span named relative to the day it is asked
("10 days ago", "last Saturday", "a couple of weeks ago", "last month"), as a window of
days. Recall favours the memories said within it: "what did I buy 10 days ago?" is about
what the user said that day, whatever words it used.

Nothing here reads the clock: the day the question is asked is passed in.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from engine.judges.rules.asking import asks_about_the_past
from engine.judges.rules.calendar_days import HOLIDAY_RE, SEASONS, holiday_on, season_span
from engine.judges.rules.date_parts import MONTHS, WEEKDAYS, month_end, month_number
from engine.judges.rules.dates import _amount
from engine.judges.rules.words import normalise

# how far either side of a named distance a thing said still counts: people round
_SLACK = {"day": 1, "week": 3, "month": 10, "year": 45}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_AGO = re.compile(
    r"\b(?:(a couple of|a few|several|\d+|[a-z]+)\s+)?(?:more\s+)?"
    r"(day|week|month|year)s?\s+(?:ago|back|before now)\b"
)
_FEW = {"a couple of": 2, "a few": 3, "several": 4}
_LAST_WEEKDAY = re.compile(r"\b(?:last|this past|past)\s+(" + "|".join(WEEKDAYS) + r")\b")
_LAST = re.compile(r"\b(?:last|this past|the past)\s+(week|weekend|month|year)\b")


def asked_window(query: str, today: date) -> tuple[date, date] | None:
    """The days (first, last) a question's relative time names, or None when it names
    none (or when they fall outside the calendar: asked in the year 1). The first match
    in the question wins."""
    try:
        return _window(query, today)
    except (OverflowError, ValueError, StopIteration):
        return None


def _window(query: str, today: date) -> tuple[date, date] | None:
    text = normalise(query or "")
    if re.search(r"\byesterday\b", text):
        return today - timedelta(days=2), today - timedelta(days=1)
    m = _AGO.search(text)
    if m:
        word, unit = m[1], m[2]
        if word in _FEW:
            count: int | None = _FEW[word]
        elif word in (None, "a", "an", "one"):
            count = 1
        else:
            try:
                count = _amount(word)
            except ValueError:  # 'how many days ago': no distance named
                count = None
        if count:
            try:
                centre = today - timedelta(days=count * _UNIT_DAYS[unit])
                slack = timedelta(days=_SLACK[unit] * (2 if word in _FEW else 1))
                return centre - slack, centre + slack
            except OverflowError:
                return None
    m = _LAST_WEEKDAY.search(text)
    if m:
        back = (today.weekday() - WEEKDAYS.index(m[1])) % 7 or 7
        day = today - timedelta(days=back)
        return day - timedelta(days=1), day + timedelta(days=1)
    m = _LAST.search(text)
    if m:
        return _last(m[1], today)
    m = _NAMED.search(text)
    # ('may' is a month only as 'May': "what may I have missed?" names none)
    if m and (m[3] != "may" or month_number(m[3], query)) and asks_about_the_past(query):
        of_month = int(m[4]) if m[4] and m[3] in MONTHS else None
        return _named(m[1], m[2], m[3], today, of_month, int(m[5]) if m[5] else None)
    return None


# what makes a number after a month a count, not its day: 'in March 3 times'
_UNITS = r"(?:times?|x|days?|weeks?|months?|years?|hours?|minutes?|nights?|people|of)\b"
# a month, season or named day a question about the past asks of ("what did I buy in
# March?", "where did we go last summer?", "what did I cook on Thanksgiving?"), with the
# day of the month and the year when said ("on May 5", "in March 2025", "Christmas 2025")
_NAMED = re.compile(
    r"\b(last|this past|in|during|over|on|at|around|for|since)\s+(?:the\s+)?(?:(early|mid|late)[\s-]+)?"
    rf"({'|'.join(sorted(MONTHS, key=len, reverse=True))}|{'|'.join(SEASONS)}|{HOLIDAY_RE})\b"
    r"(?:\s+(?:the\s+)?(\d{1,2})\b(?!\s*(?::|am\b|pm\b|%|\d{1,3}\b|" + _UNITS + r")))?"
    r"(?:,?\s+(?:of\s+)?(\d{4})\b)?"
)
# how far either side of a named day or span a thing said still counts
_NAMED_SLACK = {"day": 2, "month": 3, "season": 7}


def _named(
    opener: str, part: str | None, name: str, today: date, day: int | None = None, year: int | None = None
) -> tuple[date, date]:
    """The days of the latest month, season or named day of that name that has begun
    by `today` ('last': that has ended), or of the `year` said, each with a little slack;
    the early, mid or late part of a month is its first, second or last ten days, and a
    `day` of it that day."""
    ended = opener in ("last", "this past")
    if name in MONTHS:
        month = MONTHS[name]
        if day is not None:  # 'on May 5': the latest May 5 by today
            first = last = _latest_day(month, day, year, today)
            slack = _NAMED_SLACK["day"]
        else:
            if year is None:
                begun = month < today.month or month == today.month and not ended
                year = today.year if begun else today.year - 1
            first, last = _month_part(date(year, month, 1), part)
            slack = _NAMED_SLACK["month"]
    elif name in SEASONS:
        first, last = season_span(name, year) if year else _latest_season(name, today, ended)
        slack = _NAMED_SLACK["season"]
    else:
        first = last = next(
            d
            for y in ((year,) if year else (today.year, today.year - 1))
            if (d := holiday_on(name, y)) is not None and (year or d <= today and (d < today or not ended))
        )
        slack = _NAMED_SLACK["day"]
    return first - timedelta(days=slack), last + timedelta(days=slack)


def _latest_day(month: int, day: int, year: int | None, today: date) -> date:
    """That day of `year`, or its latest by today (a February 29th: of the last leap year);
    ValueError when there is none (a 31st of a month of 30 days)."""
    for y in (year,) if year else range(today.year, today.year - 8, -1):
        try:
            said = date(y, month, day)
        except ValueError:
            continue
        if year or said <= today:
            return said
    raise ValueError(f"no day {day} of month {month}")


def _latest_season(name: str, today: date, ended: bool) -> tuple[date, date]:
    """The latest season of that name begun by today ('last summer': ended by today)."""
    return next(
        span
        for begins in (today.year, today.year - 1, today.year - 2)
        if (span := season_span(name, begins))[0] <= today and (span[1] < today or not ended)
    )


def _month_part(first: date, part: str | None) -> tuple[date, date]:
    """A month's days, or its early (1-10), mid (11-20) or late (21-end) part."""
    last = month_end(first.year, first.month)
    if part == "early":
        return first, first.replace(day=10)
    if part == "mid":
        return first.replace(day=11), first.replace(day=20)
    return (first.replace(day=21) if part == "late" else first), last


def _last(unit: str, today: date) -> tuple[date, date]:
    if unit == "week":
        return today - timedelta(days=14), today - timedelta(days=4)
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
        return saturday - timedelta(days=1), saturday + timedelta(days=2)
    if unit == "month":
        first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
        return first - timedelta(days=5), month_end(first.year, first.month) + timedelta(days=5)
    return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)


def day_of(value) -> date | None:
    """A memory's time (an ISO string or a datetime) as a day, or None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None
