"""Reading: what every judge needs to know about one text, read once.

`read` gives a `Reading` (tokens, topic, lexicon members, values, and the cues of
negation, change, addition and progress); `similarity` compares two of them. The cue
patterns are code; the words that end a phrase are in `lexicon/reading.yaml`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from engine.judges.lexicon import lexicon, words
from engine.judges.lexicon.slots import MEMBER_OF
from engine.judges.rules.contrasts import contrast, contrast_words, contrasts
from engine.judges.rules.dates import WEEKDAY_RE, date_mentions
from engine.judges.rules.words import (
    CUE_WORDS,
    GENERIC,
    HYPHENATED,
    SLOT_OF,
    STANCE,
    STOPWORDS,
    WORD_RE,
    canon,
    is_value,
    normalise,
    token_tuple,
)

_LEXICON = lexicon("reading")

# Negative words that affirm: "not going back" seals a switch, "no doubt" is a yes.
NOT_NEGATION = re.compile(
    r"\b(?:not|never|no) (?:going |gonna |looking |looked |look |"
    r"went |turning )?back\b|\bno (?:doubt|regrets|question|problem|"
    r"worries|going back)\b|\bnot (?:bad|only)\b|\bnever looked back\b|"
    r"\bcan not (?:wait|recommend \w+ enough)\b"
)
NEGATION = re.compile(
    r"\b(not|no|never|without|stopped|quit|dislike\w*|hate\w*|avoid\w*|"
    r"nobody|nothing|neither|nor|out of|away from|unable|"
    r"intoleran\w*)\b"
)
# parting with a thing of one's own ('sold the Civic', 'gave my Kindle away'): a change, and
# what follows is the thing left behind
PARTING = r"sold|got rid of|donated|gave away|returned"
_OWNED = r"my|our|the|his|her|their"
STRONG_CHANGE = re.compile(
    r"\b(switch(ed|ing)?|migrat(ed|ing|e)|moved|moving|replac(ed|ing|e)|instead|no longer|"
    r"anymore|stopped|quit|ditched|dropped|abandoned|gave up|changed|swapped|traded|rather than|"
    r"pushed|postponed|delayed|rescheduled|bumped|brought forward|cancel+ed|went back to|"
    r"converted|transitioned|upgraded|downgraded|is now|are now|now (uses?|prefers?|on)|"
    r"slipped|slid|rewr(o|i)te|rewritten|increased|decreased|raised|lowered|reduced|"
    r"extended|left(?![- ](side|hand|panel|column|sidebar|corner|over|click))|resigned|"
    rf"relocat(ed|ing)|transferred to|ported|({PARTING}) ({_OWNED})|gave ({_OWNED}) ([\w-]+ ){{0,2}}away|"
    r"(not|never|nobody|no one) miss(es|ed)?)\b"
)
_WEAK_CHANGE = re.compile(
    r"(?<!for )\bnow\b|\bthese days\b|\bnowadays\b|\bstarted using\b|"
    r"\bpicked up\b|\bactually\b"
)
# 'too' adds only at a clause's end ("likes Rust too"), not before a word ("too slow")
_ADDITIVE = re.compile(
    r"\btoo\b(?=\s*(?:[.,;!?)]|$))|\b(also|as well|in addition|additionally|another|besides|both|"
    r"along with|on top of|alongside)\b"
)
_PROGRESSION = re.compile(
    r"\b(added|adding|finished|finishing|implemented|implementing|"
    r"completed|next step|built|wrote|set up|integrated|refactored|"
    r"improved|done with|merged|shipped|deployed)\b"
)
# What comes after these words is the thing being left behind ("stopped using poetry").
OLD_SIDE = re.compile(
    r"\b(?:from|instead of|rather than|no longer(?: use| using| uses| on)?|"
    r"stopped(?: using| with)?|replaced|traded(?: in)?|ditched|dropped|quit|abandoned|"
    r"gave up(?: on)?|not using|away from|left|resigned from|"
    rf"(?:{PARTING})(?=\s+(?:{_OWNED}) )|gave(?=\s+(?:{_OWNED}) (?:[\w-]+ ){{0,2}}away\b)|"
    r"(?:not|never|nobody|no one) miss(?:es|ed)?)\s+([\w.+#\- ]+)"
)
# What comes after these words is the new value ("moved to Berlin").
NEW_SIDE = re.compile(r"\b(?:to|with|onto|into|now)\s+([\w.+#\- ]+)")
SIDE_BREAK = frozenset(words(_LEXICON["side_break"]))
FIRST_PERSON = re.compile(r"\b(i|we|my|our|me|us)\b")
# Something expected that has not happened yet: a wait, like "blocked on the review"
# ("my order has not arrived yet", "the refund has not come through").
NOT_YET = (
    r"(?:has|have|had|is|are) (?:still )?not (?:yet )?(?:arrived|come( through| in)?|"
    r"shipped|landed|started|been \w+|here|back|in)(?: yet)?\b|\bstill not (?:here|in)\b"
)


class Reading(NamedTuple):
    """What the judges need to know about one piece of text."""

    text: str  # normalised text
    concepts: frozenset[str]  # tokens()
    topic: frozenset[str]  # concepts minus stance, cues and values
    members: frozenset[tuple[str, str]]  # (category, member) from the lexicon
    slots: frozenset[str]  # categories named by a slot word ('editor')
    values: frozenset[str]  # dates, weekdays, numbers, versions
    contrasts: frozenset[tuple[str, str]]  # cadence, part of day, how often, a setting
    negative: bool  # says something is not / no longer so
    strong_change: bool
    weak_change: bool
    additive: bool
    progression: bool
    past: frozenset[str] = frozenset()  # the values that date a deed told in the past


def side_words(pattern: re.Pattern, text: str) -> frozenset[str]:
    """Tokens of the few words after each match of `pattern` ('from poetry' -> poetry)."""
    found: set[str] = set()
    for m in pattern.finditer(text):
        for word in WORD_RE.findall(m[1])[:4]:
            if word in SIDE_BREAK:
                break
            if word not in STOPWORDS:
                found.add(canon(word))
    return frozenset(found - GENERIC)


NUMBER_WORDS = _NUMBER_WORDS = {
    w: str(n) for w, n in lexicon("dates")["number_words"].items() if w not in ("a", "an")
}
_NUMBER_WORD = re.compile(r"\b(%s)\b(?! of\b)" % "|".join(_NUMBER_WORDS))


def _clock(m: re.Match) -> str:
    hour, minute = int(m[1]), int(m[2] or 0)
    if m[3] == "pm" and hour < 12:
        hour += 12
    if m[3] == "am" and hour == 12:
        hour = 0
    return f"{hour:02d}:{minute:02d}"


# "third grade" reads as "3rd grade" does (normalised to "3 grade"): a place in a sequence is
# a value. "first" and "second" are left as words ("first, ...", "a second opinion").
ORDINAL_WORDS = {
    w: str(n)
    for n, w in enumerate(
        "third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split(), start=3
    )
}
# ... never a fraction: "a third of my salary", "two fifths"
_ORDINAL = re.compile(r"(?<!\ba )(?<!\bone )\b(%s)\b(?= (?!of\b)[a-z])" % "|".join(ORDINAL_WORDS))


def notation(text: str) -> str:
    """One notation for equal values: '6pm', '6 pm' and '18:00' read '18:00', 'noon'
    '12:00' and 'midnight' '00:00'; '10,000', '10k' and 'ten thousand' read '10000'; '30s'
    reads '30'."""
    text = re.sub(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b", _clock, text)
    text = re.sub(r"\b(?:noon|midday)\b", "12:00", re.sub(r"\bmidnight\b", "00:00", text))
    text = re.sub(r"\b(\d{1,2}):(\d{2})\b", lambda m: f"{int(m[1]):02d}:{m[2]}", text)
    text = re.sub(r"\b(\d{1,3}(?:,\d{3})+)\b", lambda m: m[1].replace(",", ""), text)
    text = re.sub(
        r"\b(%s) (thousand|hundred)\b" % "|".join(_NUMBER_WORDS),
        lambda m: str(int(_NUMBER_WORDS[m[1]]) * (1000 if m[2] == "thousand" else 100)),
        text,
    )
    text = re.sub(
        r"\b(\d+)k\b", lambda m: (m[1].lstrip("0") + "000").lstrip("0") or "0", text
    )  # as str(int(n) * 1000), with no int() of a number of any length
    text = _ORDINAL.sub(lambda m: ORDINAL_WORDS[m[1]], text)
    return re.sub(r"\b(\d+)(?:s|sec|secs|mb|gb|kb|km|kg|min|mins)\b", r"\1", text)


def undated(original: str) -> str:
    """The normalised text with every date blanked out: 'May 10' is a date, not 'may'."""
    rest = normalise(original)
    for m in date_mentions(original):
        rest = rest[: m.start] + " " * (m.end - m.start) + rest[m.end :]
    return rest


def _values(text: str, original: str) -> frozenset[str]:
    values = {m.label for m in date_mentions(original)}
    rest = notation(undated(original))  # dates are read once, as dates
    values.update(re.findall(r"\b\d{2}:\d{2}\b|\bv?\d+(?:\.\d+)*(?:%|k|am|pm)?\b", rest))
    # "three reviewers" holds the value 3
    values.update(_NUMBER_WORDS[w] for w in _NUMBER_WORD.findall(rest))
    values.update(m[1] for m in re.finditer(rf"\b({WEEKDAY_RE})s\b", text))  # 'on Tuesdays'
    return frozenset(values)


# words that link a text to the talk, not to a thing ("By the way, my laptop ..."), with
# the comma after them
OPENERS = re.compile(r"\b(?:by the way|speaking of(?: which)?|on that note|oh|anyway)\b,?\s*")


@lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """Read `text` once; every judge works from this."""
    norm = normalise(text)
    # words read in one notation: '6pm' and '18:00', '3k' and '3000' are the same words;
    # words that link the text to the talk ('by the way') are none of what it says
    concepts = frozenset(token_tuple(notation(OPENERS.sub(" ", norm))))
    members = frozenset((cat, w) for w in concepts for cat in MEMBER_OF.get(w, ()))
    slots = frozenset(cat for w in concepts for cat in SLOT_OF.get(w, ()))
    topic = frozenset(w for w in concepts if w not in STANCE and w not in CUE_WORDS and not is_value(w))
    return Reading(
        norm,
        concepts,
        topic,
        members,
        slots,
        _values(norm, text),
        contrasts(norm, concepts),
        negated(norm),
        bool(STRONG_CHANGE.search(norm)),
        bool(_WEAK_CHANGE.search(norm)),
        bool(_ADDITIVE.search(norm)),
        bool(_PROGRESSION.search(norm)),
        frozenset(m.label for m in date_mentions(text) if m.is_past),
    )


_CLAUSE = re.compile(r"[,;.:!?]|\b(?:and|but|because|so|while|whereas)\b")


def negated(norm: str) -> bool:
    """Does the text say something is not so? A clause is negative when it holds an odd
    number of negations: two cancel ("never deploy without a review" says reviews always
    come first, like "deploys happen only after review"; "no longer allergic" is not).
    Negative words that affirm ("not going back") count for none."""
    clauses = _CLAUSE.split(NOT_NEGATION.sub(" ", norm))
    return any(len(NEGATION.findall(c)) % 2 == 1 for c in clauses)


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def members_by_category(reading: Reading) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for category, member in reading.members:
        grouped.setdefault(category, set()).add(member)
    return grouped


def conflict(a: Reading, b: Reading) -> bool:
    """Do two texts disagree on polarity, on a slot's member, on a value, or on a
    contrast ('daily' / 'weekly', 'in the morning' / 'at night', 'on' / 'off')?"""
    if a.negative != b.negative:
        return True
    ma, mb = members_by_category(a), members_by_category(b)
    # "pytest over unittest" and "pytest" agree; "pytest" and "unittest" do not
    if any(ma[c] - mb[c] and mb[c] - ma[c] for c in ma.keys() & mb.keys()):
        return True
    if a.values and b.values and a.values != b.values:
        return True
    return contrast(a.contrasts, b.contrasts)


def gist(reading: Reading) -> frozenset[str]:
    """Topic words plus values: what a memory says, without how strongly it says it.

    A slot word next to one of its members adds nothing ("Postgres database" says no more
    than "Postgres"), so it is dropped."""
    held = {category for category, _ in reading.members}
    found = reading.topic | {v for v in reading.concepts if is_value(v)}
    return frozenset(w for w in found if not SLOT_OF.get(w, set()) & held)


# After these words a text elaborates or names what it is preferred over: "readable code
# over clever one-liners", "clear code with descriptive names". Those words say less
# about what the memory is than the words before them.
_TAIL = re.compile(
    r"\b(?:over|rather than|instead of|more than|than|with|such as|including|"
    r"especially|particularly|except|e\.g\.?|like)\b"
)
_TAIL_WEIGHT = 0.5


def _weights(reading: Reading) -> dict[str, float]:
    """The gist of a text, each word weighted 1 in the main part and less in a tail. The
    words of a cadence or a part of the day are left to the contrasts, which compare them
    ('every morning' and 'daily at 9:30 am' are one cadence, in other words), and a
    hyphenated word counts once, joined ('stand-up' is 'standup', not also 'stand')."""
    words_of = gist(reading)
    said: dict[str, float] = {}
    if reading.contrasts:
        words_of -= contrast_words(reading.text)
        # ... which count as one word of half weight each: a habit is more than its cadence
        said = {f"~{k}:{v}": _TAIL_WEIGHT for k, v in reading.contrasts if k in ("every", "part")}
    joined = [m for m in HYPHENATED.findall(reading.text) if canon("".join(m)) in words_of]
    words_of -= {canon(part) for m in joined for part in m}
    return said | _gist_weights(reading, words_of)


def _gist_weights(reading: Reading, words_of: frozenset[str]) -> dict[str, float]:
    """Each word 1 in the main part, _TAIL_WEIGHT in a tail."""
    m = _TAIL.search(reading.text)
    if not m or not set(token_tuple(reading.text[: m.start()])) & words_of:
        return dict.fromkeys(words_of, 1.0)
    main = set(token_tuple(reading.text[: m.start()]))
    # a named tool is the substance of a memory wherever it stands ("manages deps with uv")
    return {w: 1.0 if w in main or w in MEMBER_OF or is_value(w) else _TAIL_WEIGHT for w in words_of}


def similarity(a: str, b: str) -> float:
    """How far two texts say the same thing, 0..1 (0 when they conflict).

    A weighted Jaccard overlap of their gists: words of a trailing elaboration or contrast
    ("... over clever one-liners", "... with descriptive names") weigh half."""
    ra, rb = read(a), read(b)
    if conflict(ra, rb):
        return 0.0
    wa, wb = _weights(ra), _weights(rb)
    wa = {_clipping_of(w, wb): weight for w, weight in wa.items()}
    wb = {_clipping_of(w, wa): weight for w, weight in wb.items()}
    both = wa.keys() | wb.keys()
    if not both:
        return 0.0
    shared = sum(min(wa.get(w, 0.0), wb.get(w, 0.0)) for w in both)
    return shared / sum(max(wa.get(w, 0.0), wb.get(w, 0.0)) for w in both)


def _clipping_of(word: str, others) -> str:
    """`word`, or the word of `others` it is clipped from ('prod' -> 'production',
    'physio' -> 'physiotherapist'). A clipping keeps four letters or more and drops five
    or more: 'fire' is no 'firewall', 'note' no 'notebook' (compounds drop a word)."""
    if len(word) < 4 or word in others:
        return word
    longer = [w for w in others if w.startswith(word) and len(w) >= len(word) + 5]
    return longer[0] if len(longer) == 1 else word  # two would be a guess


def clearly_nearest(similar: dict[int, float], at_least: float, lead: float) -> int | None:
    """The candidate nearest in meaning (by embedding cosine) when it is at least this
    close and stands `lead` ahead of the next one; None when two are near alike, or fewer
    than two were measured (a lone candidate has nothing to stand ahead of)."""
    if len(similar) < 2:
        return None
    (first, best), (_, second) = sorted(similar.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
    return first if best >= at_least and best - second >= lead else None


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_TITLES = frozenset(("dr", "mr", "mrs", "ms", "mx", "prof"))
_ABBREVIATIONS = frozenset(("vs", "approx", "dept", "fig", "etc"))
_DOTTED = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")


def _ends_a_word(text: str, end: re.Match) -> bool:
    """Is the period before `end` (a match of _SENTENCE_END) a word's, not the sentence's?
    A title's ('Dr. Flores'; 'St. Patrick's Day' but not 'Main St. The rent'), a middle
    initial's ('Michael J. Fox'), a dotted abbreviation's before a word in lower case or a
    number ('9 a.m. every Monday', 'e.g. pytest'; not 'at 5 p.m. Bring snacks')."""
    before = text[max(0, end.start() - 40) : end.start()]
    said = before[:-1].split() if before.endswith(".") else []
    if not said:
        return False
    last, previous = said[-1].lstrip("(\"'"), said[-2] if len(said) > 1 else ""
    after = text[end.end() : end.end() + 1]
    if last.lower() in _TITLES:
        return True
    if last.lower() == "st":
        return not previous[:1].isupper()
    if len(last) == 1 and last.isupper():
        return previous[:1].isupper() and after.isupper()
    abbreviation = last.lower() in _ABBREVIATIONS or bool(_DOTTED.fullmatch(last))
    return abbreviation and (after.islower() or after.isdigit())


def sentences(text: str) -> list[str]:
    """The sentences of a text; a clause ended by ';' is a sentence of its own, without
    the ';' ("Priya moved to the search team; Tom owns billing now." is two). A period of
    a title, an initial or an abbreviation ends no sentence (_ends_a_word)."""
    text = (text or "").strip()
    parts, begin = [], 0
    for m in _SENTENCE_END.finditer(text):
        if _ends_a_word(text, m):
            continue
        parts.append(text[begin : m.start()])
        begin = m.end()
    parts.append(text[begin:])
    return [p.strip().rstrip(";").strip() for p in parts if p.strip().rstrip(";").strip()]


def summary(content: str, limit: int = 120) -> str:
    """The first `limit` characters, cut at a word boundary."""
    content = " ".join(content.split())
    if len(content) <= limit:
        return content
    cut = content[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "..."


def as_sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
