"""The compression judges: `cluster` finds memories that say the same thing in other
words, `merge` writes one memory for such a group."""

from __future__ import annotations

from itertools import combinations

from engine.judges.rules.exemptions import other_item
from engine.judges.rules.phrasing import tags
from engine.judges.rules.reading import as_sentence, conflict, gist, read, similarity, summary
from engine.judges.rules.words import GENERIC


def cluster(
    candidates: list[tuple[int, str]],
    threshold: float = 0.5,
    similar: dict[tuple[int, int], float] | None = None,
) -> list[list[int]]:
    """Groups (2+ local numbers) of candidates that say the same thing in other words.

    Similarity is the (weighted) Jaccard overlap of normalised content words (stemmed,
    synonyms folded, stance words like 'prefer'/'always' left out; words in a trailing
    elaboration or contrast - "... with descriptive names", "... over clever one-liners" -
    weigh half), forced to 0 when two texts conflict (polarity, lexicon member, date or
    amount, or a contrast: cadence, part of the day, how often, a setting or scale, so
    "runs daily" never joins "runs weekly"). Groups grow by average linkage:
    the closest pair of groups merges while its mean similarity reaches `threshold`."""
    texts = {number: text or "" for number, text in candidates}
    groups = [[number] for number in sorted(texts)]
    similar = similar or {}
    # only pairs that can score: sharing a word of their gists (the words similarity
    # compares) or close in meaning by embeddings (see _pair); every other pair is 0
    close = {(min(pair), max(pair)) for pair, cosine in similar.items() if cosine >= MEANING}
    sim = {(a, b): _pair(texts[a], texts[b], similar.get((a, b))) for a, b in _sharing(texts) | close}

    def link(g: list[int], h: list[int]) -> float:
        pairs = [sim.get((min(a, b), max(a, b)), 0.0) for a in g for b in h]
        return sum(pairs) / len(pairs)

    while True:
        best = None
        for i, g in enumerate(groups):
            for j in range(i + 1, len(groups)):
                score = link(g, groups[j])
                if score >= threshold and (best is None or score > best[0]):
                    best = (score, i, j)
        if best is None:
            break
        _, i, j = best
        groups[i] = sorted(groups[i] + groups.pop(j))
    return sorted(g for g in groups if len(g) >= 2)


def _sharing(texts: dict[int, str]) -> set[tuple[int, int]]:
    """The pairs (a < b) whose gists share a word, a clipping ('prod', 'production')
    included: they share the word's first four letters (all of a shorter word)."""
    holders: dict[str, list[int]] = {}
    for number in sorted(texts):
        for key in {w[:4] for w in gist(read(texts[number]))}:
            holders.setdefault(key, []).append(number)
    return {pair for numbers in holders.values() for pair in combinations(numbers, 2)}


MEANING = 0.72  # cosine at which two memories say the same thing (all-MiniLM-L6-v2 scale)


def _pair(a: str, b: str, cosine: float | None) -> float:
    """How far two memories say the same thing: their words, or (with embeddings) their
    meaning when it is closer - but never when they conflict on a value, a member, a
    contrast or polarity, whatever the notation ('6pm' and '18:00', 'biweekly' and 'every
    other week' agree)."""
    if other_item(a, b):
        return 0.0  # "Room A holds 12" and "Room B holds 12" are two rooms, however alike
    words = similarity(a, b)
    if cosine is None or conflict(read(a), read(b)):
        return words
    return max(words, 0.5 + (cosine - MEANING) * 2 if cosine >= MEANING else 0.0)


def merge(contents: list[str]) -> dict:
    """One memory from a cluster: {"content", "summary" (<=120 chars), "tags"}.

    The most informative wording (most distinct content words, then longest) leads; any
    other member that adds a content word the lead lacks is appended, so no distinct fact
    is lost. Exact and near-exact repeats are dropped."""
    unique = list(dict.fromkeys(c.strip() for c in contents if c and c.strip()))
    if not unique:
        return {"content": "", "summary": "", "tags": []}
    ranked = sorted(unique, key=lambda t: (-len(read(t).concepts), -len(t), unique.index(t)))
    parts, covered = [ranked[0]], set(gist(read(ranked[0])))
    for text in ranked[1:]:
        extra = gist(read(text)) - covered - GENERIC
        if extra:
            parts.append(text)
            covered |= gist(read(text))
    content = " ".join(as_sentence(p) for p in parts)
    return {"content": content, "summary": summary(content), "tags": tags([], unique)}
