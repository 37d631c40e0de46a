"""`make demo`: adopt an article-format database and run the lifecycle policy over it, offline."""
from __future__ import annotations

import datetime as dt
import os
import shutil

from .clock import FixedClock
from .memory import Memory
from .policy import PROJECT_DIR

OUT = "demo-out"


def main() -> None:
    from bench.seed_article import generate

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "agent_memory.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    start = dt.datetime(2026, 1, 5, 9, 0)
    generate(path, 5000, start)
    print(f"1. An article-format agent_memory.db with 5,000 memories: {path}")
    clock = FixedClock(start)
    policy = os.path.join(PROJECT_DIR, "policies", "lifecycle.yaml")
    with Memory(path, policy=policy, clock=clock, offline=True) as mem:
        print(f"2. Adopted in place by policies/lifecycle.yaml: {_counts(mem)}")
        for day in (1, 30, 90):
            clock.set(start + dt.timedelta(days=day))
            results = mem.run_due()
            done = "; ".join(f"{r.name}: {r.changed} changed {r.events}" for r in results)
            print(f"3. Day {day:>3}, passes due: {done}")
            print(f"   statuses now: {_counts(mem)}")
        top = mem.candidates(limit=3)
        print("4. What recall would consider first:")
        for m in top:
            print(f"   #{m.id} rank {m.rank:.2f} (imp {m.importance:g} conf {m.confidence:g} "
                  f"fresh {m.decay_score:.2f}) {m.summary}")
        archived = mem.store.db.execute("SELECT memory_id FROM memory_events WHERE event_type = "
                                        "'archived' ORDER BY id LIMIT 1").fetchone()
        if archived:
            h = mem.history(archived[0])
            print(f"5. Why is #{h.memory.id} archived? (lethe why {h.memory.id} --db {path})")
            for e in h.events:
                print(f"   {e['occurred_at']} {e['event_type']}: {e['detail']}")
    print(f"\nTry: .venv/bin/lethe ls --db {path} --now {(start + dt.timedelta(days=90)).isoformat()}")


def _counts(mem: Memory) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(mem.counts().items()))


if __name__ == "__main__":
    main()
