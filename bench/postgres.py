"""PostgreSQL benchmarks: at N rows (default 1M) of the article's format, on one server.

* import  - `copy_store` of the article file into an empty schema (COPY in batches).
* passes  - expiry + decay: the statements Lethe compiles for them vs the same five bare
            statements by hand (bench/bare_sql.py's, in PostgreSQL's spelling), each in
            one transaction rolled back and vacuumed away, so every run starts from the
            imported rows; alternating, best of two. Then `Memory.run` for real.
* recall  - `candidates()` and `recall(query)` latency (median, p99) at N.
* remember - turns per second from 8 worker processes remembering at once (offline
            rules judges, so the server and the engine are what is measured).

    python -m bench.postgres [--rows 1000000] [--workers 8] [--seconds 20]

A server: LETHE_TEST_PG=postgresql://..., else one started here (tests/helpers/pg_server.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from engine import FixedClock, Memory
from engine.store.transfer import copy_store
from tests.helpers import context_of, pg_server, store_of

from . import datasets as D

POLICY = "policies/lifecycle.yaml"
# double precision throughout, as anyone tuning it would write it (and as the dialect
# binds it): extract() is NUMERIC, and a literal like 0.03 is NUMERIC too, several times
# slower per row than a double
FRESH = (
    "least(1.0::float8, exp(-0.693::float8 * floor((extract(epoch from (%(now)s::timestamp "
    "- coalesce(last_accessed, created_at)::timestamp)) / 86400.0)::float8) / 30) "
    "+ least(0.3::float8, access_count * 0.03::float8))"
)
BARE = [
    "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) SELECT id, 'expired', "
    "json_build_object('rule', 'expiry', 'from', json_build_object('status', status), 'to', "
    "json_build_object('status', 'expired')), %(now)s FROM memories WHERE status = 'active' "
    "AND expires_at < %(now)s",
    "UPDATE memories SET status = 'expired' WHERE status = 'active' AND expires_at < %(now)s",
    f"UPDATE memories SET decay_score = {FRESH}, rank = importance * confidence * ({FRESH}) "
    "WHERE status = 'active'",
    "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) SELECT id, 'archived', "
    "json_build_object('rule', 'decay', 'from', json_build_object('status', status, 'decay_score', "
    "decay_score), 'to', json_build_object('status', 'archived', 'decay_score', 0)), %(now)s "
    "FROM memories WHERE status = 'active' AND decay_score < 0.1::float8",
    "UPDATE memories SET status = 'archived', decay_score = 0.0, rank = 0.0 "
    "WHERE status = 'active' AND decay_score < 0.1::float8",
]
WORKER = """
import sys, time, random, datetime as dt
from engine import FixedClock, Memory
dsn, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
clock = FixedClock(dt.datetime(2026, 2, 1, 9))
tools = ["PostgreSQL", "MySQL", "Redis", "poetry", "uv", "Neovim", "VS Code", "tabs", "spaces"]
with Memory(dsn, policy="policies/lifecycle.yaml", offline=True, clock=clock) as mem:
    mem.remember("warm up", "ok")
    n, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        mem.remember(f"I use {rng.choice(tools)} for task {seed}-{n}.", "Noted.")
        n += 1
print(n)
"""


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def bench_passes(dsn: str, now: str, rounds: int = 2) -> dict:
    """Lethe's compiled expiry + decay statements vs the bare ones, each in one transaction
    rolled back (and vacuumed away) so every run starts from the same rows, alternating,
    best of `rounds`; then `Memory.run` for real, whose counts must match the bare ones."""
    mem = Memory(dsn, policy=POLICY, clock=FixedClock(now))
    store, plan = store_of(mem), context_of(mem).plan
    compiled = plan.passes["expiry"] + plan.passes["decay"]

    def rolled_back(work):
        with store.db.transaction() as tx:
            store.db.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
            out = work()
            tx.force_rollback = True
        store.db.execute("VACUUM memories")
        store.db.execute("VACUUM memory_events")
        return out

    bare_t, lethe_t = [], []
    for _ in range(rounds):
        t, counts = timed(
            lambda: rolled_back(lambda: [store.db.execute(sql, {"now": now}).rowcount for sql in BARE])
        )
        bare_t.append(t)
        lethe_t.append(
            timed(lambda: rolled_back(lambda: [store.run(st, "default", now) for st in compiled]))[0]
        )
    run_s, results = timed(lambda: mem.run(["expiry", "decay"]))
    mem.close()
    same = [results[0].events.get("expired"), results[1].events.get("archived")] == [counts[0], counts[3]]
    return {
        "bare_s": round(min(bare_t), 3),
        "lethe_s": round(min(lethe_t), 3),
        "ratio": round(min(lethe_t) / min(bare_t), 2),
        "memory_run_s": round(run_s, 3),
        "all_s": {"bare": [round(x, 2) for x in bare_t], "lethe": [round(x, 2) for x in lethe_t]},
        "expired": counts[0],
        "archived": counts[3],
        "same_counts": same,
    }


def bench_recall(dsn: str, now: str, n: int = 50) -> dict:
    mem = Memory(dsn, policy=POLICY, offline=True, clock=FixedClock(now))
    mem.candidates()
    plain = [timed(mem.candidates)[0] * 1000 for _ in range(n)]
    queries = ["which database does the project use?", "editor settings", "deploy on friday"]
    query = [timed(lambda q=q: mem.recall(q))[0] * 1000 for _ in range(n // 5) for q in queries]
    mem.close()
    q99 = lambda xs: sorted(xs)[int(len(xs) * 0.99) - 1] if len(xs) > 1 else xs[0]  # noqa: E731
    return {
        "candidates_median_ms": round(statistics.median(plain), 2),
        "candidates_p99_ms": round(q99(plain), 2),
        "recall_query_median_ms": round(statistics.median(query), 2),
        "recall_query_p99_ms": round(q99(query), 2),
    }


def bench_remember(dsn: str, workers: int, seconds: float) -> dict:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, dsn, str(seconds), str(i)], stdout=subprocess.PIPE, text=True
        )
        for i in range(workers)
    ]
    counts = [int(p.communicate()[0].strip() or 0) for p in procs]
    return {
        "workers": workers,
        "seconds": seconds,
        "turns": sum(counts),
        "turns_per_s": round(sum(counts) / seconds, 1),
        "per_worker": counts,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args(argv)
    server = None if pg_server.os.environ.get(pg_server.ENV_DSN) else pg_server.LocalServer()
    base = pg_server.os.environ.get(pg_server.ENV_DSN) or server.dsn
    try:
        raw = D.raw(a.rows)
        now = D.T_ISO
        dsn = pg_server.fresh_schema(base)
        import_s, _ = timed(lambda: copy_store(str(raw), dsn, batch=10_000))
        open_s, _ = timed(lambda: Memory(dsn, policy=POLICY, clock=FixedClock(now)).close())
        out = {
            "rows": a.rows,
            "import_s": round(import_s, 1),
            "first_open_s": round(open_s, 1),
            "passes": bench_passes(dsn, now),
            "recall": bench_recall(dsn, now),
            "remember": bench_remember(dsn, a.workers, a.seconds),
        }
    finally:
        if server:
            server.stop()
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
