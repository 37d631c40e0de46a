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
              progress: Callable[[str], None] | None = None) -> PassResult:
    """Execute one pass's rule statements and record the run, all in one transaction."""
    now = store.now()
    result = PassResult(name, now)
    with store.transaction() as db:
        for st in plan.passes[name]:
            if progress:
                progress(st.label)
            cur = db.execute(st.sql, st.bind(now, namespace))
            if st.sql.startswith("INSERT INTO memory_events"):
                event = st.params[0]
                result.events[event] = result.events.get(event, 0) + max(cur.rowcount, 0)
            else:
                result.changed += max(cur.rowcount, 0)
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
    out = []
    for name, p in plan.policy.passes.items():
        if p.every is None:
            continue
        if name not in last or now - parse_time(last[name]) >= p.every:
            out.append(name)
    return out
