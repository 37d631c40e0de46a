"""Run a pass: its compiled statements, in order, in one transaction.

A pass's cost is the SQL's: no Python loop over rows. The time it ran is recorded in the
same transaction, so a pass is either applied and recorded, or neither.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Callable

from .clock import parse_time
from .plan import Plan
from .store import Store


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


def run_rules(store: Store, plan: Plan, name: str, namespace: str,
              progress: Callable[[str], None] | None = None, record: bool = True) -> PassResult:
    """Execute one pass's rule statements and record the run, all in one transaction;
    a pass with `batch: N` commits every N ids instead (see `run_batched`). With
    `record=False` the caller records the run when its own work is done."""
    if plan.policy.passes[name].batch:
        return run_batched(store, plan, name, namespace, progress)
    now = store.now()
    result = PassResult(name, now)
    with store.transaction() as db:
        _apply(db, plan.passes[name], result, now, namespace, progress)
        if record:
            record_run(db, namespace, name, now, result.changed)
    return result


def _apply(db, statements, result: PassResult, now: str, namespace: str, progress,
           id_range: tuple[int, int] | None = None) -> None:
    for st in statements:
        if progress:
            progress(st.label)
        cur = db.execute(st.sql, st.bind(now, namespace, id_range=id_range or (0, 0)))
        if st.sql.startswith("INSERT INTO memory_events"):
            event = st.params[0]
            result.events[event] = result.events.get(event, 0) + max(cur.rowcount, 0)
        else:
            result.changed += max(cur.rowcount, 0)


def run_batched(store: Store, plan: Plan, name: str, namespace: str, progress=None) -> PassResult:
    """A pass over a huge store, committed in id ranges so readers and writers are never
    held up for long. Every rule reads and writes only its own row, so running all rules
    range by range gives the same rows as one transaction. Each range commits together
    with the cursor, and a resumed run keeps the `now` it started with: after a crash the
    next run finishes the same pass, and no row is ever passed over or done twice."""
    size = plan.policy.passes[name].batch
    state = store.db.execute("SELECT cursor, run_now, changed FROM pass_progress WHERE namespace = ? "
                             "AND pass = ?", (namespace, name)).fetchone()
    now = state["run_now"] if state else store.now()
    result = PassResult(name, now, notes=["resumed an interrupted run"] if state else [])
    result.changed = state["changed"] if state else 0  # rows the interrupted run already did
    lo, top = store.db.execute("SELECT min(id), max(id) FROM memories WHERE namespace = ?",
                               (namespace,)).fetchone()
    lo = state["cursor"] if state else (lo or 0)
    top = top or 0
    while lo <= top:
        hi = lo + size
        with store.transaction() as db:
            _apply(db, plan.passes[name], result, now, namespace, progress, (lo, hi))
            db.execute("INSERT INTO pass_progress (namespace, pass, cursor, run_now, changed) "
                       "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
                       "cursor = excluded.cursor, changed = excluded.changed",
                       (namespace, name, hi, now, result.changed))
        lo = hi
    with store.transaction() as db:
        db.execute("DELETE FROM pass_progress WHERE namespace = ? AND pass = ?", (namespace, name))
        record_run(db, namespace, name, now, result.changed)
    return result


def record_run(db, namespace: str, name: str, now: str, changed: int) -> None:
    db.execute("INSERT INTO pass_runs (namespace, pass, last_run_at, rows_changed) "
               "VALUES (?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
               "last_run_at = excluded.last_run_at, rows_changed = excluded.rows_changed",
               (namespace, name, now, changed))


def due(store: Store, plan: Plan, namespace: str, now: dt.datetime) -> list[str]:
    """Passes whose `every` has elapsed since their last recorded run (never run: due)."""
    last = {r["pass"]: r["last_run_at"] for r in store.db.execute(
        "SELECT pass, last_run_at FROM pass_runs WHERE namespace = ?", (namespace,))}
    unfinished = {r[0] for r in store.db.execute(
        "SELECT pass FROM pass_progress WHERE namespace = ?", (namespace,))}
    out = []
    for name, p in plan.policy.passes.items():
        if name in unfinished:  # a batched run was interrupted: finish it first
            out.append(name)
        elif p.every is None:
            continue
        elif name not in last or now - parse_time(last[name]) >= p.every:
            out.append(name)
    return out
