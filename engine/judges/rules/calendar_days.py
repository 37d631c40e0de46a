"""Calendar words the date reader resolves besides plain dates (dates.date_mentions):

- named days: 'until Christmas', 'over Thanksgiving', 'between Christmas and New Year';
- seasons: 'this fall', 'until late summer', 'by the end of spring';
- parts of a month: 'mid-April' (the 15th), 'early May' (the 10th), 'late June' (its last
  day), 'the start of May' (the 1st);
- the n-th weekday of a month: 'the last Friday of March', 'the second Tuesday of next month';
- spans whose end is the date meant: 'June-August', 'from the 3rd to the 7th of next month';
- 'the week of March 16': the Sunday that ends that week (`weeks_of`).

Every one resolves to the latest day it can mean (an end date), its next occurrence on
or after today. A named day or a season is a yearly name, not a calendar date (`absolute`
False): 'every Christmas' and 'each summer' end nothing. A name is read only after a word
that makes it a time ('for Christmas', 'this fall'): 'I love Christmas' and 'I fall
asleep' name none. Names come from lexicon/dates.yaml; the patterns are code.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from functools import partial
from typing import Callable

from engine.judges.lexicon import words
from engine.judges.rules.date_parts import (
    LEXICON,
    MONTH_RE,
    WEEKDAY_RE,
    WEEKDAYS,
    DateMention,
    add_months,
    month_end,
    month_number,
    month_of,
    next_on_or_after,
)
from engine.judges.rules.words import STOPWORDS

_HOLIDAYS: dict[str, str] = {name: str(rule) for name, rule in LEXICON["holidays"].items()}
SEASONS: dict[str, tuple[int, ...]] = {
    name: tuple(int(m) for m in words(str(months))) for name, months in LEXICON["seasons"].items()
}
HOLIDAY_RE = "|".join(re.escape(n) for n in sorted(_HOLIDAYS, key=len, reverse=True))
_SEASON_RE = "|".join(SEASONS)
_NTH = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}
_NTH_RE = "|".join(_NTH) + r"|[1-5]"
# the words that make a name a time: 'for Christmas', 'until late summer', 'this fall'
_PREP = r"(?:on|by|until|till|before|after|for|over|at|during|through|thru|around|since|from|to|in|of)"
_OPENER = rf"(?:{_PREP}|this|next)\s+(?:the\s+)?"
_PART = r"(early|mid|middle|late|start|beginning|end)"
# the day a part of a month ends on (late and end: the month's last day)
_DAY_OF_PART = {"early": 10, "start": 1, "beginning": 1, "mid": 15, "middle": 15}
# the year said after a calendar word: 'Christmas 2027', 'the summer of 2027', 'mid-March, 2027'
# ('until Christmas, 2027 will be busy': a year after a comma only where the clause ends)
_YEAR = r"(?:(?:\s+(?:of\s+)?|,\s*(?=\d{4}\s*(?:[.;!?),]|$)))(\d{4})\b)?"


def _easter(year: int) -> date:
    """Easter Sunday (Western), by the anonymous Gregorian algorithm."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    el = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * el) // 451
    month, day = divmod(h + el - 7 * m + 114, 31)
    return date(year, month, day + 1)


def nth_weekday(year: int, month: int, nth: int, weekday: int) -> date | None:
    """The n-th (1-5, or -1: the last) weekday of a month; None when the month has no fifth."""
    if nth < 0:
        last = month_end(year, month)
        return last - timedelta(days=(last.weekday() - weekday) % 7)
    first = date(year, month, 1)
    day = first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (nth - 1))
    return day if day.month == month else None


def _holiday_in(rule: str, year: int) -> date | None:
    parts = rule.split()
    if parts[0] == "easter":
        return _easter(year) + timedelta(days=int(parts[1]))
    if len(parts) == 3:  # '4 thursday 11'
        nth = -1 if parts[0] == "last" else int(parts[0])
        return nth_weekday(year, int(parts[2]), nth, WEEKDAYS.index(parts[1]))
    month, day = (int(x) for x in rule.split("-"))
    return date(year, month, day)


def holiday_on(name: str, year: int) -> date | None:
    """The day a named day (as normalise() writes it: 'new year eve') falls on in `year`."""
    return _holiday_in(_HOLIDAYS[name], year)


def _holiday_of(rule: str, year: int, today: date) -> date | None:
    """A named day in the year said ('Christmas 2027'), whatever today is."""
    del today
    return _holiday_in(rule, year)


def season_span(name: str, begins: int) -> tuple[date, date]:
    """The first and last day of a season that begins in `begins` (winter runs into the
    next year)."""
    months = SEASONS[name]
    return date(begins, months[0], 1), month_end(begins + (months[2] < months[0]), months[2])


def _holiday(rule: str) -> Callable[[date], date | None]:
    def next_one(today: date) -> date | None:
        for year in (today.year, today.year + 1):
            day = _holiday_in(rule, year)
            if day is not None and day >= today:
                return day
        return None

    return next_one


def _season(name: str, part: str | None, following: bool, year: int | None) -> Callable[[date], date]:
    """The end of a season (or of its early, mid or late part) in its next occurrence
    that has not ended; `following`: 'next summer' said in summer is the one after;
    `year`: the year the season begins ('summer 2027')."""
    months = SEASONS[name]
    index = {"early": 0, "start": 0, "beginning": 0, "mid": 1, "middle": 1}.get(part or "", 2)

    def occurrence(begins: int) -> tuple[date, date, date]:
        def month(i: int) -> tuple[int, int]:
            return (begins + (months[i] < months[0]), months[i])

        start, last = date(*month(0), 1), month_end(*month(2))
        end = start if part in ("start", "beginning") else month_end(*month(index))
        return start, last, end

    def resolve(today: date) -> date:
        if year is not None:
            return occurrence(year)[2]
        for begins in range(today.year - 1, today.year + 2):
            start, last, end = occurrence(begins)
            if end >= today and not (following and start <= today <= last):
                return end
        return occurrence(today.year + 1)[2]

    return resolve


def _month_part(part: str, month: int, year: str | None) -> Callable[[date], date]:
    day = _DAY_OF_PART.get(part)

    def resolve(today: date) -> date:
        end = month_of(year, month)(today)  # this month's end, or next year's
        if day is None:
            return end
        # 'until mid-March' said on March 20: next year's (a year said is kept as said)
        said = end.replace(day=day)
        return said if year or said >= today else date(end.year + 1, month, day)

    return resolve


def _nth_of(
    nth: int, weekday: int, month: int | None, ahead: int | None, year: str | None
) -> Callable[[date], date | None]:
    """'the last Friday of March' (`month`: its next one), '... of this month' or '... of
    next month' (`ahead` 0 or 1: that month's, even one already past) or '... of the
    month' (this month's, or the next month's once it has passed)."""

    def resolve(today: date) -> date | None:
        if year is not None and month is not None:
            return nth_weekday(int(year), month, nth, weekday)
        for step in range(0, 13):
            first = add_months(today.replace(day=1), (ahead or 0) + step)
            if month is not None and first.month != month:
                continue
            day = nth_weekday(first.year, first.month, nth, weekday)
            if ahead is not None or (day is not None and day >= today):
                return day
        return None

    return resolve


def _day_of(day: int, month: int | None, ahead: int) -> Callable[[date], date | None]:
    """A day of a named month (its next occurrence), or of this or next month (`ahead`)."""
    if month is not None:
        return lambda today: next_on_or_after(today, month, day)

    def resolve(today: date) -> date | None:
        first = add_months(today.replace(day=1), ahead)
        return _safe(first.year, first.month, day)

    return resolve


def _safe(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:  # a 31st of a month of 30 days
        return None


def calendar_mentions(text: str, original: str) -> list[DateMention]:
    """The calendar words of normalised `text` (`original` as written), in any order;
    date_mentions puts them before plain dates, so 'mid-April' is read whole."""
    found: list[DateMention] = []
    for m in re.finditer(rf"\bbetween\s+(?:the\s+)?({HOLIDAY_RE})\s+and\s+(?:the\s+)?({HOLIDAY_RE})\b", text):
        found.append(DateMention(m.start(), m.end(), m[2], _span_end(m[2]), False))
    for m in re.finditer(rf"\b{_OPENER}({HOLIDAY_RE})\b{_YEAR}", text):
        rule, year = _HOLIDAYS[m[1]], _int(m[2])
        label = rule if re.fullmatch(r"\d\d-\d\d", rule) else m[1]
        resolve = _holiday(rule) if year is None else partial(_holiday_of, rule, year)
        found.append(DateMention(m.start(1), m.end(), label, resolve, False, yearly=year is None))
    for m in re.finditer(
        rf"\b(?:{_PREP}\s+(?:the\s+)?(?:(this|next)\s+)?|(this|next)\s+)(?:{_PART}[\s-]+(?:of\s+)?(?:the\s+)?)?"
        rf"({_SEASON_RE})\b{_YEAR}",
        text,
    ):
        which, part, name, year = m[1] or m[2], m[3], m[4], _int(m[5])
        if year is None and _names_a_thing(text[m.end() :]):
            continue  # 'for spring break this week', 'summer camp': the season names a thing
        label = f"{part} {name}" if part else name
        resolve = _season(name, part, which == "next", year)
        yearly = year is None and not which  # 'this summer', 'next summer': the year is said
        found.append(DateMention(m.start(), m.end(), label, resolve, False, yearly=yearly))
    for m in re.finditer(rf"\b(?:{_PART}[\s-]+|(?:the\s+)?{_PART}\s+of\s+)({MONTH_RE})\b\.?{_YEAR}", text):
        part, month = m[1] or m[2], month_number(m[3], original)
        if month is None:
            continue
        day = _DAY_OF_PART.get(part)
        label = f"{month:02d}-{day:02d}" if day else f"{month:02d}"
        found.append(DateMention(m.start(), m.end(), label, _month_part(part, month, m[4]), yearly=not m[4]))
    for m in re.finditer(
        rf"\b(?:the\s+)?({_NTH_RE})\s+({WEEKDAY_RE})\s+(?:of|in)\s+"
        rf"(?:(this|next)\s+month|the\s+month|({MONTH_RE})\b(?:,?\s+(\d{{4}}))?)",
        text,
    ):
        nth = _NTH.get(m[1]) or int(m[1])
        month = month_number(m[4], original) if m[4] else None
        if m[4] and month is None:
            continue
        resolve = _nth_of(nth, WEEKDAYS.index(m[2]), month, {"this": 0, "next": 1}.get(m[3]), m[5])
        label = f"{m[1]} {m[2]} {m[4] or m[3] or 'month'}"
        # 'the first Monday of the month' comes back every month: a name, not a date
        yearly = bool(m[4] and not m[5])
        found.append(DateMention(m.start(), m.end(), label, resolve, bool(m[3] or m[4]), yearly=yearly))
    for m in re.finditer(rf"\b({MONTH_RE})\s*[-\u2013]\s*({MONTH_RE})\b(?:,?\s+(\d{{4}}))?", text):
        # 'June-August': the span ends with its last month
        if month_number(m[1], original) and (month := month_number(m[2], original)):
            found.append(DateMention(m.start(), m.end(), f"{month:02d}", month_of(m[3], month)))
    for m in re.finditer(
        r"\b(?:from\s+)?(?:the\s+)?(\d{1,2})\s*(?:-|\u2013|to|through|thru|until|till)\s*(?:the\s+)?(\d{1,2})"
        rf"\s+of\s+(?:(this|next)\s+month|({MONTH_RE})\b)",
        text,
    ):
        day = int(m[2])
        month = month_number(m[4], original) if m[4] else None
        if m[4] and month is None:
            continue
        label = f"{month:02d}-{day:02d}" if month else f"day-{day}"
        found.append(DateMention(m.start(), m.end(), label, _day_of(day, month, int(m[3] == "next"))))
    return found


# words after a season that leave it a time: 'this summer we ...', 'until summer ends'
_AFTER_A_TIME = STOPWORDS | {"ends", "starts", "begins", "comes", "arrives", "hits", "rolls"}


def _names_a_thing(rest: str) -> bool:
    """Whether the words after a season make it part of a name ('spring break', 'summer
    camp', 'winter tires'): a word that is neither a function word nor punctuation."""
    word = re.match(r"\s*([a-z]+)", rest)
    return word is not None and word[1] not in _AFTER_A_TIME


def _int(text: str | None) -> int | None:
    return int(text) if text else None


def _span_end(then: str) -> Callable[[date], date | None]:
    """'between Christmas and New Year': the span ends on the second named day's next
    occurrence (said on December 26, inside the span, that is the coming New Year); its
    start ends nothing."""
    return _holiday(_HOLIDAYS[then])


_WEEK_OF = re.compile(r"\b(?:the\s+)?week\s+of\s+(?:the\s+)?$")


def weeks_of(text: str, chosen: list[DateMention]) -> list[DateMention]:
    """'the week of March 16': a calendar date after 'week of' stands for its week, which
    ends on the Sunday after it (as 'this week' does)."""
    out = []
    for m in chosen:
        lead = _WEEK_OF.search(text[max(0, m.start - 20) : m.start]) if m.absolute else None
        if lead:
            begins = m.start - (min(20, m.start) - lead.start())
            m = m._replace(start=begins, label=f"week of {m.label}", resolve=partial(_week_after, m.resolve))
        out.append(m)
    return out


def _week_after(resolve: Callable[[date], date | None], today: date) -> date | None:
    day = resolve(today)
    return day + timedelta(days=6 - day.weekday()) if day else None
