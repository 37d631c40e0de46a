"""Text as the engine reads it: words and full-text queries (what text may be stored: inputs.py).

Full-text queries are built here from words only: every token is quoted, so nothing a
user or a memory says is ever read as FTS syntax.
"""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had
has have he her his how i if in into is it its just me my no not now of on or our she so
than that the their them then there these they this to too us was we were what when where
which who why will with would you your also about after again all am any because before
being both each few more most other over same some such only own very should""".split()
)


def words(text: str, content_words: bool = False) -> list[str]:
    """Alphanumeric tokens, lowercased, once each (at most 64). `content_words` drops
    stopwords and one-letter tokens (for relevance between memories)."""
    tokens = re.findall(r"\w+", text or "")
    if content_words:
        tokens = [t for t in tokens if len(t) > 1 and t.lower() not in STOPWORDS]
    return list(dict.fromkeys(t.lower() for t in tokens))[:64]


def fts_query(text: str, content_words: bool = False, joiner: str = " OR ") -> str | None:
    """Words as a safe FTS5 query: tokens quoted (never FTS syntax), OR-ed."""
    tokens = words(text, content_words)
    return joiner.join(f'"{t}"' for t in tokens) if tokens else None
