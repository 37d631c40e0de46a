"""Dates: find the dates a text mentions and resolve them against a given "today".

Month, weekday and number words come from `lexicon/dates.yaml`; the patterns around them
are code. Nothing here reads the clock: "today" is always passed in.
"""

from __future__ import annotations

import bisect
import calendar
import re
from datetime import date, timedelta
from functools import lru_cache, partial
from typing import Callable

from engine.judges.lexicon import lexicon, words
from engine.judges.rules.calendar_days import calendar_mentions, weeks_of
from engine.judges.rules.date_parts import (
    FULL_MONTH_RE,
    LEXICON,
    MONTH_RE,
    MONTHS,
    WEEKDAY_RE,
    WEEKDAYS,
    DateMention,
    add_months,
    month_end,
    month_number,
    month_of,
    next_on_or_after,
)
from engine.judges.rules.words import count, normalise

_LEXICON = LEXICON
_NUMBER_WORDS: dict[str, int] = dict(_LEXICON["number_words"])

DAY_RE = WEEKDAY_RE + "|tomorrow|tonight|today|next week|end of"
_AMOUNT_RE = r"(\d+|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + ")"
# A date right after these words is a start, not an end ("since March", "from May 2").
_START_BEFORE = re.compile(
    r"(since|as of|starting|started|start|began|beginning|from|joined|"
    r"born|founded|effective|last|every|each)\s+(on\s+|in\s+|the\s+)?$"
)


def _absolute(year: str | None, month: int, day: int) -> Callable[[date], date | None]:
    if year:

        def fixed(today: date) -> date | None:
            try:
                return date(int(year), month, day)
            except ValueError:
                return None

        return fixed
    return lambda today: next_on_or_after(today, month, day)


def _next_day_of_month(today: date, day: int) -> date | None:
    for months in range(0, 3):  # short months lack a 31st: look a little further
        first = add_months(today.replace(day=1), months)
        if day <= calendar.monthrange(first.year, first.month)[1]:
            candidate = first.replace(day=day)
            if candidate >= today:
                return candidate
    return None


def _full_year(text: str | None) -> str | None:
    if text and len(text) == 2:
        return "20" + text
    return text


# '3/15' only after a date word or with a year, so '3/4 spent' stays a fraction
_SLASH_DATE = re.compile(
    r"(?:\b(?:on|by|due|until|till|before|after|from|to|for|dated|"
    r"deadline|is|at)\s+|[,:]\s*|^)(\d{1,2})/(\d{1,2})(?![\d/])|"
    r"(?<![\d/.])(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})(?![\d/])"
)


def _slash_mentions(text: str) -> list[DateMention]:
    found = []
    for m in _SLASH_DATE.finditer(text):
        start, first, second, year = (
            (m.start(), m[3], m[4], _full_year(m[5])) if m[3] else (m.start(1), m[1], m[2], None)
        )
        if year is None and re.match(r"\s*(spent|done|complete|full|of)\b", text[m.end() :]):
            continue
        a, b = int(first), int(second)
        month, day = (a, b) if a <= 12 else (b, a)  # US order unless the first is a day
        if 1 <= month <= 12 and 1 <= day <= 31:
            found.append(DateMention(start, m.end(), f"{month:02d}-{day:02d}", _absolute(year, month, day)))
    return found


def _absolute_mentions(text: str, original: str) -> list[DateMention]:
    found: list[DateMention] = []
    for m in re.finditer(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", text):
        found.append(
            DateMention(
                m.start(), m.end(), f"{int(m[2]):02d}-{int(m[3]):02d}", _absolute(m[1], int(m[2]), int(m[3]))
            )
        )
    for m in re.finditer(
        rf"\b({MONTH_RE})\.?\s+(\d{{1,2}})\b(?!:)"
        rf"(?:\s*[-\u2013]\s*(\d{{1,2}})\b)?(?:,?\s+(\d{{4}}))?",
        text,
    ):
        # a range 'Mar 3-5' ends on its last day
        month, day = MONTHS[m[1]], int(m[3] or m[2])
        found.append(DateMention(m.start(), m.end(), f"{month:02d}-{day:02d}", _absolute(m[4], month, day)))
    for m in re.finditer(rf"\b(\d{{1,2}})\s+(?:of\s+)?({MONTH_RE})\b\.?(?:,?\s+(\d{{4}}))?", text):
        month, day = MONTHS[m[2]], int(m[1])
        found.append(DateMention(m.start(), m.end(), f"{month:02d}-{day:02d}", _absolute(m[3], month, day)))
    found += _slash_mentions(text)
    found += _month_mentions(text, original)
    for m in re.finditer(r"\b(?:by|in|until|till|before|during|end of)\s+(20\d\d)\b", text):
        found.append(DateMention(m.start(1), m.end(), m[1], month_of(m[1], 12)))
    return found


def _month_mentions(text: str, original: str) -> list[DateMention]:
    found = []
    for m in re.finditer(rf"\b({MONTH_RE})\s+(\d{{4}})\b", text):
        found.append(DateMention(m.start(), m.end(), f"{MONTHS[m[1]]:02d}", month_of(m[2], MONTHS[m[1]])))
    pattern = (
        rf"\b(?:in|by|until|till|before|after|during|through|for|to|from|since|"
        rf"around|this|next|last|end of|early|mid|late)"
        rf"[\s-]+(?:the\s+end\s+of\s+)?({FULL_MONTH_RE})\b"
    )
    for m in re.finditer(pattern, text):
        if (month := month_number(m[1], original)) is not None:
            found.append(DateMention(m.start(1), m.end(), f"{month:02d}", month_of(None, month)))
    for m in re.finditer(
        r"\b(?:until|till|by|before|on|after|due|through|thru|ends?|ending|"
        r"closes?|expires?) the (\d{1,2})\b" + _DAY_ENDS,
        text,
    ):
        # 'until the 12th', 'back on the 3rd', 'due the 18th': the next such day of a month
        found.append(
            DateMention(m.start(), m.end(), f"day-{m[1]}", partial(_next_day_of_month, day=int(m[1])))
        )
    for m in re.finditer(r"\bq([1-4])(?:\s+(\d{4}))?\b", text):
        quarter_end = int(m[1]) * 3
        found.append(DateMention(m.start(), m.end(), f"q{m[1]}", month_of(m[2], quarter_end)))
    return found


# after a bare day ('the 12'): the sentence goes on, not a noun ('the 12 servers')
_DAY_ENDS = (
    r"(?=\s*(?:[.,;:!?)]|$|(?:for|and|but|or|so|because|when|then|at|as|if|"
    r"unless|while|so)\b))"
)


def _week_end(today: date, weeks_ahead: int = 0) -> date:
    return today + timedelta(days=6 - today.weekday() + 7 * weeks_ahead)


def _quarter_end(today: date, ahead: int = 0) -> date:
    index = (today.month - 1) // 3 + ahead
    year, quarter = today.year + index // 4, index % 4
    return month_end(year, quarter * 3 + 3)


def _month_end_after(today: date, months: int) -> date:
    shifted = add_months(today.replace(day=1), months)
    return month_end(shifted.year, shifted.month)


def _after(amount: int | None, unit: str) -> Callable[[date], date | None]:
    if amount is None:  # a number past reading: no date
        return lambda today: None
    unit = unit.rstrip("s")
    if unit == "month":
        return lambda today: add_months(today, amount)
    if unit == "hour":
        return lambda today: today + timedelta(days=amount // 24)
    days = {"day": 1, "week": 7, "year": 365}[unit] * amount
    return lambda today: today + timedelta(days=days)


def _weekday(name: str, next_week: bool) -> Callable[[date], date]:
    index = WEEKDAYS.index(name)
    if next_week:
        # 'next Friday' is read as the Friday of next calendar week (Monday-Sunday).
        return lambda today: today + timedelta(days=7 - today.weekday() + index)
    # A bare weekday is the next one after today: said on a Monday, "until Monday" means
    # a week later (the same day would have been called "today").
    return lambda today: today + timedelta(days=(index - today.weekday() - 1) % 7 + 1)


# Relative expressions, most specific first; each maps a match to a resolver.
_RELATIVE: tuple[tuple[str, Callable[[re.Match], Callable[[date], date | None]]], ...] = (
    (r"\bday after tomorrow\b", lambda m: lambda t: t + timedelta(days=2)),
    (r"\btomorrow\b", lambda m: lambda t: t + timedelta(days=1)),
    (
        # 'this session' is a time only after a word that makes it one ('for this
        # session'); 'have this conversation with my partner' names a talk, not today
        r"\b(today|tonight|this (morning|afternoon|evening)|later today|eod|end of (the )?day|"
        r"(?:(?<=\bfor )|(?<=\bin )|(?<=\bduring )|(?<=\bthrough )|(?<=\buntil )|(?<=\bof ))"
        r"this (session|conversation))\b",
        lambda m: lambda t: t,
    ),
    (r"\bend of next week\b|\bnext weekend\b", lambda m: lambda t: _week_end(t, 1)),
    (r"\bnext week\b", lambda m: lambda t: _week_end(t, 1)),
    (
        r"\b(this week|end of (the )?week|eow|this weekend|by the weekend|over the weekend)\b",
        lambda m: lambda t: _week_end(t),
    ),
    (r"\bend of next month\b|\bnext month\b", lambda m: lambda t: _month_end_after(t, 1)),
    (r"\b(this month|end of (the )?month|eom)\b", lambda m: lambda t: month_end(t.year, t.month)),
    (r"\bnext quarter\b", lambda m: lambda t: _quarter_end(t, 1)),
    (r"\b(this quarter|end of (the )?quarter|eoq)\b", lambda m: lambda t: _quarter_end(t)),
    (r"\bnext year\b", lambda m: lambda t: date(t.year + 1, 12, 31)),
    (r"\b(this year|end of (the )?year|eoy)\b", lambda m: lambda t: date(t.year, 12, 31)),
    # A sprint is taken as two weeks, the most common length.
    (r"\bnext sprint\b", lambda m: lambda t: t + timedelta(days=28)),
    (r"\b(this|current|the) sprint\b|\bend of (the )?sprint\b", lambda m: lambda t: t + timedelta(days=14)),
    (
        rf"\b(?:in|within|for the next|next)\s+{_AMOUNT_RE}\s+(hour|day|week|month|year)s?\b",
        lambda m: _after(_amount(m[1]), m[2]),
    ),
    (rf"\b{_AMOUNT_RE}\s+(day|week|month|year)s?\s+from now\b", lambda m: _after(_amount(m[1]), m[2])),
    (rf"\bnext ({WEEKDAY_RE})\b", lambda m: _weekday(m[1], True)),
    (rf"\b({WEEKDAY_RE})\b", lambda m: _weekday(m[1], False)),
)
# 'for two weeks' is an end only when the sentence is not about the past
# ("I've used Python for 5 years" has no end date).
_FOR_SPAN = re.compile(
    rf"\b(?:for\s+(?:another\s+|the\s+next\s+)?|another\s+)"
    rf"{_AMOUNT_RE}\s+(?:more\s+|other\s+)?(day|week|month)s?\b"
)
_PAST_MARKERS = re.compile(r"\b(have|has|had|been|was|were|ago|past|last|over the)\b")
_ARRANGING = frozenset(words(_LEXICON["arranging_verbs"]))


# A relative date ('today', 'on Friday', 'this weekend') in a clause told in the past tense
# is when that event happened, at or before the time the turn was said: never an end date.
# (A span after a past deed is how long it lasted, unless the deed arranges what runs on:
# 'paused it for two weeks'; see _ends_nothing.)
# 'The meeting was moved to Friday' or 'I booked a table for tonight' name a time ahead
# (a date after these words is the target of the deed, not its time).
_PHRASING = lexicon("phrasing")
_IRREGULAR_PAST = set(words(_PHRASING["irregular_past"])) - set(words(_PHRASING["past_like_present"]))
# (-ed after three letters or more: "bed", "need" are no past; "died", "tied" are: a short -ied)
_PAST_VERB = re.compile(
    r"\b(?:[a-z]{3,}ed|[a-z]ied|" + "|".join(sorted(_IRREGULAR_PAST, key=len, reverse=True)) + r")\b"
)
NOT_PAST_ED = frozenset(words(_PHRASING["not_past_ed"]))  # 'need', 'feed': -ed, not past
# an -ed word after these says how something is, not what was done: 'is closed', 'am tired'
_PRESENT_BEFORE = re.compile(
    r"\b(?:am|is|are|be|being|get|gets|getting|feel|feels|feeling|seem|seems|looks?)\s+(?:\w+\s+)?$"
)
_AHEAD = re.compile(
    r"\b(?:will|shall|going to|gonna|plan|plans|planning|about to|want to|wants to|hope to|"
    r"hoping to|intend|intends|intending|upcoming|later|soon|tomorrow|next|needs? to|have to|"
    r"has to|must|should|would like)\b"
)
_TARGET_BEFORE = re.compile(r"\b(?:for|to|until|till|by|before|through|due|on or before)\s+(?:the\s+)?$")
# a spaced dash joins two clauses as a comma does ('boots that need polishing - I last
# polished them in November')
_CLAUSE_END = re.compile(r"[,;:.!?]|\s[-\u2013\u2014]\s|\b(?:and|but|so|while|because|then)\b")
_CLAUSE_START = re.compile(r".*(?:[,;:.!?]|\s[-\u2013\u2014]|\b(?:and|but|so|while|because|then))\s", re.S)


CLAUSE_REACH = 400  # characters: longer than any clause a person says


def told_as_past(text: str, at: int) -> bool:
    """Is the clause of (normalised) `text` that leads to position `at` told in the past
    tense: a past-tense verb, nothing in it that looks ahead, and the date not the target
    of a deed ('moved to Friday', 'booked for tonight')?"""
    return past_deed(text, at) is not None


def past_deed(text: str, at: int, end: int | None = None) -> str | None:
    """The past-tense verb of the clause leading to position `at` when that clause is
    told in the past (see `told_as_past`), else None. A date that opens its clause
    ('yesterday I sold the car', 'today we finally moved') dates the verb after it: with
    `end` (where the date ends) that clause is read instead. A clause is read within
    CLAUSE_REACH characters either side: a text of thousands of dates is read in time
    proportional to its length, not to its length times its dates."""
    before = text[max(0, at - CLAUSE_REACH) : at]
    if _TARGET_BEFORE.search(before):
        return None
    m = _CLAUSE_START.match(before)
    clause = before[m.end() :] if m else before
    if end is not None and not _PAST_VERB.search(clause) and len(clause.split()) <= 2:
        clause = _CLAUSE_END.split(text[end : end + CLAUSE_REACH], maxsplit=1)[0]
    if m and re.match(r"\s*[a-z]+ing\b", clause):  # 'ran a 10K, finishing in 52 minutes'
        m2 = _CLAUSE_START.match(before[: m.end() - 1])
        clause = before[m2.end() if m2 else 0 :]
    if _AHEAD.search(clause):
        return None
    for verb in _PAST_VERB.finditer(clause):
        if verb[0] in NOT_PAST_ED:
            continue
        if verb[0].endswith("ed") and _PRESENT_BEFORE.search(clause[: verb.start()]):
            continue
        return verb[0]
    return None


def _amount(word: str) -> int | None:
    return _NUMBER_WORDS.get(word) or count(word)


def _within_range(resolve: Callable[[date], date | None]) -> Callable[[date], date | None]:
    """`resolve`, answering None for a date past what a date holds (the year 9999: 'in
    10000 years', 'in 99999 months'): no end date a memory can keep."""

    def resolved(today: date) -> date | None:
        try:
            return resolve(today)
        except (OverflowError, ValueError):
            return None

    return resolved


def _relative_mentions(text: str) -> list[DateMention]:
    found = []
    for pattern, build in _RELATIVE:
        for m in re.finditer(pattern, text):
            found.append(DateMention(m.start(), m.end(), m[0], build(m), False))
    if not _PAST_MARKERS.search(text):
        for m in _FOR_SPAN.finditer(text):
            found.append(DateMention(m.start(), m.end(), m[0], _after(_amount(m[1]), m[2]), False))
    return found


@lru_cache(maxsize=2048)
def date_mentions(original: str) -> tuple[DateMention, ...]:
    """Every date `original` mentions, in order; absolute dates win over overlapping
    relative words ('Friday March 3' is one date), and calendar words (calendar_days:
    'mid-April', 'until Christmas', 'the last Friday of March') win over both."""
    text = normalise(original)
    chosen: list[DateMention] = []
    starts: list[int] = []  # of the chosen, which never overlap: sorted, so are their ends
    ends: list[int] = []
    for mention in (
        calendar_mentions(text, original) + _absolute_mentions(text, original) + _relative_mentions(text)
    ):
        # overlapping a chosen one: only the last chosen to start before this one ends can
        # (a search, not a scan of all: a text with thousands of dates stays linear)
        i = bisect.bisect_left(starts, mention.end)
        if i and ends[i - 1] > mention.start:
            continue
        if _START_BEFORE.search(text[max(0, mention.start - 25) : mention.start]):
            mention = mention._replace(is_start=True)  # 'since March 3' ends nothing
        elif _ends_nothing(text, mention):
            mention = mention._replace(is_past=True)  # 'I ran a 5K today' ends nothing
        chosen.append(mention)
        starts.insert(i, mention.start)
        ends.insert(i, mention.end)
    return tuple(
        sorted(
            (m._replace(resolve=_within_range(m.resolve)) for m in _qualified(weeks_of(text, chosen))),
            key=lambda m: m.start,
        )
    )


_HAS_YEAR = re.compile(r"\d{4}|\d/\d+/\d")
OWN_EVENT = re.compile(r"\b(?:%s)s?\b" % "|".join(words(_LEXICON["own_events"])))
_SOMEONE = re.compile(r"\b(?:i|we|user|my|our)\b")


def takes_part_today(text: str, mention: DateMention) -> bool:
    """'I'm playing in the charity tournament today', 'User is going to a wedding
    tonight': a person's own event on the day it is told (not 'the release is today')."""
    if mention.label not in ("today", "tonight"):
        return False
    m = _CLAUSE_START.match(text[: mention.start])
    clause = text[m.end() if m else 0 : mention.start]
    return bool(_SOMEONE.search(clause) and OWN_EVENT.search(clause))


def _ends_nothing(text: str, mention: DateMention) -> bool:
    """A date told in the past is when something happened, not when a fact ends: a
    relative date ('I ran a 5K today') or a calendar date without a year ('attended the
    festival on February 26th', 'adopted in January') in a clause told in the past. A span
    after a past deed is how long it lasted ('attended for a week'), unless the deed
    arranges something that runs on from now ('paused it for two weeks'). Dates with a
    year, and ends named by their own words ('until the 12th', 'q3'), keep their end. Nor
    does the day of an event the user takes part in (`takes_part_today`)."""
    if takes_part_today(text, mention):
        return True
    if _FOR_SPAN.match(mention.label):
        deed = past_deed(text, mention.start)
        return deed is not None and deed not in _ARRANGING
    if mention.absolute and (
        mention.label.startswith(("day-", "q")) or _HAS_YEAR.search(text[mention.start : mention.end])
    ):
        return False
    return past_deed(text, mention.start, mention.end) is not None


_YEAR_WORD = re.compile(r"(this|next) year")


def _qualified(chosen: list[DateMention]) -> list[DateMention]:
    """'on October 8 this year', 'until Christmas next year': a year word beside a calendar
    date or a yearly name (DateMention.yearly) qualifies it (next year's October 8) rather
    than being an end of its own (December 31)."""
    years = [m for m in chosen if _YEAR_WORD.fullmatch(m.label)]
    dated = [m for m in chosen if m.yearly or (m.absolute and re.fullmatch(r"\d\d(-\d\d)?", m.label))]
    if not years or not dated:
        return chosen
    ahead = any(m.label.startswith("next") for m in years)
    out = [m for m in chosen if m not in years]
    if ahead:
        out = [m._replace(resolve=_in_next_year(m.resolve)) if m in dated else m for m in out]
    return out


def _in_next_year(resolve: Callable[[date], date | None]) -> Callable[[date], date | None]:
    return lambda today: resolve(date(today.year + 1, 1, 1))


def read_dates(text: str, today: date) -> list[date]:
    """Every end date mentioned in `text` (not start dates), resolved against `today`."""
    resolved = (m.resolve(today) for m in date_mentions(text) if not m.is_start and not m.is_past)
    return [d for d in resolved if d is not None]
