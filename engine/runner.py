"""Running what a policy schedules: pending turns first, then the passes that are due,
compression's judges after its rules."""
from __future__ import annotations

from typing import Callable, Iterable

from . import passes as P
from . import vectors
from .compress import compress
from .context import Context
from .errors import LetheError
from .write import Writer

Progress = Callable[[str], None] | None


def run(ctx: Context, names: Iterable[str], progress: Progress = None) -> list[P.PassResult]:
    """Run the named passes now, in the order given."""
    results = []
    for name in names:
        if name not in ctx.policy.passes:
            known = ", ".join(ctx.policy.passes) or "(none)"
            raise LetheError(f"policy '{ctx.policy.name}' has no pass '{name}'; it has: {known}")
        results.append(run_one(ctx, name, progress))
    return results


def run_one(ctx: Context, name: str, progress: Progress = None) -> P.PassResult:
    p = ctx.policy.passes[name]
    if p.cluster is None:
        return P.run_rules(ctx, name, progress)
    # recorded only once every merge is done: a crash mid-compression leaves it due
    result = P.run_rules(ctx, name, progress, record=False)
    compress(ctx, p, result)
    with ctx.store.transaction():
        ctx.store.record_run(ctx.namespace, name, result.ran_at, result.changed)
    return result


def run_due(ctx: Context, progress: Progress = None) -> list[P.PassResult]:
    """Retry pending turns, then run every pass whose schedule has come round."""
    before = ctx.store.pending_count(ctx.namespace)
    if before:
        Writer(ctx).retry_pending()
    embedded = vectors.backfill(ctx)  # memories stored while the embedding model was down
    results = run(ctx, P.due(ctx, ctx.clock()), progress)
    if embedded:
        results.insert(0, P.PassResult("embeddings", ctx.now(), embedded))
    if before:
        left = ctx.store.pending_count(ctx.namespace)
        results.insert(0, P.PassResult("pending", ctx.now(), before - left,
                                       notes=[f"{left} still pending"] if left else []))
    return results
