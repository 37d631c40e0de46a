"""The expiry judge: the natural end date of a memory, if it has one."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from engine.judges.rules.dates import WEEKDAY_RE, date_mentions, past_deed
from engine.judges.rules.reading import sentences
from engine.judges.rules.words import normalise

# yearly facts, and a change said to last ('from now on', 'going forward'): no end
_NO_END = re.compile(
    r"\b(birthday|anniversary|born|date of birth|from now on|going forward|from here on|for good|"
    r"permanently)\b"
)
# a habit names days it repeats on, not a date: "every Monday", "on Saturday mornings",
# "on weekends", "usually ... on Friday"
RECURRING = re.compile(
    rf"\b(every|each|weekly|daily|nightly|monthly|yearly|annually|"
    rf"biweekly|fortnightly|hourly|(?:{WEEKDAY_RE})s|weekends|weekdays|usually|typically|"
    rf"normally|routine|(?:{WEEKDAY_RE}) of the month|"
    rf"(?:{WEEKDAY_RE}) (?:mornings|afternoons|evenings|nights))\b"
)
# Dateless states that still end. Horizons (days from today) are our choice, documented:
_HORIZONS = (
    # tied to a release or a migration: about a quarter
    (
        re.compile(
            r"\buntil (v\d|version|the next (release|version|major)|we (migrate|upgrade|"
            r"ship|release|launch|move|switch|finish)|the (migration|refactor|rewrite|"
            r"launch|release|upgrade)\b)"
        ),
        90,
    ),
    # waiting on someone or blocked: usually resolved, one way or another, in two weeks
    (
        re.compile(
            r"\b(blocked|blocking|wait|waiting|awaiting|on hold|pending|hear back|stuck on|"
            r"held up)\b"
        ),
        14,
    ),
    # explicitly temporary arrangements: a month
    (
        re.compile(
            r"\b(for now|temporar(y|ily)|for the time being|in the meantime|meanwhile|"
            r"interim|stopgap|short[- ]term|until further notice|until)\b"
        ),
        30,
    ),
    # an upcoming one-time event with no date: two weeks
    (
        re.compile(
            r"\b(upcoming|coming up|have an? (job )?(interview|meeting|call|appointment|"
            r"demo|presentation|exam|flight|trip))\b"
        ),
        14,
    ),
)


def expiry(content: str, today: datetime | date | str) -> str | None:
    """Natural end date of the memory as 'YYYY-MM-DD', or None when it has none.

    Dates named in the text win (the latest future one, so "pushed from March 15 to
    April 1" ends April 1); a date without a year is its next occurrence on/after today;
    start dates ("since", "from", "starting") are ignored. Recurring things ("every
    Monday") and yearly facts (birthdays) have no end. Without a date, temporary states
    get a horizon from today: release-bound ("until v2") 90 days, waiting/blocked 14,
    temporary ("for now") 30, an upcoming undated event 14."""
    if isinstance(today, str):  # an ISO timestamp from a template variable
        today = datetime.fromisoformat(today.strip().replace("Z", "+00:00"))
    day = today.date() if isinstance(today, datetime) else today
    content = content or ""
    parts = sentences(content)
    if any(_tells_a_past_deed(clause, day) for part in parts for clause in _CLAUSES.split(normalise(part))):
        # a deed told in the past ('bought a racket today, and will try it on Saturday')
        # stays true: the memory does not end with the plan beside it
        return None
    parts = [c for part in parts for c in _OWN_SUBJECT.split(part) if c.strip()]
    held = [_end(state, day) for part in parts for state in _state_beside_a_plan(part)]
    if held:
        # "has 12 vintage cameras now and is going to a camera fair on Saturday", "is on
        # their 5th book, which they plan to finish by Friday": the count outlives the plan
        # ("read 7 books this year" lasts the year)
        whole = _end(content, day)
        return None if None in held else max(e for e in (*held, whole) if e is not None)
    if len(parts) > 1 and any(_end(part, day) is None for part in parts):
        # several facts in one memory, one of them with no end ("has got five tops from
        # H&M so far" beside "plans to go to the mall this weekend"): the memory does not
        # end with its plan, or the lasting fact would be lost with it
        return None
    return _end(content, day)


_OWN_SUBJECT = re.compile(
    r"(?:,\s*|\s+)(?:and|but|so|while|though|although)\s+(?=(?:user|they|she|he|we|it|their|her|his|our)\b)",
    re.I,
)
# a plan or goal joined to a statement without a subject of its own
# ("..., which they plan to finish by Friday", "..., hoping to hit 300 by May", "..., with Peru
# next in April", "... and is going to a fair on Saturday"; not "..., which is on April 4":
# that is when the thing itself is)
_PLAN_BESIDE = re.compile(
    r",\s*(?:which (?:user|they|i|we|she|he) (?:plans?|hopes?|wants?|intends?|aims?)|hoping|planning|"
    r"aiming|with\b(?=[^,.;]*\bnext\b))|\s+and\s+(?=(?:is|are|am) (?:going|planning|hoping)\b|"
    r"(?:will|plans?|hopes?|wants?)\b)",
    re.I,
)
# what holds now: a count of things ("12 vintage cameras", "5th book", "fifth book") or a
# word that says so ("now", "currently", "so far")
_HOLDS_NOW = re.compile(
    r"\b(?:now|currently|so far|by now|these days|\d+(?:st|nd|rd|th)?\s+(?!am\b|pm\b|a\.m|p\.m)[a-z]+|"
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+[a-z]+)\b",
    re.I,
)


def _state_beside_a_plan(part: str) -> list[str]:
    """The statement before a plan or goal joined to it, when it says what holds now (a
    count, "now", "so far"); none otherwise."""
    pieces = _PLAN_BESIDE.split(part, maxsplit=1)
    if len(pieces) < 2 or not _HOLDS_NOW.search(pieces[0]):
        return []
    return [pieces[0]]


_CLAUSES = re.compile(r"[;,]\s+|\s+(?:and|but|so|then|while|because)\s+")


def _tells_a_past_deed(clause: str, day: date) -> bool:
    """A clause told in the past with no end of its own ahead of `day`."""
    return past_deed(clause, len(clause)) is not None and _end(clause, day) is None


def _end(content: str, day: date) -> str | None:
    text = normalise(content)
    if _NO_END.search(text):
        return None
    recurring = bool(RECURRING.search(text))
    ends = [
        m.resolve(day)
        for m in date_mentions(content)
        if not m.is_start and not m.is_past and (m.absolute or not recurring)
    ]
    future = [d for d in ends if d is not None and d >= day]
    if future:
        return max(future).isoformat()
    if recurring:
        return None
    for pattern, days in _HORIZONS:
        if pattern.search(text):
            try:
                return (day + timedelta(days=days)).isoformat()
            except OverflowError:  # today is within days of the year 9999: no horizon
                return None
    return None
