"""Contrasts: the words that make two otherwise identical sentences say different things.

"The backup job runs daily" and "... weekly" share every topic word; what tells them apart
is a value no number or date reader sees: a cadence, a part of the day, a how-often word
("always" / "sometimes"), or one end of a setting or scale the contradiction judge knows
("on" / "off", "short" / "long"). `contrasts` reads them as (kind, value) pairs, each in
one notation ("fortnightly" is "every two weeks", "each evening" is "every night"), and
`contrast` says whether two texts disagree on one of them.

The word lists are data: periods and cadence words in `lexicon/dates.yaml`, how-often
words in `lexicon/words.yaml`, settings and scales in `lexicon/superseding.yaml`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from engine.judges.lexicon import lexicon, words
from engine.judges.rules.dates import WEEKDAY_RE
from engine.judges.rules.words import WORD_RE, canon, count

_DATES, _WORDS, _SUPERSEDING = lexicon("dates"), lexicon("words"), lexicon("superseding")


def _period(text: str) -> tuple[int, str]:
    count, unit = text.split()
    return int(count), unit


_ADVERBS = {word: _period(p) for word, p in _DATES["cadence_words"].items()}
_PERIODS = {word: _period(p) for word, p in _DATES["periods"].items()}
_PERIODS.update(dict.fromkeys(words(_DATES["weekdays"]), (1, "week")))
_COUNTS = {
    **{w: n for w, n in _DATES["number_words"].items() if w not in ("a", "an")},
    **_DATES["times_words"],
}
_PARTS = dict(_DATES["parts_of_day"])
_HOW_OFTEN = {word: row for row, raw in _WORDS["how_often"].items() for word in words(raw)}
# the contradiction judge's flips and opposites; a pair of cadence words ([daily, weekly])
# is left to the cadence reader, which knows hourly and fortnightly too
_PAIRS = tuple(
    (canon(a), canon(b))
    for a, b in _SUPERSEDING["flips"] + _SUPERSEDING["opposites"]
    if a not in _ADVERBS and b not in _ADVERBS
)


def _alternatives(names) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))


_NUM = rf"\d+|{_alternatives(k for k in _COUNTS if k not in _DATES['times_words'])}"
_ONCE = _alternatives(_DATES["times_words"])
_UNIT = _alternatives(_PERIODS)
_ADVERB = _alternatives(_ADVERBS)
_DAYS = _alternatives([*words(_DATES["weekdays"]), "weekday", "weekend"])
# days, not hours, count as times: "2 days a week" is twice, "2 hours a day" a duration
_TIMES_OF = _alternatives(p for p, (_, unit) in _PERIODS.items() if unit not in ("minute", "hour"))
# Each reading of a cadence, tried in this order; what one reads the next does not read
# again ("twice weekly" is twice a week, not also weekly).
_COUNTED = re.compile(  # "twice a week", "3 times a day", "2 days a week", "twice weekly"
    rf"\b(?:(?P<once>{_ONCE})|(?P<n>{_NUM})\s*(?:times|x|(?:{_TIMES_OF})s?))\s+"
    rf"(?:(?:a|an|per|every|each)\s+(?P<unit>{_UNIT})|(?P<adverb>{_ADVERB}))\b"
)
_EVERY = re.compile(  # "every day", "each evening", "every other week", "every 2 weeks"
    rf"\b(?:every|each)\s+(?P<other>other\s+)?(?:(?P<n>{_NUM})\s+)?(?P<unit>{_UNIT})s?\b"
)
_RATE = re.compile(  # "10 percent per day", "10,000 steps a day", "1,400 euros a month"
    rf"(?:\bper|(?:\b(?:\d[\d.,]*%?|{_NUM})(?:\s+[^\s\d]+){{0,2}}?\s+)(?:a|an))\s+"
    rf"(?P<unit>{_UNIT})\b"
)
_ON_DAYS = re.compile(rf"\b(?:on|at)\s+(?P<unit>{_DAYS})s\b")  # "on Mondays", "at weekends"
_ADVERB_ALONE = re.compile(rf"\b(?P<adverb>{_ADVERB})\b")  # "daily", "fortnightly"
_READINGS = (_COUNTED, _EVERY, _RATE, _ON_DAYS, _ADVERB_ALONE)
_ANY_PERIOD = re.compile(rf"\b(?:{_UNIT}|{_ADVERB})")
_WEEKDAY = re.compile(rf"(?:{WEEKDAY_RE})s?")
_PART = re.compile(rf"\b({_alternatives(_PARTS)})\b")
# "on", "off", "yes" are a setting only as a state ("dark mode is on in the editor",
# "turned the alerts off", "leave it on."), never as the preposition of "is on Mondays"
_STATE = re.compile(
    r"\b(?:turn|switch)(?:s|es|ed|ing)?\s+(?:(?!(?:at|in|on|by|for)\b)[\w-]+\s+){0,3}?(on|off)\b|"
    r"\b(?:is|are|was|were|be|been|stays?|stayed)\s+(on|off|yes)\b"
    r"(?=\s*(?:[.,;:!?]|$|(?:in|on|for|at|by|during|now|again|and|but)\b))|"
    r"\b(on|off|yes)\b(?=\s*(?:[.,;:!?]|$))"
)


def contrasts(norm: str, concepts: frozenset[str]) -> frozenset[tuple[str, str]]:
    """What a text (normalised, and its tokens) says that can tell it apart from an
    otherwise equal one: ('every', '1/2 week') for a cadence, ('part', 'evening'),
    ('often', 'usually'), and ('on|off', 'off') for the end of a setting or scale."""
    found = {("every", c) for c in _cadences(norm)}
    found |= {("part", _PARTS[m]) for m in _PART.findall(norm)}
    said = WORD_RE.findall(norm)
    found |= {("often", _HOW_OFTEN[w]) for w in said if w in _HOW_OFTEN}
    held = concepts | {next(filter(None, m.groups())) for m in _STATE.finditer(norm)}
    found |= {(f"{a}|{b}", a if a in held else b) for a, b in _PAIRS if (a in held) != (b in held)}
    return frozenset(found)


@lru_cache(maxsize=4096)
def contrast_words(norm: str) -> frozenset[str]:
    """The tokens of the phrases a cadence or a part of the day is read from ('every
    morning', 'daily', 'twice a week'): the contrast says what they say, and compares it
    ('daily' and 'every day' alike, 'weekly' apart)."""
    spans = [m for pattern in _READINGS for m in pattern.finditer(norm)] if _ANY_PERIOD.search(norm) else []
    spans += list(_PART.finditer(norm))
    # a day of the week is a value both texts can share ("on Thursdays"), not only a cadence
    return frozenset(canon(w) for m in spans for w in WORD_RE.findall(m[0]) if not _WEEKDAY.fullmatch(w))


def _cadences(norm: str) -> set[str]:
    """Each cadence the text names, as '<times>/<count> <unit>': 'twice a week' is
    '2/1 week', 'biweekly' and 'every other week' '1/2 week'."""
    found: set[str] = set()
    if not _ANY_PERIOD.search(norm):
        return found  # most texts name no period: the five readings below are skipped
    for pattern in _READINGS:
        matches = list(pattern.finditer(norm))
        found.update(c for c in map(_cadence, matches) if c is not None)
        for m in matches:
            norm = norm[: m.start()] + " " * (m.end() - m.start()) + norm[m.end() :]
    return found


def _cadence(m: re.Match) -> str | None:
    """None when its number is past reading ('every 10^5000 weeks')."""
    g = m.groupdict()
    every: int | None
    every, unit = _ADVERBS[g["adverb"]] if g.get("adverb") else _PERIODS[g["unit"]]
    times: int | None = 1
    if m.re is _COUNTED:  # "3 times a week": three in one week
        times = _COUNTS[g["once"]] if g["once"] else _number(g["n"])
    elif m.re is _EVERY:  # "every 2 weeks", "every other week": one in two weeks
        n = _number(g["n"]) if g["n"] else 1
        every = None if n is None else every * n * (2 if g["other"] else 1)
    if times is None or every is None:
        return None
    return f"{times}/{every} {unit}"


def _number(word: str) -> int | None:
    return count(word) if word.isdigit() else int(_COUNTS[word])


def contrast(a: frozenset[tuple[str, str]], b: frozenset[tuple[str, str]]) -> bool:
    """Do two texts disagree on a contrast? On a kind both name, each holds a value the
    other lacks: 'daily' and 'weekly' disagree; 'daily' and 'nightly' agree (one says
    more: the part of the day), and so do 'in the morning and evening' and 'in the
    morning'. A kind only one of them names is no disagreement."""
    if not a or not b:
        return False  # most pairs: one of them names no contrast at all
    kinds_a, kinds_b = _by_kind(a), _by_kind(b)
    return any(kinds_a[k] - kinds_b[k] and kinds_b[k] - kinds_a[k] for k in kinds_a.keys() & kinds_b.keys())


def _by_kind(found: frozenset[tuple[str, str]]) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for kind, value in found:
        grouped.setdefault(kind, set()).add(value)
    return grouped
