"""The confidence judge: how sure a memory is, read from its hedges."""

from __future__ import annotations

import re

from engine.judges.rules.reading import sentences
from engine.judges.rules.words import normalise, token_tuple

# Cue words per rung of the article's scale, weakest first; the weakest cue present wins.
_CONFIDENCE_RUNGS = (
    (
        0.1,
        re.compile(
            r"\b(maybe|perhaps|possibly|wonder(ing)?|someday|some day|who knows|"
            r"no idea|just an idea|hypothetically|daydream\w*)\b"
        ),
    ),
    (
        0.3,
        re.compile(
            r"\b(considering|consider|thinking (about|of)|might|could(?!\s+not)|"
            r"tempted|curious|toying with|on the fence|not sure|unsure|undecided|"
            r"would like to try|may (be|not|need|want|have|switch|move|try|use|go|"
            r"change))\b|\b(i|we|you|it|they|he|she|this|that|user) may\b"
        ),
    ),
    (
        0.5,
        re.compile(
            r"\b(probably|likely|seems?|seemed|appears? to|apparently|i guess|i suspect|"
            r"i suppose|presumably|sounds like|looks like|i assume|assuming|"
            r"supposedly|i gather)\b"
        ),
    ),
    (
        0.7,
        re.compile(
            r"\b(i think|i believe|pretty sure|fairly sure|kind of|sort of|"
            r"i would say|i feel like|if i remember)\b"
        ),
    ),
)
_SCALE = (0.1, 0.3, 0.5, 0.7, 1.0)


def confidence(content: str, said: str | None = None) -> float:
    """How sure the memory is, on the article's scale (1.0, 0.7, 0.5, 0.3, 0.1).

    A plain statement ("I use poetry", "We decided on SQLite", "Always use tabs") is
    explicit: 1.0. Hedges lower it: the weakest hedge present sets the rung, and two or
    more hedges together drop one more rung ("I think we probably..." -> 0.3). A bare
    question is at most a weak inference (0.3). The hedges are read in the memory and in
    what the user `said`, whose words a rewrite may have dropped ("I think the demo is
    on Friday, not sure" may be stored as "The demo is on Friday")."""
    content = content or ""
    score = min(_hedged(normalise(content)), _hedged(normalise(_source(content, said))))
    if content.strip().endswith("?"):
        score = min(score, 0.3)
    return score


def _source(content: str, said: str | None) -> str:
    """The sentences of what the user said that this memory came from: those sharing the
    most content words with it, or at least half as many (a turn may hold several facts,
    each with its own hedges: "I'm not sure which tripod to choose. I've been getting
    great shots with my new lens" shares "new" between its two, and the lens is no
    less sure for the tripod)."""
    mine = set(token_tuple(content))
    shared = [(len(mine & set(token_tuple(s))), s) for s in sentences(said or "")]
    most = max((n for n, _ in shared), default=0)
    return " ".join(s for n, s in shared if n and 2 * n >= most)


def _hedged(text: str) -> float:
    score, hedges = 1.0, 0
    for rung, pattern in _CONFIDENCE_RUNGS:
        found = pattern.findall(text)
        if found:
            score = min(score, rung)
            hedges += len(found)
    if hedges >= 2 and score > _SCALE[0]:
        score = _SCALE[_SCALE.index(score) - 1]
    return score
