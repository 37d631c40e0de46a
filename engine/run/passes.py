"""Run a pass: its compiled statements, in order, in one transaction.

A pass's cost is the SQL's: no Python loop over rows. The time it ran is recorded in the
same transaction, so a pass is either applied and recorded, or neither. Every commit goes
through `ctx.transaction()`: under a runner's lease it is fenced (engine.run.leasing).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Callable

from engine.base.clock import AHEAD, parse_time
from engine.base.errors import GaveWay
from engine.plan.statement import Kind
from engine.run.context import Context


@dataclass
class PassResult:
    name: str
    ran_at: str
    changed: int = 0
    events: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: int = 0  # rows a rule left alone: its new value was NULL or not finite

    def as_dict(self) -> dict:
        return {
            "pass": self.name,
            "ran_at": self.ran_at,
            "changed": self.changed,
            "events": self.events,
            "skipped": self.skipped,
            "notes": self.notes,
        }


# the cursor of a pass whose rules are all applied while the rest of it (compression's
# merges) is still to do: a resumed run goes straight to that rest
RULES_DONE = 2**62
# a pass that gave way to a writer runs in ranges of ids sized to hold the write lock this
# long each, starting from FIRST_RANGE ids
RANGE_SECONDS = 0.005
FIRST_RANGE = 500
GAVE_WAY = "gave way to a waiting writer: ran in ranges"
# once no writer has waited for this long, what is left of it runs in one transaction
# again (and gives way again if one comes); each time it had to give way again, twice as long
QUIET_SECONDS = 0.5
AT_ONCE = "no writer waited: ran the rest in one transaction"


def run_rules(
    ctx: Context, name: str, progress: Callable[[str], None] | None = None, record: bool = True
) -> PassResult:
    """Execute one pass's rule statements and record the run, all in one transaction;
    a pass with `batch: N` commits every N ids instead (see `run_batched`), and so does
    one that gives way to a writer waiting for the lock (it rolls back and runs again in
    ranges). With `record=False` the caller records the run when its own work is done;
    until then the pass's progress says its rules are applied, so a crash never applies
    them twice."""
    if ctx.policy.passes[name].batch:
        return run_batched(ctx, name, progress, record)
    state = ctx.store.progress(ctx.namespace, name)
    if state and state["cursor"] >= RULES_DONE:
        return PassResult(
            name, state["run_now"], state["changed"], notes=["resumed an interrupted run after its rules"]
        )
    if state:  # it gave way, and that run in ranges was cut short: finish it
        return run_batched(ctx, name, progress, record)
    try:
        with ctx.transaction(exclusive=True), _giving_way(ctx, [name]):
            result = _rules_and_record(ctx, name, progress, record, clear=False)
        return result
    except GaveWay as gave:
        return run_batched(ctx, name, progress, record, GAVE_WAY, top=gave.top)


def run_together(ctx: Context, names: list[str], progress=None) -> list[PassResult]:
    """Passes of rules alone (no `batch:`, no clusters), run in one transaction, each
    recorded as its own run: `lethe run --pass expiry --pass decay` writes each page of
    the file once and commits once, as the article's own passes do, instead of committing
    expiry's scattered rows and then rewriting them. All or none land."""
    if len(names) == 1 or any(ctx.store.progress(ctx.namespace, n) for n in names):
        return [run_rules(ctx, name, progress) for name in names]  # one left half done
    try:
        with ctx.transaction(exclusive=True), _giving_way(ctx, names):
            together = [_rules_and_record(ctx, name, progress, True, clear=False) for name in names]
        return together
    except GaveWay as gave:  # a writer waits: each runs in ranges, none of them has landed
        results: list[PassResult] = []
        for name in names:  # once one ended at once, the next tries that first
            quiet = 0.0 if results and AT_ONCE in results[-1].notes else None
            results.append(run_batched(ctx, name, progress, note=GAVE_WAY, top=gave.top, quiet=quiet))
        return results


def _giving_way(ctx: Context, names: list[str]):
    """Inside the pass's transaction, around its statements (never its BEGIN, its lease
    renewal or its COMMIT): the store's giving_way, unless a pass is `atomic: true` or
    has no rules to run in ranges (compression's part before its merges)."""
    if any(ctx.policy.passes[n].atomic or n not in ctx.plan.pass_ranges for n in names):
        return contextlib.nullcontext()
    return ctx.store.giving_way()


def alone_in_a_transaction(ctx: Context, name: str) -> bool:
    """Whether a pass is only rules that run in one transaction (what run_together takes)."""
    p = ctx.policy.passes[name]
    return not p.batch and p.cluster is None


def _rules_and_record(ctx: Context, name: str, progress, record: bool, clear: bool = True) -> PassResult:
    now = ctx.now()
    result = PassResult(name, now)
    due = ctx.plan.pass_due.get(name)
    if due is not None and ctx.store.fetch_one(due, ctx.namespace, now) is None:
        _finish(ctx, name, now, result, record, clear)  # no row is due: nothing to change
        result.events = {st.event: 0 for st in ctx.plan.passes[name] if st.event}
        return result
    statements, meant, id_range = ctx.plan.passes[name], None, None
    if statements and statements[0].counts_skipped:  # counted before the indexes go, so
        meant = _count(ctx, statements[0], now, progress)  # an index can answer it
        statements = statements[1:]
    with _rewriting(ctx, name, now) as top:
        if top is not None:  # most of the file: its rows in id order (engine.store.sqlite.bulk)
            statements, id_range = ctx.plan.pass_ranges[name], (0, top + 1)
            statements = statements[1:] if meant is not None else statements
        _apply(ctx, statements, result, now, progress, id_range, meant=meant)
    _finish(ctx, name, now, result, record, clear)
    return result


def _count(ctx: Context, st, now: str, progress, id_range=None) -> int:
    if progress:
        progress(st.label)
    row = ctx.store.fetch_one(st, ctx.namespace, now, id_range=id_range or (0, 0))
    return row[0] if row is not None else 0  # a count has its one row


def _rewriting(ctx: Context, name: str, now: str, id_range: tuple[int, int] | None = None):
    """A pass that reaches most of the file rebuilds the indexes over what it writes once,
    at its end, instead of moving one entry per row (engine.store.sqlite.bulk); `id_range`: what
    it reaches within that range (the rest of a pass that gave way). Yields the file's
    largest id when the pass reaches most of it, for its rules over an id range to read
    every id in order instead of walking an index on namespace; else None."""
    reach = (ctx.plan.pass_reach_ranged if id_range else ctx.plan.pass_reach).get(name)
    if reach is None or not ctx.plan.pass_writes[name]:
        return contextlib.nullcontext(None)
    return ctx.store.rewriting(
        reach, ctx.plan.pass_writes[name], ctx.namespace, now, id_range=id_range or (0, 0)
    )


def _finish(ctx: Context, name: str, now: str, result: PassResult, record: bool, clear: bool = True) -> None:
    """In the transaction of a pass's last rule statements: record the run, or (for the
    caller to record it later) mark the rules done. `clear=False`: the pass was read to
    have no progress under this lease, and only the lease's holder writes progress, so
    there is none to delete (a round trip fewer per pass on a server)."""
    if record:
        if clear:
            ctx.store.clear_progress(ctx.namespace, name)
        ctx.store.record_run(ctx.namespace, name, now, result.changed)
    else:
        ctx.store.save_progress(ctx.namespace, name, RULES_DONE, now, result.changed)


def _apply(
    ctx: Context,
    statements,
    result: PassResult,
    now: str,
    progress,
    id_range: tuple[int, int] | None = None,
    meant: int | None = None,
) -> None:
    # meant: rows the current rule is for (when its values can come out unusable)
    # recorded: the rule whose events were just inserted, and how many: the rows its
    # UPDATE changes, which leave the active ones when it sets another status
    recorded: tuple[str | None, int] = (None, 0)
    for st in statements:
        if st.counts_skipped:
            meant = _count(ctx, st, now, progress, id_range)
            continue
        if progress:
            progress(st.label)
        leaving = recorded[1] if st.leaves_active and recorded[0] == st.rule else 0
        if st.counts_kept:  # an UPDATE that keeps, and counts, the rows it cannot score
            with ctx.store.leaving_active(leaving):
                n, kept = ctx.store.run_rule(st, ctx.namespace, now, id_range=id_range or (0, 0))
            result.changed += n
            if kept:
                result.skipped += kept
                _note_skipped(result, st.rule)
            continue
        with ctx.store.leaving_active(leaving):
            n = ctx.store.run(st, ctx.namespace, now, id_range=id_range or (0, 0))
        if st.kind is Kind.INSERT_EVENTS:
            result.events[st.event] = result.events.get(st.event, 0) + n
            recorded = (st.rule, n)
            continue
        result.changed += n
        if meant is not None and meant > n:
            result.skipped += meant - n
            _note_skipped(result, st.rule)
        meant = None


def _note_skipped(result: PassResult, rule: str) -> None:
    note = f"{rule}: rows whose new value was NULL or not finite kept their values"
    if note not in result.notes:
        result.notes.append(note)


def run_batched(
    ctx: Context,
    name: str,
    progress=None,
    record: bool = True,
    note: str | None = None,
    top: int | None = None,
    quiet: float | None = None,
) -> PassResult:
    """A pass over a huge store, committed in id ranges so readers and writers are never
    held up for long. Every rule reads and writes only its own row, so running all rules
    range by range gives the same rows as one transaction. Each range commits together
    with the cursor, and a resumed run keeps the `now` it started with: after a crash the
    next run finishes the same pass, and no row is ever passed over or done twice. Under
    the lease only a runner whose predecessor is gone (died, or lost the lease) finds the
    cursor, and each range's commit is fenced: two runners never share one run.
    Without `batch:` (a pass that gave way to a writer) each range is sized from the last
    one's time to hold the lock about RANGE_SECONDS, and once no writer has waited for
    QUIET_SECONDS (`quiet`, when given) the rest runs in one transaction (`_rest_at_once`)."""
    store, ns = ctx.store, ctx.namespace
    size = ctx.policy.passes[name].batch
    timed, size = size is None, size or FIRST_RANGE
    statements = ctx.plan.pass_ranges[name] if timed else ctx.plan.passes[name]
    state = store.progress(ns, name)
    now = state["run_now"] if state else ctx.now()
    result = PassResult(name, now, notes=["resumed an interrupted run"] if state else [])
    if note:
        result.notes.append(note)
    result.changed = state["changed"] if state else 0  # rows the interrupted run already did
    lo, last = store.id_bounds(ns)
    lo = state["cursor"] if state else lo
    if state and state["top_id"] is not None:
        top = state["top_id"]  # resumed: where it was to stop when it began
    elif top is None:
        top = last  # (a pass that gave way: what its transaction saw)
    # a run that just gave way waits for quiet; one resumed after a crash tries at once
    if quiet is None:
        quiet = QUIET_SECONDS if note == GAVE_WAY else 0.0
    last_writer = time.monotonic()
    if note == GAVE_WAY:
        store.make_way()  # the writer it gave way to goes first
    while lo <= top:
        if timed and time.monotonic() - last_writer >= quiet:
            if _rest_at_once(ctx, name, statements, result, now, progress, (lo, top + 1), record):
                return result
            # a writer came: it goes first, then at least one range before the next try
            quiet, last_writer = max(2 * quiet, QUIET_SECONDS), time.monotonic()
            store.make_way()
        hi, began = min(lo + size, top + 1), time.perf_counter()
        with ctx.transaction(exclusive=True):
            _apply(ctx, statements, result, now, progress, (lo, hi))
            store.save_progress(ns, name, hi, now, result.changed, top)
        lo = hi
        if timed:  # at most twice the last, at least a tenth of the first
            took = max(time.perf_counter() - began, 1e-4)
            size = max(FIRST_RANGE // 10, min(2 * size, int(size * RANGE_SECONDS / took)))
            if store.writer_waits():
                last_writer = time.monotonic()
        store.make_way()  # a writer waiting for the lock takes it before the next range
    with ctx.transaction():
        _finish(ctx, name, now, result, record)
    return result


def _rest_at_once(
    ctx: Context,
    name: str,
    statements,
    result: PassResult,
    now: str,
    progress,
    rest: tuple[int, int],
    record: bool,
) -> bool:
    """What is left of a pass in ranges (ids in `rest`), run in one transaction with its
    run recorded, as the pass would have been, giving way again if a writer comes: False
    then, with nothing of it landed and `result` as it was."""
    kept = (result.changed, dict(result.events), result.skipped, list(result.notes))
    try:
        with ctx.transaction(exclusive=True), _giving_way(ctx, [name]):
            with _rewriting(ctx, name, now, rest):
                _apply(ctx, statements, result, now, progress, rest)
            if AT_ONCE not in result.notes:
                result.notes.append(AT_ONCE)
            _finish(ctx, name, now, result, record)
        return True
    except GaveWay:
        result.changed, result.events, result.skipped, result.notes = kept
        return False


def next_due(last_run: str | None, every: dt.timedelta | None, now: dt.datetime) -> dt.datetime | None:
    """When a pass is next due: `every` after its last run, now if it never ran, never
    (None) if it runs only on demand. The one place this rule lives."""
    if every is None:
        return None
    return now if last_run is None else parse_time(last_run) + every


def due(ctx: Context, now: dt.datetime, schedule=None) -> list[str]:
    """Passes whose `every` has elapsed since their last recorded run (never run: due).
    `schedule`: the store's `schedule()`, when the caller has just read it."""
    schedule = schedule or ctx.store.schedule(ctx.namespace)
    out, back = [], went_back(schedule, now)
    for name, p in ctx.policy.passes.items():
        when = next_due(schedule.last_runs.get(name), p.every, now)
        if name in schedule.unfinished or (when is not None and (when <= now or name in back)):
            out.append(name)  # an interrupted batched run is finished first
    return out


def went_back(schedule, now: dt.datetime) -> dict[str, str]:
    """Passes whose last run is more than a day later than `now`, with that time: the clock
    went back (or ran ahead once: a `--now` typo, a host's clock wrong for a day). Such a
    pass is due, else it would wait for a time that may be years away (docs/time.md). Within
    a day it is two hosts' clocks disagreeing, and the pass waits as scheduled: running it
    again at once would apply it twice for every second of skew."""
    return {n: at for n, at in schedule.last_runs.items() if at and parse_time(at) > now + AHEAD}
