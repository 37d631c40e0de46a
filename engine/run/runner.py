"""Running what a policy schedules: the passes that are due (compression's judges after its
rules), then the pending turns.

`run` and `run_due` are the one code path of every runner: the scheduler (and `lethe
daemon`), `lethe run`, `Memory.run()` / `run_due()` and experiments. Each takes the
namespace's pass lease first (engine.run.leasing) and works under it: what is due is decided
by the holder, every commit is fenced, and the lease stays alive while models answer.
"""

from __future__ import annotations

from typing import Callable, Iterable

from engine.base import tracing
from engine.base.errors import LeaseBusy, LetheError
from engine.base.lazy import lazy
from engine.run import neighbours as vectors
from engine.run import passes as P
from engine.run.context import Context
from engine.run.leasing import LeaseTerms, hold

# imported when a turn is pending or a compression pass runs, not for decay alone
compressing = lazy("engine.run.compress")
write = lazy("engine.run.write")

Progress = Callable[[str], None] | None


def run(
    ctx: Context, names: Iterable[str], progress: Progress = None, terms: LeaseTerms | None = None
) -> list[P.PassResult]:
    """Run the named passes now, in the order given, under the lease. Raises LeaseBusy
    when another runner keeps it longer than `terms.wait`."""
    names = list(names)
    for name in names:
        if name not in ctx.policy.passes:
            known = ", ".join(ctx.policy.passes) or "(none)"
            raise LetheError(f"policy '{ctx.policy.name}' has no pass '{name}'; it has: {known}")
    with hold(ctx, terms) as held:
        results = _run_all(held, names, _hook(held, progress))
        held.store.mark_recorded()
        return results


def start_schedules(ctx: Context) -> list[str]:
    """Every scheduled pass that never ran counts as run now, with nothing changed: its
    schedule starts here. The names of those passes."""
    have = ctx.store.last_runs(ctx.namespace)
    scheduled = [n for n, p in ctx.policy.passes.items() if p.every and n not in have]
    if scheduled:
        with ctx.store.transaction():
            for name in scheduled:
                ctx.store.record_run(ctx.namespace, name, ctx.store.now(), 0)
    return scheduled


def run_due(
    ctx: Context, progress: Progress = None, terms: LeaseTerms | None = None, retry_failed: bool = False
) -> list[P.PassResult]:
    """Under the lease: run every pass whose schedule has come round, then retry pending
    turns (with `retry_failed`, the parked ones too). Raises LeaseBusy when another
    runner keeps the lease longer than `terms.wait` (not when there is nothing to do).

    On a store that claims turns (PostgreSQL, `claims_turns`) pending turns are judged
    outside the lease, once it is given back, and by a runner that found it held too
    (before it raises LeaseBusy): a claim keeps other workers off the turn being judged
    and `Writer.finish` applies a turn once, whoever judged it, so every runner drains the
    inbox, not only a holder that may be killed before it gets there."""
    if _idle(ctx, retry_failed):
        return []
    if not ctx.store.claims_turns:
        with hold(ctx, terms) as held:
            return _due(held, progress, retry_failed, judge_pending=True)
    try:
        with hold(ctx, terms) as held:
            results = _due(held, progress, retry_failed, judge_pending=False)
    except LeaseBusy as busy:
        judged = _pending(ctx)
        if not judged or not judged[0].changed:
            raise
        raise LeaseBusy(f"{busy}; this runner judged {judged[0].changed} pending turns meanwhile") from None
    return _pending(ctx) + results


def _due(held: Context, progress: Progress, retry_failed: bool, judge_pending: bool) -> list[P.PassResult]:
    """What run_due does under the lease: the due passes, then (`judge_pending`) pending
    turns, then vectors for memories stored without one."""
    if retry_failed:
        held.store.requeue_turns(held.namespace, None)
    schedule = held.store.schedule(held.namespace)  # read under the lease: it decides
    # the due passes first: a backlog of turns (each a few model calls, after an outage or
    # under a slow model) never holds back expiry and the rest; a runner stopped while it
    # judges has run them
    results = _run_all(held, P.due(held, held.clock(), schedule), _hook(held, progress))
    pending = _pending(held, schedule.pending) if judge_pending else []
    embedded = vectors.backfill(held)  # memories stored while the embedding model was down
    held.store.mark_recorded()  # what an as-of read skips (engine.store.asof_marks)
    back = P.went_back(schedule, held.clock())
    for r in results:  # said once per pass that ran: the clock reads before its last run
        if r.name in back:
            r.notes.append(f"the clock went back: it last ran at {back[r.name]}")
    if embedded:
        results.insert(0, P.PassResult("embeddings", held.now(), embedded))
    return pending + results


def _pending(ctx: Context, before: int | None = None) -> list[P.PassResult]:
    """Judge the pending turns whose time has come: a `pending` result saying how many
    this round judged (and how many are left), or none when none was pending (`before`,
    when the caller has just read it)."""
    if not (ctx.store.pending_count(ctx.namespace) if before is None else before):
        return []
    judged = write.Writer(ctx).retry_pending()
    # the turns this round judged: `before - left` would count turns other processes
    # queued (or judged) meanwhile, down to a negative number
    left = ctx.store.pending_count(ctx.namespace)
    return [P.PassResult("pending", ctx.now(), judged, notes=[f"{left} still pending"] if left else [])]


def _idle(ctx: Context, retry_failed: bool) -> bool:
    """Whether run_due would find nothing to do, read without the lease: most of a
    scheduler's ticks are idle, and taking the lease is a write (SQLite's write lock, a
    fsync; round trips on a server). Only the holder decides what runs: when this sees work,
    run_due takes the lease and looks again. A policy with embeddings always looks under the
    lease (a backfill is found by its own query)."""
    if retry_failed or ctx.embedder is not None:
        return False
    schedule = ctx.store.schedule(ctx.namespace)
    return not schedule.pending and not P.due(ctx, ctx.clock(), schedule)


def _run_all(ctx: Context, names: list[str], progress: Progress) -> list[P.PassResult]:
    """The passes in order; neighbours that are rules alone share one transaction."""
    results, group = [], []
    for name in names + [None]:
        if name is not None and P.alone_in_a_transaction(ctx, name):
            group.append(name)
            continue
        if group:
            start = tracing.now()
            results += P.run_together(ctx, group, progress)
            for done in results[-len(group) :]:  # one transaction: each pass its span over it
                tracing.record(f"lethe.pass {done.name}", start, _traced(ctx, done))
            group = []
        if name is not None:
            results.append(run_one(ctx, name, progress))
    return results


def run_one(ctx: Context, name: str, progress: Progress = None) -> P.PassResult:
    with tracing.span(f"lethe.pass {name}", **{"lethe.namespace": ctx.namespace}) as span:
        result = _run_one(ctx, name, progress)
        span.set_attributes(_traced(ctx, result))
    return result


def _traced(ctx: Context, result: P.PassResult) -> dict:
    """A pass's span attributes: what it changed, by event (`lethe.events.expired`: 3)."""
    return {
        "lethe.namespace": ctx.namespace,
        "lethe.policy": ctx.policy.name,
        "lethe.pass": result.name,
        "lethe.changed": result.changed,
        **{f"lethe.events.{kind}": n for kind, n in result.events.items()},
    }


def _run_one(ctx: Context, name: str, progress: Progress = None) -> P.PassResult:
    p = ctx.policy.passes[name]
    if p.cluster is None:
        return P.run_rules(ctx, name, progress)
    # recorded only once every merge is done: a crash mid-compression leaves it due, with
    # its rules marked done so that the next run only clusters and merges
    result = P.run_rules(ctx, name, progress, record=False)
    compressing.compress(ctx, p, result)
    with ctx.transaction():
        ctx.store.clear_progress(ctx.namespace, name)
        ctx.store.record_run(ctx.namespace, name, result.ran_at, result.changed)
    return result


def _hook(ctx: Context, progress: Progress):
    """Called before each statement of a pass, inside its transaction: stop at once if the
    lease is known lost, renew it there when a third of it is spent (a long statement
    holds the write lock, so the heartbeat cannot), then report progress."""
    held = ctx.lease

    def hook(label: str) -> None:
        if held is not None:
            held.check()
            if held.due():
                ctx.store.renew_lease(held)
                held.renewed()
        if progress:
            progress(label)

    return hook
