"""Designs for the 1M decay pass, measured outside the engine (issue 14, sixth and twelfth
rounds). None is built into Lethe; this file is how RESULTS.md's figures for them were taken.

    python -m bench.prototypes threshold   # recall from time-invariant bounds
    python -m bench.prototypes head 5000   # a trigger-kept recall head + a batched pass
    python -m bench.prototypes partial [R] # recall's index partial over the head (R runs)
    python -m bench.prototypes readtime [R] # decay scores computed when read (R runs)

`threshold`: after the lifecycle pass at T, stop storing what time changes and read the
top 60 by the threshold algorithm over three indexes whose keys change only when a row is
accessed or edited: `log IC + k * a` (rank <= IC * exp(-k (t - a - 1)) + IC * b),
`IC * b` and `IC` (with IC = importance * confidence, a = the last access in days, b =
the access bonus). Prints the rows read and the median time, at T and later pass times,
against the stored-rank index.

`partial` (twelfth round): recall's index stays an index, made partial over the head of
the ranking (`WHERE status = 'active' AND rank >= FLOOR`, FLOOR the 10,000th rank). SQLite
maintains a partial index only for rows that are in it before or after an UPDATE, so the
decay's rewrite of every rank costs no index work outside the head and nothing is rebuilt.
Recall adds `rank >= ?` bound to FLOOR (SQLite plans with the bound value). Times the floor,
the design as built (bench/bare_sql.py --design) and the same statements on the head
index (--head), and recall through it against the full index.

`head`: drop the (namespace, status, rank, id) recall index; keep instead a table of the
rows whose rank is at least a floor (the top ~10,000), kept by triggers on every change
of rank or status, so a batched decay pass moves no index entry but those. Runs
`lethe run --pass expiry --pass decay` with `batch: N` and calls remember, add and a
recall read from the head in turn while it runs (bench/concurrent.py's caller).
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import concurrent as C
from . import datasets as D

K = 0.693 / 30  # lifecycle's decay rate a day
LISTS = (("ta1", "k1"), ("ta2", "k2"), ("ta3", "ic"))
DECAY = f"min(1.0, exp(-{K} * floor(:t - a_day)) + bonus)"
HEAD_RECALL = (
    "SELECT memories.*, 0.0 AS relevance FROM recall_head AS h CROSS JOIN memories "
    "ON memories.id = h.id WHERE h.namespace = 'default' AND memories.namespace = 'default' "
    "AND memories.status = 'active' AND memories.decay_score > 0.15 "
    "ORDER BY h.rank DESC, h.id DESC LIMIT 60"
)


def _after_pass(tag: str) -> Path:
    """A copy of the adopted 1M file after lifecycle's expiry and decay at T."""
    copy = D.work_copy(D.adopted(1_000_000), tag)
    subprocess.run(
        C._lethe_cmd()
        + [
            "run",
            "--db",
            str(copy),
            "--policy",
            str(D.POLICY),
            "--pass",
            "expiry",
            "--pass",
            "decay",
            "--now",
            D.T_ISO,
        ],
        cwd=D.ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return copy


def _bound_keys(db: sqlite3.Connection) -> None:
    db.executescript(f"""
    ALTER TABLE memory_rows ADD COLUMN ic REAL; ALTER TABLE memory_rows ADD COLUMN a_day REAL;
    ALTER TABLE memory_rows ADD COLUMN bonus REAL; ALTER TABLE memory_rows ADD COLUMN k1 REAL;
    ALTER TABLE memory_rows ADD COLUMN k2 REAL;
    UPDATE memory_rows SET ic = importance * confidence,
      a_day = julianday(coalesce(last_accessed, created_at)), bonus = min(0.3, access_count * 0.03);
    UPDATE memory_rows SET k1 = ln(max(ic, 1e-12)) + {K} * a_day, k2 = ic * bonus;
    CREATE INDEX ta1 ON memory_rows(namespace, status, k1, ic, a_day, bonus) WHERE status = 'active';
    CREATE INDEX ta2 ON memory_rows(namespace, status, k2, ic, a_day, bonus) WHERE status = 'active';
    CREATE INDEX ta3 ON memory_rows(namespace, status, ic, a_day, bonus) WHERE status = 'active';
    """)


def _threshold_top(db, t: float, strict: bool):
    """The top 60 by the threshold algorithm, reading m rows of each list, m doubling."""
    sql = {
        ix: f"SELECT id, ic * {DECAY} AS r, {col} FROM memories INDEXED BY {ix} "
        f"WHERE namespace = 'default' AND status = 'active' AND {DECAY} > 0.15 "
        f"ORDER BY {col} DESC LIMIT :m"
        for ix, col in LISTS
    }
    m = 64
    while True:
        best, last = {}, []
        for ix, _ in LISTS:
            rows = db.execute(sql[ix], {"t": t, "m": m}).fetchall()
            best.update((i, r) for i, r, _ in rows)
            last.append(rows[-1][2] if len(rows) == m else None)
        top = sorted(best.items(), key=lambda x: (-x[1], -x[0]))[:60]
        if None in last:  # a list ran out: everything was read
            return top, m, len(best)
        bound = min(math.exp(last[0] - K * (t - 1)) + last[1], last[2])
        if len(top) == 60 and (top[-1][1] > bound if strict else top[-1][1] >= bound):
            return top, m, len(best)
        m *= 2


def threshold(log=print) -> None:
    copy = _after_pass("threshold")
    db = sqlite3.connect(copy)
    try:
        _bound_keys(db)
        t0 = db.execute("SELECT julianday(?)", (D.T_ISO,)).fetchone()[0]
        for days in (0, 7, 30, 90):
            t = t0 + days
            exact = db.execute(
                f"SELECT id, ic * {DECAY} AS r FROM memories WHERE status = "
                f"'active' AND {DECAY} > 0.15 ORDER BY r DESC, id DESC LIMIT 60",
                {"t": t},
            ).fetchall()
            for strict in (False, True):
                top, m, seen = _threshold_top(db, t, strict)
                times = []
                for _ in range(15):
                    s = time.perf_counter()
                    _threshold_top(db, t, strict)
                    times.append(time.perf_counter() - s)
                same = [i for i, _ in top] == [i for i, _ in exact]
                log(
                    f"T+{days} d, ties {'by id' if strict else 'any'}: read {seen} rows "
                    f"(depth {m}), same ids as the full scan: {same}, median "
                    f"{statistics.median(times) * 1e3:.2f} ms"
                )
        times = []
        for _ in range(30):
            s = time.perf_counter()
            db.execute(
                "SELECT id FROM memories WHERE namespace = 'default' AND status = "
                "'active' AND decay_score > 0.15 ORDER BY rank DESC, id DESC "
                "LIMIT 60"
            ).fetchall()
            times.append(time.perf_counter() - s)
        log(f"the stored-rank index, same query: median {statistics.median(times) * 1e3:.3f} ms")
    finally:
        db.close()
        D.drop(copy)


def _make_head(db: sqlite3.Connection, size: int) -> float:
    floor = db.execute(
        "SELECT rank FROM memories WHERE namespace = 'default' AND status = "
        "'active' ORDER BY rank DESC, id DESC LIMIT 1 OFFSET ?",
        (size - 1,),
    ).fetchone()[0]
    th = "(SELECT theta FROM recall_head_floor WHERE namespace = {0}.namespace)"
    db.executescript(f"""
    BEGIN;
    DROP INDEX memories_recall;
    CREATE TABLE recall_head (namespace TEXT NOT NULL, rank REAL NOT NULL, id INTEGER NOT NULL,
      PRIMARY KEY (namespace, rank, id)) WITHOUT ROWID;
    CREATE TABLE recall_head_floor (namespace TEXT PRIMARY KEY, theta REAL NOT NULL);
    INSERT INTO recall_head_floor VALUES ('default', {floor!r});
    INSERT INTO recall_head SELECT namespace, rank, id FROM memories
      WHERE namespace = 'default' AND status = 'active' AND rank >= {floor!r};
    CREATE TRIGGER head_ins AFTER INSERT ON memories
      WHEN new.status = 'active' AND new.rank >= {th.format("new")}
      BEGIN INSERT OR IGNORE INTO recall_head VALUES (new.namespace, new.rank, new.id); END;
    CREATE TRIGGER head_upd AFTER UPDATE OF rank, status ON memories
      WHEN (old.status = 'active' AND old.rank >= {th.format("old")})
        OR (new.status = 'active' AND new.rank >= {th.format("new")})
      BEGIN
        DELETE FROM recall_head WHERE namespace = old.namespace AND rank = old.rank AND id = old.id;
        INSERT OR IGNORE INTO recall_head SELECT new.namespace, new.rank, new.id
          WHERE new.status = 'active' AND new.rank >= {th.format("new")};
      END;
    CREATE TRIGGER head_del AFTER DELETE ON memories
      BEGIN DELETE FROM recall_head WHERE namespace = old.namespace AND rank = old.rank
        AND id = old.id; END;
    COMMIT;
    """)
    return floor


class HeadCaller(C.Caller):
    """bench/concurrent.py's caller, with recall read from the head."""

    path: Path

    def one(self):
        if C.KINDS[self.i % len(C.KINDS)] != "recall":
            return super().one()
        self.i += 1
        if not hasattr(self, "con"):
            self.con = sqlite3.connect(self.path, timeout=30)
        t0 = time.perf_counter()
        rows = self.con.execute(HEAD_RECALL).fetchall()
        self.times["recall"].append((t0, time.perf_counter() - t0))
        assert len(rows) == 60, f"the head gave {len(rows)} rows"


def head(batch: int, log=print) -> None:
    copy = D.work_copy(D.adopted(1_000_000), "head")
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "batched.yaml"
        policy.write_text(
            f"name: batched\nextends: {D.POLICY}\npasses:\n"
            f"  expiry:\n    batch: {batch}\n  decay:\n    batch: {batch}\n"
        )
        db = sqlite3.connect(copy, isolation_level=None)
        try:
            floor = _make_head(db, 10_000)
        finally:
            db.close()
        HeadCaller.path = copy
        C.Caller = HeadCaller
        try:
            r = C._run(copy, policy, C.IDLE_OPS)
        finally:
            D.drop(copy)
    log(
        f"head floor {floor:.4f}; batch {batch}; pass {r['pass_s']:.1f} s "
        f"(ok: {r['pass_ok']}); 'database is locked': {r['locked']}; errors: {r['errors'][:2]}"
    )
    for kind in C.KINDS:
        k = r[kind]
        log(
            f"  {kind}: p99 {k['p99']:.1f} ms, max {k['max']:.1f} ms, median {k['med']:.1f} ms "
            f"({k['calls']} calls)"
        )


# -- partial: recall's index over the head of the ranking only ------------------------
HEAD_ROWS = 10_000  # the head's size when its floor is chosen
FULL_RECALL = (
    "SELECT id FROM memories WHERE namespace = ? AND status = ? AND decay_score > ? "
    "ORDER BY rank DESC, id DESC LIMIT 60"
)
HEAD_RECALL_PARTIAL = (
    "SELECT id FROM memories WHERE namespace = ? AND status = ? AND "
    "decay_score > ? AND rank >= ? ORDER BY rank DESC, id DESC LIMIT 60"
)


def _wal(path: Path) -> Path:
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    return path


def _head_index(path: Path, rows: int = HEAD_ROWS) -> tuple[float, float]:
    """Recall's index made partial over the head: the active rows whose rank is at least
    the `rows`-th's (the floor, a number the engine would choose and write into the DDL
    itself). Returns (floor, seconds the CREATE INDEX took)."""
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        floor = db.execute(
            "SELECT rank FROM memories WHERE namespace = 'default' AND status = "
            "'active' ORDER BY rank DESC LIMIT 1 OFFSET ?",
            (rows - 1,),
        ).fetchone()[0]
        db.execute("DROP INDEX memories_recall")
        t0 = time.perf_counter()
        db.execute(
            "CREATE INDEX memories_recall ON memory_rows(namespace, status, rank, id) "
            f"WHERE status = 'active' AND rank >= {float(floor)!r}"
        )
        return floor, time.perf_counter() - t0
    finally:
        db.close()


def partial(reps: int = 2, log=print) -> None:
    """The floor, Lethe's design (recall's index rebuilt in the pass) and the same
    statements with recall's index partial over the head (left in place: rows outside it
    cost no index work), whole processes on fresh copies, interleaved; then recall through
    the head against the full index."""
    from . import passes as P

    raw, base = D.raw(1_000_000, log), D.adopted(1_000_000, log)
    times = {"floor": [], "design": [], "head": []}
    for _ in range(reps):
        c = D.work_copy(raw, "p-floor")
        times["floor"].append(P.run_bare(c, article=True)[0])
        D.drop(c)
        design = _wal(D.work_copy(base, "p-design"))
        times["design"].append(
            P._timed(
                [
                    sys.executable,
                    str(D.ROOT / "bench" / "bare_sql.py"),
                    str(design),
                    D.T_ISO,
                    "--as-lethe",
                    "--design",
                ]
            )[0]
        )
        head_copy = _wal(D.work_copy(base, "p-head"))
        floor, build = _head_index(head_copy)
        times["head"].append(
            P._timed(
                [
                    sys.executable,
                    str(D.ROOT / "bench" / "bare_sql.py"),
                    str(head_copy),
                    D.T_ISO,
                    "--as-lethe",
                    "--head",
                ]
            )[0]
        )
        log("  " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
    med = {k: statistics.median(v) for k, v in times.items()}
    log(
        f"floor {med['floor']:.2f} s; design (index rebuilt) {med['design']:.2f} s = "
        f"{med['design'] / med['floor']:.2f}x; head index in place {med['head']:.2f} s = "
        f"{med['head'] / med['floor']:.2f}x (medians of {reps})"
    )
    args = ("default", "active", 0.15)
    hd, full = sqlite3.connect(str(head_copy)), sqlite3.connect(str(design))
    try:
        kept = hd.execute(
            "SELECT count(*) FROM memories WHERE namespace = 'default' AND status = 'active' AND rank >= ?",
            (floor,),
        ).fetchone()[0]
        plan = [r[3] for r in hd.execute("EXPLAIN QUERY PLAN " + HEAD_RECALL_PARTIAL, (*args, floor))]
        took = []
        for _ in range(200):
            t0 = time.perf_counter()
            rows = hd.execute(HEAD_RECALL_PARTIAL, (*args, floor)).fetchall()
            took.append(time.perf_counter() - t0)
        same = rows == full.execute(FULL_RECALL, args).fetchall()
    finally:
        hd.close()
        full.close()
    log(
        f"head: floor {floor:.4f}, built in {build:.2f} s over {HEAD_ROWS} rows, {kept} rows "
        f"left in it after the pass; recall through it: median "
        f"{statistics.median(took) * 1000:.3f} ms, plan {plan}, same 60 ids as the full "
        f"index: {same}"
    )
    for c in (design, head_copy):
        D.drop(c)


READ_BACK = (
    "SELECT id, status, CASE WHEN status = 'active' THEN {f} ELSE decay_score END FROM memories ORDER BY id"
)


def readtime(reps: int = 2, log=print) -> None:
    """Seventeenth round: the floor, Lethe's design as built (bench/bare_sql.py --head) and
    the read-time design (--read-time: expiry, the archive found by the formula at T, the
    head's scores stored, nothing else written), whole processes on fresh copies,
    interleaved. Then every row as a reader would see it (an active row's decay_score
    computed at T from its inputs) against the floor's file: status and decay_score."""
    from . import bare_sql as B
    from . import passes as P

    raw, base = D.raw(1_000_000, log), D.adopted(1_000_000, log)
    times = {"floor": [], "design": [], "read-time": []}
    counts = {}
    floor_copy = read_copy = None
    for i in range(reps):
        last = i == reps - 1
        c = D.work_copy(raw, "rt-floor")
        secs, counts["floor"] = P.run_bare(c, article=True)
        times["floor"].append(secs)
        if last:
            floor_copy = c
        else:
            D.drop(c)
        d = D.work_copy(base, "rt-design")
        secs, counts["design"] = P.run_bare(d, as_lethe=True, design=True)
        times["design"].append(secs)
        D.drop(d)
        r = _wal(D.work_copy(base, "rt-read"))
        secs, out = P._timed(
            [
                sys.executable,
                str(D.ROOT / "bench" / "bare_sql.py"),
                str(r),
                D.T_ISO,
                "--as-lethe",
                "--read-time",
            ]
        )
        times["read-time"].append(secs)
        counts["read-time"] = json.loads(out)
        if last:
            read_copy = r
        else:
            D.drop(r)
        log("  " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
    med = {k: statistics.median(v) for k, v in times.items()}
    log(
        f"floor {med['floor']:.2f} s; design as built {med['design']:.2f} s = "
        f"{med['design'] / med['floor']:.2f}x; read-time design {med['read-time']:.2f} s = "
        f"{med['read-time'] / med['floor']:.2f}x (medians of {reps}); counts {counts}"
    )
    a, b = sqlite3.connect(str(floor_copy)), sqlite3.connect(str(read_copy))
    try:
        want = a.execute("SELECT id, status, decay_score FROM memories ORDER BY id").fetchall()
        got = b.execute(READ_BACK.format(f=B.FRESH), {"now": D.T_ISO}).fetchall()
        events = [
            db.execute(
                "SELECT event_type, count(*), count(DISTINCT memory_id) FROM "
                "memory_events WHERE occurred_at = ? GROUP BY event_type "
                "ORDER BY event_type",
                (D.T_ISO,),
            ).fetchall()
            for db in (a, b)
        ]
    finally:
        a.close()
        b.close()
    differ = sum(1 for x, y in zip(want, got) if x[1] != y[1] or abs(x[2] - y[2]) > 1e-12)
    log(
        f"rows: {len(want)} vs {len(got)}, differing in status or decay_score: {differ}; "
        f"events at T: floor {events[0]}, read-time {events[1]}"
    )
    D.drop(floor_copy)
    D.drop(read_copy)


if __name__ == "__main__":
    if sys.argv[1:2] == ["partial"]:
        partial(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    elif sys.argv[1:2] == ["readtime"]:
        readtime(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    elif sys.argv[1:2] == ["threshold"]:
        threshold()
    elif sys.argv[1:2] == ["head"]:
        head(int(sys.argv[2]) if len(sys.argv) > 2 else 5000)
    else:
        sys.exit(__doc__)
