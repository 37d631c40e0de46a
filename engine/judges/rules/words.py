"""Words: the tokenizer, light stemmer and synonym folding every rules judge reads with.

The word lists live in `lexicon/words.yaml` (stopwords, phrases, synonyms, stance and
cue words) and `lexicon/slots.yaml` (tool families); this module turns them into the
tables the judges look words up in.
"""

from __future__ import annotations

import re
from functools import lru_cache

from engine.judges.lexicon import lexicon, words
from engine.judges.lexicon.slots import ALIASES, CATEGORIES, MEMBER_OF

_LEXICON = lexicon("words")

STOPWORDS = frozenset(words(_LEXICON["stopwords"]))

# Contractions are expanded first so "don't" reads as a negation and "we'll" as "we will".
_CONTRACTIONS = (
    (r"\blet's\b", "let us"),
    (r"\bwon't\b", "will not"),
    (r"\bcan't\b", "can not"),
    (r"\bcannot\b", "can not"),
    (r"n't\b", " not"),
    (r"'m\b", " am"),
    (r"'re\b", " are"),
    (r"'ve\b", " have"),
    (r"'ll\b", " will"),
    (r"'d\b", " would"),
    (r"'s\b", ""),
)
# Multi-word names become one token, so "VS Code" and "vscode" are the same word.
_PHRASES = tuple((pattern, repl) for pattern, repl in _LEXICON["phrases"])

# raw word -> canonical word
SYNONYMS = {word: canonical for canonical, raw in _LEXICON["synonyms"].items() for word in words(raw)}
_NOUN_SYNONYMS = frozenset(SYNONYMS.values()) - set(words(_LEXICON["not_nouns"]))


def _implies() -> dict[str, tuple[str, ...]]:
    implied: dict[str, tuple[str, ...]] = {}
    for kind, raw in _LEXICON["implies"].items():
        for word in words(raw):
            implied[word] = implied.get(word, ()) + (kind,)
    return implied


_IMPLIES = _implies()  # word -> the kinds of thing it is too ('macbook' -> 'laptop')

HYPHENATED = re.compile(r"\b([a-z]{2,})-([a-z]{2,})\b")
# words of any script (not only a-z: "数据库", "Straße", "café" are words too), never "_"
WORD_RE = re.compile(r"\d{4}-\d{2}-\d{2}|\d+(?:\.\d+)+|[^\W_]+")


def stem(word: str) -> str:
    """A light suffix stripper: 'migrated', 'migrating', 'migrate' -> 'migrat'.

    Deliberately cruder than Porter: it only has to map inflections of one word onto the
    same key, never to produce a dictionary form."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            word = word[: -len(suffix)] + repl
            break
    else:
        if word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    for suffix in ("ability", "ingly", "edly", "able", "ible", "ing", "ed", "ly", "ness", "ment", "er"):
        rest = word[: -len(suffix)]
        if word.endswith(suffix) and len(rest) >= 3 and re.search("[aeiouy]", rest):
            if suffix == "er" and len(word) < 6:
                continue  # short words like 'user', 'over' keep their ending
            word = rest
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # 'stopp' -> 'stop', 'plann' -> 'plan'
            break
    if len(word) > 5 and word.endswith("ic"):
        word = word[:-2]  # 'allergic' meets 'allergy', 'historic' meets 'history'
    elif (len(word) > 3 and word.endswith("e")) or (len(word) > 4 and word.endswith("y")):
        word = word[:-1]
    return word


def _slot_of() -> dict[str, set[str]]:
    slot_words: dict[str, set[str]] = {}
    for category, slot in CATEGORIES.items():
        for word in slot.names:
            slot_words.setdefault(stem(SYNONYMS.get(word, word)), set()).add(category)
    return slot_words


SLOT_OF = _slot_of()  # a word naming a slot, as a token ('databas') -> the slots it names


def count(digits: str, most: int = 10**9) -> int | None:
    """A whole number written in digits, when it is at most `most`; else None. A longer
    one ('in 999...9 days', thousands of digits in a hostile text) is no count a judge
    reads, and int() of it fails past 4,300 digits."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > len(str(most)):
        return None
    n = int(digits)
    return n if n <= most else None


@lru_cache(maxsize=4096)
def normalise(text: str) -> str:
    """Lowercase, expand contractions and fold multi-word names into single tokens."""
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    for pattern, repl in _CONTRACTIONS + _PHRASES:
        text = re.sub(pattern, repl, text)
    return re.sub(r"\b(\d+)(?:st|nd|rd|th)\b", r"\1", text)


@lru_cache(maxsize=65536)
def canon(word: str) -> str:
    """One raw word as a token: alias resolved, synonym folded, stemmed (cached: the
    judges ask for the same words again for every candidate of a write)."""
    word = ALIASES.get(word, word)
    if word in MEMBER_OF:
        return word  # product names are kept whole; stemming 'pandas' helps nobody
    if word not in SYNONYMS and word.endswith("s"):
        # a plural noun folds like its singular: 'jobs' like 'job', 'glitches' like 'glitch'
        # (verbs and adjectives are left alone: 'clears' is not 'clear' code)
        for single in (word[:-1], word[:-2]):
            if SYNONYMS.get(single) in _NOUN_SYNONYMS:
                word = single
                break
    return stem(SYNONYMS.get(word, word))


@lru_cache(maxsize=4096)
def token_tuple(text: str) -> tuple[str, ...]:
    """tokens(text), cached and immutable: what the judges call on their hot paths."""
    text = normalise(text)
    # a hyphenated word is also one word: "stand-up" meets "standup", "e-mail" "email"
    found = WORD_RE.findall(text) + ["".join(m) for m in HYPHENATED.findall(text)]
    out: list[str] = []
    for word in found:
        if word not in STOPWORDS:
            out.append(canon(word))
            out += [w for w in _IMPLIES.get(word, ()) if w not in out]
    return tuple(out)


def tokens(text: str) -> list[str]:
    """Content words of `text`: lowercased, stopwords dropped, synonyms folded, stemmed.

    Recall can reuse this to build full-text queries: the same fact worded differently
    yields overlapping tokens ('easy to read' and 'readable' both give 'read')."""
    return list(token_tuple(text))


def stems(text: str) -> frozenset[str]:
    """A lexicon word list as the set of tokens its words read as."""
    return frozenset(canon(w) for w in words(text))


STANCE = stems(_LEXICON["stance"])  # how the user feels, not what about
CUE_WORDS = stems(_LEXICON["cues"])  # a change, an addition or progress happened
GENERIC = stems(_LEXICON["generic"])  # too common to say two texts share a topic
_DATES = lexicon("dates")
_VALUE_WORDS = stems(" ".join(_DATES["months"]) + " " + _DATES["weekdays"] + " " + _LEXICON["values"])


@lru_cache(maxsize=65536)
def is_value(token: str) -> bool:
    """Is this token a value of a slot (a date, an amount, a version) rather than a topic?"""
    return token in _VALUE_WORDS or bool(re.fullmatch(r"[\d.\-]+|v\d+|q[1-4]|\d+(am|pm)", token))
