"""When a question asks about: a past day or span named relative to the day it is asked
("10 days ago", "last Saturday", "a couple of weeks ago", "last month"), as a window of
days. Recall favours the memories said within it: "what did I buy 10 days ago?" is about
what the user said that day, whatever words it used.

Nothing here reads the clock: the day the question is asked is passed in.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from engine.judges.rules.dates import WEEKDAYS, _amount, _month_end
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
    none. The first match in the question wins."""
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
    return None


def _last(unit: str, today: date) -> tuple[date, date]:
    if unit == "week":
        return today - timedelta(days=14), today - timedelta(days=4)
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
        return saturday - timedelta(days=1), saturday + timedelta(days=2)
    if unit == "month":
        first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
        return first - timedelta(days=5), _month_end(first.year, first.month) + timedelta(days=5)
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
