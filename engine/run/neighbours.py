"""Embeddings in the engine's steps: a text's vector, the nearest neighbours that join a
step's full-text candidates, and the backfill that gives older memories their vectors.

Nothing here blocks a write: a vector is computed outside the write transaction, and when
the embedding model is unreachable the memory is stored without one; `backfill` (run by
`run_due`) fills it in later.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from typing import Sequence

from engine.base.errors import LetheError
from engine.judges.embeddings import EmbeddingUnavailable
from engine.run.context import Context, Embedder, vector_store
from engine.steps import kinds as steps

BACKFILL = 256  # memories given a vector per run_due, at most


def vector_of(ctx: Context, text: str) -> bytes | None:
    """The text's vector, or None (no embedding model, or it failed). The last few are
    kept on the embedder: a write asks for one text more than once. A text `prefetch`
    is asking for is waited for, not asked again."""
    embedder = ctx.embedder
    if embedder is None or not (text or "").strip():
        return None
    recent = embedder.recent
    asking = _inflight(embedder).get(text)
    if text not in recent and asking is not None:
        asking.join()
    if text not in recent:
        vector = embed(ctx, [text])
        if vector is None:
            return None  # not remembered: the model may be back next time
        _keep(recent, text, vector[0])
    return recent[text]


def prefetch(ctx: Context, user: str, write: list) -> None:
    """Start asking the embedding model, beside the gate's call, for the vectors a turn's
    write will want if the gate keeps the user's words: the memory's own (what the
    contradiction step searches with and what is stored) and, for a step like `fused`,
    the turn's with it; in one request. `vector_of` then waits for it instead of asking
    after the gate, a round trip more (a text the gate rewrote is asked for beside the
    next wave: Judging.run_steps). Not for `extract` (its cells' texts are the
    model's)."""
    embedder = ctx.embedder
    if embedder is None or not user.strip() or any(s.step == "extract" for s in write):
        return
    content = user.strip()
    ahead(
        ctx,
        [content]
        + [
            f"{user} {content}"
            for s in write
            if s.step != "contradiction" and steps.kind(s.step).shows_candidates
        ],
    )


def ahead(ctx: Context, texts: list[str]) -> None:
    """Start asking the embedding model, in one request beside whatever the caller asks
    next, for the vectors of `texts` not known or asked for already; `vector_of` waits for
    them instead of asking again. A failure here is left to `vector_of` to meet and log."""
    embedder = ctx.embedder
    if embedder is None:
        return
    recent, inflight = embedder.recent, _inflight(embedder)
    wanted = [t for t in dict.fromkeys(texts) if t.strip() and t not in recent and t not in inflight]
    if not wanted:
        return

    def ask() -> None:
        try:
            found = embedder.embed(wanted)
            if isinstance(found, list) and len(found) == len(wanted):
                for text, vector in zip(wanted, found):
                    _keep(recent, text, vector)
        except Exception:  # vector_of asks again, and logs what it meets
            pass
        finally:
            for text in wanted:
                inflight.pop(text, None)

    thread = threading.Thread(target=ask, name="lethe-embed-ahead", daemon=True)
    inflight.update(dict.fromkeys(wanted, thread))
    thread.start()


def at_hand(ctx: Context, text: str) -> bool:
    """Whether `text`'s vector costs no round trip now: no embedding model, a local one,
    or one that gave it already."""
    embedder = ctx.embedder
    return embedder is None or not embedder.remote or text in embedder.recent


def _inflight(embedder: Embedder) -> dict[str, threading.Thread]:
    """The texts a prefetch is asking `embedder` for -> its thread (kept on the embedder,
    an attribute of this module's own, hence getattr/setattr)."""
    inflight = getattr(embedder, "inflight", None)
    if inflight is None:
        inflight = {}
        setattr(embedder, "inflight", inflight)  # noqa: B010 - not part of the Embedder protocol
    return inflight


def _keep(recent: dict, text: str, vector: bytes) -> None:
    if len(recent) >= 256:
        recent.pop(next(iter(recent)))
    recent[text] = vector


def embed(ctx: Context, texts: list[str]) -> list[bytes] | None:
    """The embedding model's vectors for `texts`, or None when it failed in any way
    (unreachable, an answer without the vectors asked for, an exception of a local
    model's own): the failure is a row of `model_calls` (step `embed`, outcome
    `unavailable`) and the caller goes on with full text, never fails."""
    start = time.perf_counter()
    try:
        if ctx.embedder is None:
            raise EmbeddingUnavailable("the policy has no embedding model")
        found = ctx.embedder.embed(texts)
        if not isinstance(found, list) or len(found) != len(texts):
            raise EmbeddingUnavailable(
                f"{len(texts)} texts sent, {len(found) if isinstance(found, list) else 'no'} vectors back"
            )
        return found
    except Exception as exc:  # an embedding never fails a write or a recall
        said = str(exc) if isinstance(exc, EmbeddingUnavailable) else f"{type(exc).__name__}: {exc}"
        spec = ctx.policy.embed
        ctx.store.log_call(
            ctx.namespace,
            "embed",
            spec.name if spec else "",
            spec.provider if spec else None,
            0,
            0,
            round((time.perf_counter() - start) * 1000, 3),
            "unavailable",
            said[:500],
        )
        return None


def fits(ctx: Context, vector: bytes | None, model: str | None = None) -> bytes | None:
    """`vector` when it can stand beside this namespace's vectors: 8 float32s or a multiple
    of 8 (what the index's sign bits are made of), finite, not all zero (no cosine), and
    the size every stored one has. None otherwise (a model that answered nonsense, or
    changed its size): the step goes on with full text, as when the model is down, and no
    vector of another size is stored."""
    if not isinstance(vector, bytes) or not vector or len(vector) % 32:
        return None
    floats = array("f", vector)
    if not any(floats) or not all(map(math.isfinite, floats)):
        return None
    size = vector_store(ctx).vector_size(ctx.namespace, model or _model(ctx))
    return vector if size in (None, len(vector)) else None


def search(ctx: Context, step: str, vector: bytes | None, k: int) -> Search:
    """Start the vector index's search for `vector` (the shortlist `neighbours` rescores)
    beside whatever the caller does next, e.g. its full-text query: on a second connection
    when the store has one to offer."""
    if step in ctx.plan.neighbours and k > 0:
        vector = fits(ctx, vector)
    if vector is None or step not in ctx.plan.neighbours or k <= 0:
        return Search(None)
    model = _model(ctx)
    beside = getattr(ctx.store, "nearest_beside", None)
    if beside is None:
        return Search(vector_store(ctx).nearest(ctx.namespace, model, vector, k))
    return Search(beside(ctx.namespace, model, vector, k))


def _model(ctx: Context) -> str:
    """The name of the policy's embedding model (code here runs only for a policy with one)."""
    if ctx.policy.embed is None:
        raise LetheError(f"policy {ctx.policy.name} has no `embed:`: no vectors to read or write")
    return ctx.policy.embed.name


class Search:
    """A started vector search: its shortlist of ids, or a future of it, or None."""

    def __init__(self, found):
        self.found = found

    def ids(self) -> list[int] | None:
        return self.found.result() if hasattr(self.found, "result") else self.found


def neighbours(
    ctx: Context,
    step: str,
    vector: bytes | None,
    k: int,
    also: Sequence[int] = (),
    started: Search | None = None,
) -> list:
    """Up to `k` nearest neighbours of `vector` that pass the step's candidate query,
    most similar first, plus the memories `also` names (to learn their similarity):
    rows with a `similarity` column. [] without a vector. `started`: the `search` begun
    for the same vector and k (otherwise it is searched now)."""
    st = ctx.plan.neighbours.get(step)
    if st is not None and k > 0:
        vector = fits(ctx, vector)
    if vector is None or st is None or k <= 0:
        return []
    shortlist = started.ids() if started else vector_store(ctx).nearest(ctx.namespace, _model(ctx), vector, k)
    ids = list(dict.fromkeys([*(shortlist or []), *also]))
    return ctx.store.fetch(st, ctx.namespace, ids=ids, vector=vector, limit=k + len(also))


def save(ctx: Context, memory_id: int, vector: bytes | None) -> None:
    """Store a memory's vector in the caller's transaction (nothing without one)."""
    if ctx.policy.embed is not None and vector is not None and fits(ctx, vector) is not None:
        vector_store(ctx).save_vector(memory_id, ctx.namespace, ctx.policy.embed.name, vector)


def backfill(ctx: Context, limit: int = BACKFILL) -> int:
    """Give active memories without a vector one (newest first, at most `limit`), then
    rebuild the neighbour index if it has outgrown its cells. The vectors are computed
    outside any transaction; an unreachable model leaves the rest for the next run."""
    if ctx.embedder is None:
        return 0
    model, store = _model(ctx), vector_store(ctx)
    done = 0
    missing = store.missing_vectors(ctx.namespace, model, limit)
    for start in range(0, len(missing), 32):
        batch = missing[start : start + 32]
        vectors = embed(ctx, [text for _, text in batch])
        if vectors is None:
            break
        with ctx.store.transaction():
            for (memory_id, _), vector in zip(batch, vectors):
                if fits(ctx, vector, model) is not None:
                    store.save_vector(memory_id, ctx.namespace, model, vector)
        done += len(batch)
    if store.reindex_due(ctx.namespace, model):
        store.reindex(ctx.namespace, model)
    return done
