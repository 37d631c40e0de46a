"""The select judge: which recall candidates fit a query, best first."""

from __future__ import annotations

import math
import re
from collections import Counter
from datetime import date

from engine.judges.lexicon import lexicon
from engine.judges.lexicon.slots import MEMBER_OF
from engine.judges.rules.reading import FIRST_PERSON, Reading, clearly_nearest, read
from engine.judges.rules.when import asked_window
from engine.judges.rules.words import (
    GENERIC,
    SLOT_OF,
    STANCE,
    STOPWORDS,
    canon,
    is_value,
    normalise,
    stems,
    tokens,
)

_LEXICON = lexicon("recall")


def select(
    query: str,
    candidates: list[tuple[int, str]],
    top_n: int,
    similar: dict[int, float] | None = None,
    said: dict[int, date] | None = None,
    today: date | None = None,
) -> list[int]:
    """Which recall candidates fit the query, best first, at most `top_n`.

    Each shared content word scores its rarity among the candidates (IDF), and a query
    naming a slot ('which dependency manager', 'what database') also matches candidates
    holding a member of that slot (uv, PostgreSQL). Question words ask for a kind of
    answer: 'where do I live' / 'what city' match a memory of where the user lives or
    moved to; 'when ...' favours on-topic memories holding a date, 'how many / how much'
    those holding a count or amount. A broad question about
    the user ('what do you know about me?') returns the top candidates, those about the
    user first, in the given order. Candidates scoring under a quarter of the best are
    dropped; ties keep the given order. [] when nothing is shared."""
    if top_n <= 0 or not candidates:
        return []
    q = read(query or "")
    if _about_the_user(q):
        # "what do you know about me?": everything about the user, in the given order
        mine = [
            n
            for n, text in candidates
            if FIRST_PERSON.search(normalise(text or "")) or re.search(r"\buser\b", (text or "").lower())
        ]
        return (mine + [n for n, _ in candidates if n not in mine])[:top_n]
    # 'like' in "what's the weather like?" is no preference: stance words count only when
    # the query has nothing else ("what are my preferences?").
    wanted = (q.topic | {w for w in q.concepts if is_value(w)}) or (q.concepts & STANCE)
    # query words that name a slot, by slot ('database' -> database; 'uv' -> packaging)
    namers: dict[str, set[str]] = {}
    for word in q.concepts:
        for category in SLOT_OF.get(word, set()) | MEMBER_OF.get(word, set()):
            namers.setdefault(category, set()).add(word)
    readings = [(number, read(text or "")) for number, text in candidates]
    total = len(readings)
    # question words that ask for a kind of answer: 'where do I live' wants a place the
    # user lives in or moved to; 'when is the demo' prefers memories holding a date
    asks = {name for name, (asked, _) in _ASKED_SLOTS.items() if asked(q)}
    holders = {name: sum(1 for _, r in readings if _ASKED_SLOTS[name][1](r)) for name in asks}
    window = asked_window(query or "", today) if today is not None and said else None
    in_window = (
        {n for n, text in candidates if (d := (said or {}).get(n)) is not None and _within(window, text, d)}
        if window
        else set()
    )
    # "what type of camera lens did I buy": lens, when it tells the candidates apart (a
    # head most of them share, "which trip did I take first", says nothing of which one)
    head = {w for w in asked_head(query or "") & wanted if _df(readings, w) * HEAD_SHARE <= total}
    linked = _abbreviations(query or "", [text or "" for _, text in candidates])
    linking = Counter(a for held in linked for a in held)  # an abbreviation's df
    # a word of the query's family speaks for a query word no candidate says itself ('what
    # pet': no memory says 'pet', one says 'beagle'); where one does, it is the answer
    held = frozenset().union(*(r.concepts for _, r in readings))
    kin = {w: (RELATED.get(w, frozenset()) | _compounds(w, held)) - wanted for w in wanted - held}
    kin_df = {w: df for w, family in kin.items() if (df := _df_any(readings, family))}
    scored = []
    for position, (number, r) in enumerate(readings):
        # sorted, so float sums (and hence ties) do not depend on set order
        score = sum(
            math.log(1 + total / _df(readings, w)) * (HEAD_WEIGHT if w in head else 1.0)
            for w in sorted(wanted & r.concepts)
        )
        score += sum(
            math.log(1 + total / linking[a]) for a in sorted(linked[position] - (wanted & r.concepts))
        )
        for w in sorted(kin_df):  # 'my kid' fits the daughter, at less weight
            if kin[w] & r.concepts:
                score += RELATED_WEIGHT * math.log(1 + total / kin_df[w])
        for category in sorted(namers.keys() & {c for c, _ in r.members}):
            if not namers[category] & r.concepts:  # a word already matched counts once
                score += math.log(1 + total / _df_slot(readings, category))
        for name in sorted(asks):
            words, holds, topical = _SLOT_WORDS[name], _ASKED_SLOTS[name][1], name in _BOOSTS
            if holds(r) and not (wanted & r.concepts & words) and (score > 0 or not topical):
                score += math.log(1 + total / holders[name]) * _BOOSTS.get(name, 1.0)
        if number in in_window:
            score += WINDOW_WEIGHT * math.log(1 + total / len(in_window))
        if score > 0:
            scored.append((-score, position, number))
    if similar:
        scored = _with_similarity(scored, similar, [n for n, _ in readings])
    scored.sort()
    if not scored:
        return []
    floor = -scored[0][0] / 4
    return [number for score, _, number in scored if -score >= floor][:top_n]


RELATED_WEIGHT = 0.5  # a word of the query's family ('kid' for 'daughter'): half the word itself
CLIPPED = 5  # letters a word must have to be found inside another ('plant' in 'houseplant')


def _compounds(word: str, held: frozenset[str]) -> frozenset[str]:
    """Words of the candidates that hold `word` whole, as a compound's last part or a
    longer form ('plant': 'houseplant'; 'physio': 'physiotherapi'), or that it holds as its
    clipping ('photograph' for 'photo...'): a family of the word, as kin are."""
    if len(word) < CLIPPED:
        return frozenset()
    return frozenset(
        c
        for c in held
        if c != word
        and (c.endswith(word) or c.startswith(word) or (len(c) >= CLIPPED and word.startswith(c)))
    )


def _related() -> dict[str, frozenset[str]]:
    """Each token of recall.yaml's `related` rows -> the tokens it fits: the words naming
    its row's thing and, for those, the row's kinds; one level more each way through a
    kind that names a row of its own ('computer' -> 'laptop' -> 'thinkpad', and back).
    Generic words fit nothing."""
    names: dict[str, set[str]] = {}  # token -> the words naming the things it is a kind of
    kinds: dict[str, set[str]] = {}  # token -> the kinds of the thing it names
    for row in _LEXICON["related"]:
        left, _, right = row.partition(":")
        named, kind = stems(left) - GENERIC - STANCE, stems(right) - GENERIC - STANCE
        for token in named:
            names.setdefault(token, set()).update(named)
            kinds.setdefault(token, set()).update(kind)
        for token in kind:
            names.setdefault(token, set()).update(named)
    out = {}
    for token in names.keys() | kinds.keys():
        up, down = names.get(token, set()), kinds.get(token, set())
        fits = up | down
        fits |= {k for w in down for k in kinds.get(w, set()) | names.get(w, set())}
        fits |= {n for w in up - {token} for n in names.get(w, set())}
        out[token] = frozenset(fits - {token})
    return out


RELATED = _related()
HEAD_WEIGHT = 2.0  # a word of the thing a question asks about, against one of its asking
HEAD_SHARE = 4  # ... when at most a quarter of the candidates hold it
# "what|which [type|kind|brand|... of] X did/do/is ...", "what was the X that ...": X, the
# thing asked about; the words around it ("purchase", "recently") only say how it is asked
_KIND_OF = r"(?:type|kind|sort|brand|make|model|style|colou?r|size|name|pair|piece|set)s?\s+of\s+"
_HEAD = re.compile(
    r"\b(?:what|which)\s+(?:" + _KIND_OF + r")?"
    r"((?:[\w'-]+\s+){0,2}?[\w'-]+)\s+(?:did|do|does|is|are|was|were|have|has|had|am|will|would|"
    r"should|can|could)\b"
    r"|\b(?:what|which)\s+(?:is|was|are|were)\s+(?:the|my|our)\s+"
    r"(?:" + _KIND_OF + r"(?:the|my|our)?\s*)?"
    r"((?:[\w'-]+\s+){0,2}?[\w'-]+)\s+(?:that|which|i|we|you|of|in|on|at|for|from|with|did|do)\b",
    re.IGNORECASE,
)


def asked_head(query: str) -> frozenset[str]:
    """The tokens of what a question asks about ("which airline did I fly", "what was the
    book I read"), or none when it does not say so in one of those shapes."""
    found: set[str] = set()
    for m in _HEAD.finditer(query):
        found |= set(tokens(m[1] or m[2]))
    return frozenset(found)


WINDOW_WEIGHT = 2.0  # said within the time a question names: as much as two rare words
SIM_FLOOR = 0.25  # a cosine below this fits no query, whatever the words say
SIM_WEIGHT = 4.0  # a close meaning (cosine 0.6) weighs about two shared rare words
SIM_NEAR = 0.20  # the nearest candidate fits when at least this close ...
SIM_LEAD = 0.10  # ... and this far ahead of the next: it is what the query means


def _within(window: tuple[date, date], text: str | None, said: date) -> bool:
    """Did what a memory tells happen within the question's window? On the day it was
    said, or on the day it names relative to that ("cleaned my sneakers last month", said
    on May 30, happened in April): the memory's own phrase read as a question's is."""
    first, last = asked_window(text or "", said) or (said, said)
    return first <= window[1] and window[0] <= last


def _with_similarity(scored: list, similar: dict[int, float], order: list[int]) -> list:
    """Word scores plus meaning: each candidate gains SIM_WEIGHT per unit of cosine above
    SIM_FLOOR, so a paraphrase sharing no word can still be picked; a word match whose
    meaning is far from the query loses nothing, and nothing below the floor is added.
    The candidate clearly nearest in meaning ranks with the best word match ("customer
    attrition" means the churn memory, not the one sharing "customer"): cosines are low
    for short queries, so a clear lead says more than the cosine itself."""
    words = {number: -score for score, _, number in scored}
    totals = {
        number: words.get(number, 0.0) + max(0.0, (similar.get(number) or 0.0) - SIM_FLOOR) * SIM_WEIGHT
        for number in order
    }
    nearest = clearly_nearest(similar, SIM_NEAR, SIM_LEAD)
    if nearest in totals:
        floor = (similar[nearest] - SIM_NEAR) * SIM_WEIGHT  # > 0: picked even alone
        totals[nearest] = max(totals[nearest], max(totals.values()), floor)
    return [
        (-totals[number], position, number) for position, number in enumerate(order) if totals[number] > 0
    ]


# Three or more capitals are an abbreviation ("MRR", "SLAs"); two spell too many word
# pairs ("PR": "pull request", but also "prefers Rust") to say anything on their own.
_ABBREVIATION = re.compile(r"\b([A-Z][A-Z0-9]{2,5})s?\b")


def _abbreviations(query: str, texts: list[str]) -> list[set[str]]:
    """The abbreviations linking each text to the query: "what's our MRR?" and "the
    monthly recurring revenue ...", or "annual recurring revenue" and "ARR is ..."."""
    asked = {a.lower() for a in _ABBREVIATION.findall(query)}
    return [
        {a for a in asked if _spells(a, text)}
        | {a.lower() for a in _ABBREVIATION.findall(text) if _spells(a.lower(), query)}
        for text in texts
    ]


def _spells(abbreviation: str, text: str) -> bool:
    """Do consecutive words of `text` begin with the letters of `abbreviation`, small
    words between them skipped or spelled ("time of arrival", "return on investment")?
    The spelling starts and ends on words of substance, and never on the memories' own
    subject: "User sees a physio" spells no USA."""
    found = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w != "user"]
    return any(_spelled_from(abbreviation, found, start) for start in range(len(found)))


def _spelled_from(abbreviation: str, found: list[str], i: int) -> bool:
    last = len(abbreviation) - 1
    for k, letter in enumerate(abbreviation):
        while 0 < k and i < len(found) and found[i] in STOPWORDS and found[i][0] != letter:
            i += 1  # a small word between two letters ("time of arrival")
        if i >= len(found) or found[i][0] != letter or (found[i] in STOPWORDS and k in (0, last)):
            return False
        i += 1
    return True


_PLACE_WORDS = stems(_LEXICON["place_words"])
_TIME_WORDS = stems(_LEXICON["time_words"])
_DATED_WORDS = stems(_LEXICON["dated_words"])
_SLOT_WORDS = {"place": _PLACE_WORDS, "time": _TIME_WORDS, "amount": frozenset()}
# a date or a count only helps a memory already on topic; a date, often said in passing,
# by half its rarity, a count by all of it: a memory with no count cannot say how many
_BOOSTS = {"time": 0.5, "amount": 1.0}
# "moved to Lisbon", "moved from Berlin to Lisbon", "relocating back to Porto", "based in Oslo"
_MOVED_TO = re.compile(
    r"\b(?:moved|relocated|moving|relocating)(?: back)?"
    r"(?: from [a-z][\w-]*(?: [a-z][\w-]*)?)? to ([a-z][\w-]*)|"
    r"\b(?:i am|is|are|we are|am) (?:originally )?from [a-z]|"
    r"\b(?:based|settled) in ([a-z][\w-]*)"
)


def _asks_place(q: Reading) -> bool:
    return bool(q.concepts & _PLACE_WORDS) or bool(
        re.match(r"where\b", q.text)
        and re.search(r"\b(i|me|user|we|he|she|they)\b", q.text)
        and not (q.topic - _PLACE_WORDS - GENERIC)
    )


def _holds_place(r: Reading) -> bool:
    m = _MOVED_TO.search(r.text)
    place = m and (m[1] or m[2])
    moved_to_place = bool(m) and (place is None or (place not in STOPWORDS and canon(place) not in MEMBER_OF))
    return canon("live") in r.concepts or moved_to_place


def _asks_time(q: Reading) -> bool:
    return bool(
        re.match(
            r"(when|what time|what day|which day|what date|how soon|"
            r"how long until|by when|until when)\b",
            q.text,
        )
    )


def _holds_time(r: Reading) -> bool:
    return bool(r.values) or bool(r.concepts & _DATED_WORDS)


def _asks_amount(q: Reading) -> bool:
    return bool(re.match(r"(how many|how much|what number of|what is the number of)\b", q.text))


def _holds_amount(r: Reading) -> bool:
    """A count or an amount ('600 followers', 'two cups', '$40'), not a year, a date, a time
    of day or an ordinal ('first')."""
    return any(not _YEAR.fullmatch(m[0]) for m in _COUNT.finditer(r.text))


_COUNT = re.compile(
    r"(?<![\d:/.-])\d+(?:[.,]\d+)*(?![\d:/-]|st\b|nd\b|rd\b|th\b|am\b|pm\b)|"
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"forty|fifty|hundred|thousand|dozen|twice)\b"
)
_YEAR = re.compile(r"(?:19|20)\d\d")


_ASKED_SLOTS = {
    "place": (_asks_place, _holds_place),
    "time": (_asks_time, _holds_time),
    "amount": (_asks_amount, _holds_amount),
}
_ABOUT_WORDS = stems(_LEXICON["about_words"])
_SELF_WORDS = stems(_LEXICON["self_words"])


def _about_the_user(q: Reading) -> bool:
    """'What do you know about me?', 'tell me about myself': no topic but the user."""
    if not re.search(
        r"\b(know|remember|learn\w*|stored|saved|recall|notes?|profile|"
        r"tell me about|summari[sz]e)\b",
        q.text,
    ):
        return False
    return not (q.topic - _ABOUT_WORDS - GENERIC - _SELF_WORDS)


def _df(readings: list[tuple[int, Reading]], word: str) -> int:
    return sum(1 for _, r in readings if word in r.concepts)


def _df_any(readings: list[tuple[int, Reading]], family: frozenset[str]) -> int:
    return sum(1 for _, r in readings if family & r.concepts)


def _df_slot(readings: list[tuple[int, Reading]], category: str) -> int:
    return sum(1 for _, r in readings if any(c == category for c, _ in r.members))
