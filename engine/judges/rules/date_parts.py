"""What the date readers share (dates.py, calendar_days.py, when.py): the month and
weekday words of `lexicon/dates.yaml`, a found date (`DateMention`), and the arithmetic of
months. Nothing here reads the clock: "today" is always passed in.
"""

from __future__ import annotations

import calendar
import re
from datetime import date
from typing import Callable, NamedTuple

from engine.judges.lexicon import lexicon, words

LEXICON = lexicon("dates")
MONTHS: dict[str, int] = dict(LEXICON["months"])
WEEKDAYS: tuple[str, ...] = tuple(words(LEXICON["weekdays"]))
MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
FULL_MONTH_RE = "|".join(m for m in MONTHS if len(m) > 3 or m == "may")
WEEKDAY_RE = "|".join(WEEKDAYS)


class DateMention(NamedTuple):
    """A date found in text: where it is, a comparable label, and how to resolve it."""

    start: int
    end: int
    label: str  # e.g. '03-15', 'friday', 'next week'
    resolve: Callable[[date], date | None]  # today -> the date meant
    absolute: bool = True  # a calendar date, not 'tomorrow'
    is_start: bool = False  # 'since March 3': begins, does not end
    is_past: bool = False  # 'I ran a 5K today': when a past event happened, ends nothing
    yearly: bool = False  # a named day, season or part of a month without its year: a
    # 'this year' or 'next year' beside it picks the year (dates._qualified)


def month_number(name: str, original: str) -> int | None:
    """A month word's number. 'may' is usually the modal verb: it is the month only when
    written 'May' after a word of its sentence ('until May', 'mid-May', not 'May I ...')."""
    if name == "may" and not re.search(r"(?<![.!?]\s)(?<=[\s(\-\u2013])May\b", original):
        return None
    return MONTHS[name]


def month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def next_on_or_after(today: date, month: int, day: int) -> date | None:
    """A day without a year means its next occurrence on or after today."""
    for year in range(today.year, today.year + 5):  # 5 years reach the next February 29th
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue  # February 29th outside a leap year; February 30th never matches
        if candidate >= today:
            return candidate
    return None


def month_of(year: str | None, month: int) -> Callable[[date], date]:
    """A month without a day ends with the month: 'by June' -> June 30."""

    def end(today: date) -> date:
        if year:
            return month_end(int(year), month)
        y = today.year if month >= today.month else today.year + 1
        return month_end(y, month)

    return end


def add_months(today: date, months: int) -> date:
    year, month = divmod(today.month - 1 + months, 12)
    year += today.year
    return date(year, month + 1, min(today.day, calendar.monthrange(year, month + 1)[1]))
