"""The pass as a user runs it (issue 44), beside the floor, in the same run.

`bench/passes.py` times `lethe run --pass expiry --pass decay` at T, one day after the
article generator's `now`, on a copy adopted in-process. A user (issue 44) adopted the
article's file with `lethe run --db F --pass expiry --now 2020-01-01T00:00:00` (then a WAL
checkpoint) and timed the pass at 2026-06-01T12:00:00, a year after the data was made.
Measured side by side (bench/RESULTS.md, "1.35x or 2.05x"), the way the file was adopted
changes nothing; the day does: a year on, 68% of the active memories fall under the
archive threshold (680,739 archived at 1M, against 315,526 at T), and each of those rows
moves out of the store's indexes on status (recall's, `memories_active`,
`memories_expiry`) and gets an event, where the article's file has no index at all.

This row adopts a copy as the user did and times the user's command against the floor
(bench/bare_sql.py --article) at the same `now`, interleaved, each on a fresh copy, and
checks that both leave every row and event alike.

The next day (issue 44's "a second pass one day after the first"): the same two commands
again, one day later, on the files the first left, timed and compared the same way. Few
rows cross a threshold that day (none a year on: what is left active has an access bonus
that keeps it above the archive threshold), so a pass that cost what changes would cost
little; the goal is 0.25x the floor.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import statistics
from pathlib import Path

from . import datasets as D
from .pass_runs import _lethe_cmd, _timed, agree, run_bare, run_lethe

ADOPT_NOW = "2020-01-01T00:00:00"  # the user's adopting run: before any row expires
USER_NOW = "2026-06-01T12:00:00"  # the user's timed pass: a year after the data was made
NEXT_NOW = (dt.datetime.fromisoformat(USER_NOW) + dt.timedelta(days=1)).isoformat(timespec="seconds")
USER_GOAL = 1.0  # issue 44: the pass a year on, at most the floor
NEXT_GOAL = 0.25  # issue 44: the next day's pass, at most a quarter of the floor's


def adopted_as_a_user(raw: Path) -> tuple[Path, float]:
    """A copy of `raw` adopted by `lethe run --pass expiry` (no policy given) at ADOPT_NOW,
    then checkpointed so its WAL is empty: a file to copy. Returns (path, seconds)."""
    copy = D.work_copy(raw, "user-adopting")
    secs, _ = _timed(_lethe_cmd() + ["run", "--db", str(copy), "--pass", "expiry", "--now", ADOPT_NOW])
    conn = sqlite3.connect(str(copy))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = WAL")  # kept: the store's journal
    finally:
        conn.close()
    base = D.work_copy(copy, "user-adopted")
    D.drop(copy)
    return base, secs


def bench(n: int, raw: Path, reps: int, log=print) -> tuple[list[dict], list[str]]:
    """(table rows, problems) for the pass a year on, on a file adopted as a user does."""
    base, t_adopt = adopted_as_a_user(raw)
    lethe_t, floor_t, lethe_n, floor_n = [], [], [], []
    for r in range(reps):  # interleaved, each on a fresh copy
        lc = D.work_copy(base, "user-lethe")
        t, lethe_counts = run_lethe(lc, USER_NOW)
        lethe_t.append(t)
        fc = D.work_copy(raw, "user-floor")
        t, floor_counts = run_bare(fc, article=True, now=USER_NOW)
        floor_t.append(t)
        if r == reps - 1:  # compared before the next day changes them
            found = agree(n, {"lethe": (lc, lethe_counts), "floor": (fc, floor_counts)})
        t, lethe_next = run_lethe(lc, NEXT_NOW)
        lethe_n.append(t)
        t, floor_next = run_bare(fc, article=True, now=NEXT_NOW)
        floor_n.append(t)
        if r < reps - 1:
            D.drop(lc)
            D.drop(fc)
    t_l, t_f = statistics.median(lethe_t), statistics.median(floor_t)
    n_l, n_f = statistics.median(lethe_n), statistics.median(floor_n)
    found_next = agree(n, {"lethe": (lc, lethe_next), "floor": (fc, floor_next)})
    conn = sqlite3.connect(str(fc))
    try:  # the active rows the next day's pass read
        active = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
    finally:
        conn.close()
    crossed = lethe_next["expired"] + lethe_next["archived"]
    active += crossed
    for p in (lc, fc, base):
        D.drop(p)
    show = lambda xs: ", ".join(f"{x:.3f}" for x in xs)  # noqa: E731
    log(
        f"  as a user runs it (adopted by `lethe run --pass expiry --now {ADOPT_NOW}` in "
        f"{t_adopt:.2f} s; the pass at {USER_NOW}): lethe {t_l:.3f} s, floor {t_f:.3f} s "
        f"(runs: {show(lethe_t)} / {show(floor_t)}); {lethe_counts['archived']} archived; "
        f"agreement {'OK' if not found else 'MISMATCH'}; the next day ({NEXT_NOW}): lethe "
        f"{n_l:.3f} s, floor {n_f:.3f} s (runs: {show(lethe_n)} / {show(floor_n)}); {crossed} of "
        f"{active} active rows crossed a threshold; agreement {'OK' if not found_next else 'MISMATCH'}"
    )
    rows = [
        dict(
            measure="pass a year on, adopted by lethe run / floor (s)",
            n=n,
            value=t_l,
            baseline=t_f,
            goal=USER_GOAL,
            note=f"issue 44's command: a file adopted by `lethe run --pass expiry --now "
            f"{ADOPT_NOW}`, the pass at {USER_NOW} ({lethe_counts['archived']} archived); "
            "baseline: the floor at the same now; results compared row by row",
        ),
        dict(
            measure="pass a year on: results agree",
            n=n,
            value="yes" if not found else "NO",
            baseline=None,
            check=not found,
            note="lethe and the floor a year on: every row's status, decay_score, rank, every event",
        ),
        dict(
            measure="the next day's pass / floor (s)",
            n=n,
            value=n_l,
            baseline=n_f,
            goal=NEXT_GOAL,
            note=f"the same commands at {NEXT_NOW} on the files the pass a year on left: "
            f"{crossed} of {active} active rows crossed a threshold ({100 * crossed / max(active, 1):.2f}%)",
        ),
        dict(
            measure="the next day: results agree",
            n=n,
            value="yes" if not found_next else "NO",
            baseline=None,
            check=not found_next,
            note="lethe and the floor after the next day's pass: every row's status, decay_score, "
            "rank, every event",
        ),
    ]
    problems = [f"passes a year on N={D.label(n)}: {p}" for p in found]
    return rows, problems + [f"the next day's pass N={D.label(n)}: {p}" for p in found_next]
