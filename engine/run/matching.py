"""The full-text side of a write's candidates: which of the new memory's words may pick
them, so that the query's cost stays bounded at any store size."""

from __future__ import annotations

from engine.base.text import words
from engine.judges.invariants import SPEAKER_WORDS
from engine.judges.lexicon.slots import related_words
from engine.run.context import Context

RARE = 2000  # a word in more memories than this does not pick contradiction candidates
MATCHED = 2000  # rows the candidate query ranks at most: bm25 costs ~4 us a matching row


def distinctive_query(
    ctx: Context, text: str, rare: int | None = None, matched: int | None = None, every_word: bool = True
) -> str | None:
    """An FTS5 query for the memories most like `text`, whose cost does not grow with the
    store nor with the turn's length: words found in more than `rare` memories are left
    out (their counts stop at `rare` + 1, so counting is bounded too); when the rest match
    more than `matched` memories together, the rarest of them are kept until their counts
    add up to `matched` (the rarest alone at least). When every word is that common, all
    of them must match (with `every_word`; else there is no query). Words the pipeline
    writes into every memory ("User", "says") pick nothing: with them, every memory
    matched every other."""
    rare = RARE if rare is None else rare  # read when called: the module's budget
    matched = MATCHED if matched is None else matched
    tokens = [t for t in words(text, content_words=True) if t not in SPEAKER_WORDS]
    if not tokens:
        return None
    # a replacement names another member of the same slot: "MySQL" should find "PostgreSQL"
    related = [r for t in tokens for r in related_words(t) if r not in tokens]
    counts = {t: ctx.store.match_count(f'"{t}"', rare) for t in dict.fromkeys(tokens + related)}
    few = [t for t, n in counts.items() if n <= rare][:64]
    if not few and not every_word:
        return None  # an AND of common words reads each one's whole list: not bounded
    if (
        not few
        or sum(counts[t] for t in few) <= matched
        or ctx.store.match_count(" OR ".join(f'"{t}"' for t in few), matched) <= matched
    ):
        return _query(few, tokens)
    kept: set[str] = set()
    total = 0
    for t in sorted(few, key=counts.__getitem__):  # the rarest first: they weigh most in bm25
        if kept and total + counts[t] > matched:
            break
        kept.add(t)
        total += counts[t]
    return _query([t for t in few if t in kept], tokens)


def _query(rare: list[str], tokens: list[str]) -> str:
    return " OR ".join(f'"{t}"' for t in rare) if rare else " AND ".join(f'"{t}"' for t in tokens)
