"""The runs the pass benchmark times and compares: lethe and the bare statements as processes
and in process, the article's own loop, and the row-by-row agreement of their results
(bench/passes.py and bench/user_run.py use them)."""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import datasets as D
from .seed_article import article_decay, article_expiry

LETHE_GOAL = 1.5  # lethe process time / bare SQL process time
ARTICLE_CAP_S = 120.0  # do not run the article loop when it would take longer
TOL = 1e-9


def _lethe_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("lethe")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "engine.cli"]


def _timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=D.ROOT, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return secs, proc.stdout


def run_lethe(copy: Path, now: str = D.T_ISO) -> tuple[float, dict]:
    secs, out = _timed(
        _lethe_cmd()
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
            now,
            "--json",
        ]
    )
    res = {r["pass"]: r for r in json.loads(out)}
    return secs, {
        "expired": res["expiry"]["events"].get("expired", 0),
        "archived": res["decay"]["events"].get("archived", 0),
    }


def run_bare(
    copy: Path, article: bool = False, as_lethe: bool = False, design: bool = False, now: str = D.T_ISO
) -> tuple[float, dict]:
    headed = False
    if as_lethe or design:  # the store's journal, switched before the clock starts
        conn = sqlite3.connect(str(copy))
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            if design:  # recall's index over the head only (engine.store.sqlite.recall_head): kept in place
                headed = conn.execute("SELECT floor FROM recall_head").fetchone()[0] is not None
        finally:
            conn.close()
    secs, out = _timed(
        [
            sys.executable,
            str(D.ROOT / "bench" / "bare_sql.py"),
            str(copy),
            now,
            *(["--article"] if article else []),
            *(["--as-lethe"] if as_lethe else []),
            *([("--head" if headed else "--design")] if design else []),
        ]
    )
    c = json.loads(out)
    return secs, {"expired": c["expired"], "archived": c["archived"]}


def inproc_lethe(copy: Path) -> float:
    """The pass alone: Memory.run(expiry, decay) + close, on an adopted copy opened first."""
    from engine import FixedClock, Memory

    mem = Memory(str(copy), policy=str(D.POLICY), clock=FixedClock(D.T))
    t0 = time.perf_counter()
    mem.run(["expiry", "decay"])
    mem.close()
    return time.perf_counter() - t0


def inproc_bare(copy: Path) -> float:
    """The hand-written statements alone (+ close), on a connection opened first."""
    from . import bare_sql

    db = bare_sql.connect(str(copy))
    t0 = time.perf_counter()
    bare_sql.run(db, D.T_ISO)
    db.close()
    return time.perf_counter() - t0


def run_article(copy: Path) -> tuple[float, dict]:
    conn = sqlite3.connect(str(copy))
    try:
        t0 = time.perf_counter()
        expired = article_expiry(conn, D.T)
        _, archived = article_decay(conn, D.T)
        secs = time.perf_counter() - t0
    finally:
        conn.close()
    return secs, {"expired": expired, "archived": archived}


def with_scenes(adopted: Path) -> Path:
    """A copy of an adopted file whose memories have scenes (97 of them, in an order of
    their own), closed cleanly and synced: the base the scenes row copies from."""
    path = D.work_copy(adopted, "scenes-base")
    conn = sqlite3.connect(str(path))
    try:
        conn.execute(
            "UPDATE memory_rows SET scene = 'scene-' || ((id * 7919) % 97)"
        )  # the rows' table (m020)
        conn.commit()
    finally:
        conn.close()
    synced = D.work_copy(path, "synced")
    D.drop(path)
    return synced


def startup() -> tuple[float, float]:
    """Median wall time of `lethe --version` and of `python -c pass` (5 runs each)."""
    lethe = [_timed(_lethe_cmd() + ["--version"])[0] for _ in range(5)]
    bare = [_timed([sys.executable, "-c", "import sqlite3, json"])[0] for _ in range(5)]
    return statistics.median(lethe), statistics.median(bare)


# -- agreement -------------------------------------------------------------------------
def _rank(conn: sqlite3.Connection, schema: str, row: str) -> str:
    """`row`'s stored rank, or (a file without one: the article's) what it would be."""
    cols = {r[1] for r in conn.execute(f"PRAGMA {schema}.table_info(memories)")}
    return f"{row}.rank" if "rank" in cols else f"{row}.importance * {row}.confidence * {row}.decay_score"


def _counts(conn: sqlite3.Connection, schema: str) -> dict:
    return {
        "status": dict(conn.execute(f"SELECT status, count(*) FROM {schema}.memories GROUP BY status")),
        "events": dict(
            conn.execute(f"SELECT event_type, count(*) FROM {schema}.memory_events GROUP BY event_type")
        ),
        # memories with more than one archived or expired event
        "twice": conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {schema}.memory_events "
            "WHERE event_type IN ('archived', 'expired') "
            "GROUP BY memory_id, event_type HAVING count(*) > 1)"
        ).fetchone()[0],
    }


def _differences(ref: Path, other: Path) -> tuple[int, int, list]:
    """Every row of `ref` against `other` by id (status, decay_score and rank to TOL, a row
    missing on either side counted), and the archived / expired events as (memory, kind)
    pairs one side has and the other not: (rows differing, events differing, examples)."""
    conn = sqlite3.connect(str(ref))
    try:
        conn.execute("ATTACH DATABASE ? AS o", (str(other),))
        ra, rb = _rank(conn, "main", "a"), _rank(conn, "o", "b")
        differ = (
            f"a.status IS NOT b.status OR NOT coalesce(abs(a.decay_score - b.decay_score) "
            f"<= :tol, a.decay_score IS b.decay_score) OR NOT coalesce(abs(({ra}) - ({rb})) "
            f"<= :tol, ({ra}) IS ({rb}))"
        )
        rows = conn.execute(
            f"SELECT a.id, a.status, a.decay_score, b.status, b.decay_score "
            f"FROM memories a LEFT JOIN o.memories b ON b.id = a.id "
            f"WHERE b.id IS NULL OR {differ}",
            {"tol": TOL},
        ).fetchall()
        missing = conn.execute(
            "SELECT count(*) FROM o.memories WHERE id NOT IN (SELECT id FROM main.memories)"
        ).fetchone()[0]
        pairs = "SELECT memory_id, event_type FROM {} WHERE event_type IN ('archived', 'expired')"
        events = conn.execute(
            f"SELECT * FROM ({pairs.format('main.memory_events')} EXCEPT "
            f"{pairs.format('o.memory_events')}) UNION ALL SELECT * FROM "
            f"({pairs.format('o.memory_events')} EXCEPT "
            f"{pairs.format('main.memory_events')})"
        ).fetchall()
        return len(rows) + missing, len(events), rows[:3] + events[:3]
    finally:
        conn.close()


def agree(n: int, runs: dict[str, tuple[Path, dict]]) -> list[str]:
    """Problems found comparing the runs' results (empty: they agree): the counts each
    reported, the status and event counts, no memory archived or expired twice, and every
    row and archived / expired event of each run against the first's."""
    problems = []
    names = list(runs)
    ref = names[0]
    counted = {}
    for name, (path, _) in runs.items():
        conn = sqlite3.connect(str(path))
        try:
            counted[name] = _counts(conn, "main")
        finally:
            conn.close()
        if counted[name]["twice"]:
            problems.append(f"{name}: {counted[name]['twice']} memories with two archived or expired events")
    for other in names[1:]:
        if runs[ref][1] != runs[other][1]:
            problems.append(f"{ref} counted {runs[ref][1]}, {other} counted {runs[other][1]}")
        for what in ("status", "events"):
            if counted[ref][what] != counted[other][what]:
                problems.append(
                    f"{what} counts differ: {ref} {counted[ref][what]} vs {other} {counted[other][what]}"
                )
        rows, events, examples = _differences(runs[ref][0], runs[other][0])
        if rows or events:
            problems.append(
                f"{rows} rows and {events} events differ between {ref} and {other} (of {n}), e.g. {examples}"
            )
    return problems


# -- the benchmark ---------------------------------------------------------------------
