"""Phrasing a memory: the user's words in the third person, and the tags it is filed by."""

from __future__ import annotations

import re

from engine.judges.lexicon import lexicon, words
from engine.judges.lexicon.slots import MEMBER_OF
from engine.judges.rules.dates import NOT_PAST_ED
from engine.judges.rules.reading import as_sentence, read
from engine.judges.rules.words import GENERIC, WORD_RE, canon, normalise

_LEXICON = lexicon("phrasing")
# (and two words that stand where one adverb does: "I no longer eat meat")
_VERB_ADVERBS = "|".join(words(_LEXICON["verb_adverbs"])) + r"|no\s+longer|not\s+only|not\s+just"
_NOT_VERBS = frozenset(words(_LEXICON["not_verbs"]))
_KEEP_VERB = frozenset(words(_LEXICON["same_verbs"])) | frozenset(words(_LEXICON["irregular_past"]))
_IRREGULAR: dict[str, str] = dict(_LEXICON["irregular"])


def _third(verb: str) -> str:
    head, _, last = verb.rpartition("-")  # 'pre-order': the last part conjugates
    if last in _IRREGULAR:
        return head + "-" * bool(head) + _IRREGULAR[last]
    if last in _KEEP_VERB or verb in _NOT_VERBS or (verb.endswith("ed") and last not in NOT_PAST_ED):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(sentence: str) -> str:
    """'I manage deps with poetry' -> 'User manages deps with poetry'. Nouns stay intact."""
    text = sentence.strip().replace("\u2019", "'")
    text = re.sub(r"\b[Ii](?:'m| am)\b", "User is", text)
    text = re.sub(r"\b[Ii]'ve\b", "User has", text)
    text = re.sub(r"\b[Ii] (?:don't|do not)\b", "User does not", text)
    text = re.sub(r"\b[Ii]'ll\b", "User will", text)
    text = re.sub(r"\b[Ii]'d\b", "User would", text)

    def conjugate(m: re.Match) -> str:
        return "User" + m[1] + " " + _third(m[2])

    # a hyphenated verb is one word: 'I pre-ordered' stays past, 'I re-read' is conjugated whole
    text = re.sub(rf"\b[Ii]((?:\s+(?:{_VERB_ADVERBS}))*)\s+([a-z]+(?:-[a-z]+)*)\b(?!['-])", conjugate, text)
    text = re.sub(r"\b[Ii]\b(?![/'.])", "User", text)
    text = re.sub(r"^My\b", "User's", text)
    # "their" once the user is named before it ("User moved their desk"); else whose it is
    # would be lost ("The airline moved their flight": the airline's?)
    text = re.sub(r"\b[Mm]y\b", lambda m: "their" if "User" in text[: m.start()] else "User's", text)
    text = re.sub(r"\bmyself\b", "themselves", text)
    text = re.sub(r"\bme\b", "the user", text)
    return as_sentence(text)


def tags(kinds: list[str], texts: list[str]) -> list[str]:
    """Kinds first, then lexicon categories and members, then frequent keywords."""
    # an imperative rule is tagged as the instruction it is
    out = list(dict.fromkeys("instruction" if k == "directive" else k for k in kinds))
    for text in texts:
        for category, member in sorted(read(text).members):
            out += [category, member]
    out += _keywords(texts, 3)
    return list(dict.fromkeys(out))[:8]


def _keywords(texts: list[str], limit: int) -> list[str]:
    """The most frequent topic words, in the first surface form they were written in."""
    counts: dict[str, int] = {}
    surface: dict[str, str] = {}
    for text in texts:
        topic = read(text).topic - GENERIC
        for word in WORD_RE.findall(normalise(text)):
            key = canon(word)
            if key in topic and word.isalpha() and len(word) > 2 and key not in MEMBER_OF:
                counts[key] = counts.get(key, 0) + 1
                surface.setdefault(key, word)
    ranked = sorted(counts, key=lambda k: -counts[k])  # stable: first seen wins ties
    return [surface[k] for k in ranked[:limit]]
