"""Run a pass: its compiled statements, in order, in one transaction.

A pass's cost is the SQL's: no Python loop over rows. The time it ran is recorded in the
same transaction, so a pass is either applied and recorded, or neither.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Callable

from .clock import parse_time
from .context import Context


@dataclass
class PassResult:
    name: str
    ran_at: str
    changed: int = 0
    events: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"pass": self.name, "ran_at": self.ran_at, "changed": self.changed,
                "events": self.events, "notes": self.notes}


def run_rules(ctx: Context, name: str, progress: Callable[[str], None] | None = None,
              record: bool = True) -> PassResult:
    """Execute one pass's rule statements and record the run, all in one transaction;
    a pass with `batch: N` commits every N ids instead (see `run_batched`). With
    `record=False` the caller records the run when its own work is done."""
    if ctx.policy.passes[name].batch:
        return run_batched(ctx, name, progress)
    now = ctx.now()
    result = PassResult(name, now)
    with ctx.store.transaction(exclusive=True):
        _apply(ctx, ctx.plan.passes[name], result, now, progress)
        if record:
            ctx.store.record_run(ctx.namespace, name, now, result.changed)
    return result


def _apply(ctx: Context, statements, result: PassResult, now: str, progress,
           id_range: tuple[int, int] | None = None) -> None:
    for st in statements:
        if progress:
            progress(st.label)
        n = ctx.store.run(st, ctx.namespace, now, id_range=id_range or (0, 0))
        if st.sql.startswith("INSERT INTO memory_events"):
            event = st.params[0]
            result.events[event] = result.events.get(event, 0) + n
        else:
            result.changed += n


def run_batched(ctx: Context, name: str, progress=None) -> PassResult:
    """A pass over a huge store, committed in id ranges so readers and writers are never
    held up for long. Every rule reads and writes only its own row, so running all rules
    range by range gives the same rows as one transaction. Each range commits together
    with the cursor, and a resumed run keeps the `now` it started with: after a crash the
    next run finishes the same pass, and no row is ever passed over or done twice."""
    store, ns = ctx.store, ctx.namespace
    size = ctx.policy.passes[name].batch
    state = store.progress(ns, name)
    now = state["run_now"] if state else ctx.now()
    result = PassResult(name, now, notes=["resumed an interrupted run"] if state else [])
    result.changed = state["changed"] if state else 0  # rows the interrupted run already did
    lo, top = store.id_bounds(ns)
    lo = state["cursor"] if state else lo
    while lo <= top:
        hi = lo + size
        with store.transaction(exclusive=True):
            _apply(ctx, ctx.plan.passes[name], result, now, progress, (lo, hi))
            store.save_progress(ns, name, hi, now, result.changed)
        lo = hi
    with store.transaction():
        store.clear_progress(ns, name)
        store.record_run(ns, name, now, result.changed)
    return result


def next_due(last_run: str | None, every: dt.timedelta | None, now: dt.datetime) -> dt.datetime | None:
    """When a pass is next due: `every` after its last run, now if it never ran, never
    (None) if it runs only on demand. The one place this rule lives."""
    if every is None:
        return None
    return now if last_run is None else parse_time(last_run) + every


def due(ctx: Context, now: dt.datetime) -> list[str]:
    """Passes whose `every` has elapsed since their last recorded run (never run: due)."""
    last = ctx.store.last_runs(ctx.namespace)
    unfinished = ctx.store.unfinished(ctx.namespace)
    out = []
    for name, p in ctx.policy.passes.items():
        when = next_due(last.get(name), p.every, now)
        if name in unfinished or (when is not None and when <= now):
            out.append(name)  # an interrupted batched run is finished first
    return out
