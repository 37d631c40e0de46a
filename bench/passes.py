"""Pass benchmark: expiry + decay (with archiving) at N rows, three ways.

For each N, on fresh copies of one cached article-format database:

* adopt   - the first open of an article database by the engine (migrations, FTS
            rebuild, rank refresh), in-process, on its own copy. That copy becomes the
            cached adopted database the other Lethe measurements copy from.
* lethe   - the whole process `lethe run --db COPY --policy policies/lifecycle.yaml
            --pass expiry --pass decay --now T` on an adopted copy.
* floor   - the whole process `python bench/bare_sql.py COPY T --article`: the same
            three rules as hand-written SQL in one transaction on an un-adopted copy of
            the article's own file (no stored rank, no index): the goal's baseline.
* as lethe - the whole process `python bench/bare_sql.py COPY T --article --as-lethe`: the
            floor's statements as any `lethe run` must run them, on an un-adopted copy in
            WAL mode (the journal that lets recalls read during a pass), after importing
            click and yaml (the CLI, and the format of the policy it reads). What is left
            of the goal for Lethe's own work.
* design  - the whole process `python bench/bare_sql.py COPY T --as-lethe --design` on an
            adopted copy in WAL mode: Lethe's design with none of its code (the statements
            that keep the stored rank, recall's index dropped before the decay and created
            again after it, in one transaction; `--head` instead, the index left in place,
            when the store keeps it over the head of the ranking only: engine.store.sqlite.recall_head),
            after importing click and yaml (the CLI and the policy's format). Its ratio to
            the floor is what any code with this design and these packages would pay.
* design, no packages - the same, without `--as-lethe`: the design's statements on the
            same WAL copy, importing no package (no click, no yaml): what a `lethe run` of
            this design would cost if its start-up were nothing but Python and SQLite.
* scenes  - `lethe run` as above on an adopted copy whose memories have scenes, in an order
            of their own (the (namespace, scene) index then lists rows out of id order).
* bare    - the whole process `python bench/bare_sql.py COPY T`: the same statements
            plus the stored rank, on an adopted copy (same indexes as Lethe's).
* article - the article's per-row loop (bench.seed_article.article_expiry +
            article_decay) in-process on a raw (not adopted) copy, skipped when it
            would take more than ARTICLE_CAP_S.
* in-process - the same two, without process start, imports, policy load and open:
            Memory.run(["expiry", "decay"]) vs bare_sql.run, each + close (supplementary:
            shows what the process-level ratio is made of).
* startup - `lethe --version` vs `python -c pass`: the fixed cost of a process that
            imports the engine, which dominates at small N.
* a year on - bench/user_run.py: a file adopted by `lethe run --pass expiry` as a user
            does, the pass a year after the data was made, against the floor then.

Then checks that all of them agree: status and event counts, and every row's status,
decay_score and rank (to 1e-9) and every archived or expired event, none of them twice.
"""

from __future__ import annotations

import json
import os
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
def bench(sizes, repeat: int | None = None, log=print) -> tuple[list[dict], list[str]]:
    """Returns (table rows, problems)."""
    rows: list[dict] = []
    problems: list[str] = []
    rate = None  # article loop seconds per row, from the last size it ran at

    s_lethe, s_bare = startup()
    rows.append(
        dict(
            measure="process startup (s)",
            n="-",
            value=s_lethe,
            baseline=s_bare,
            note="lethe --version vs python -c 'import sqlite3'",
        )
    )

    for n in sizes:
        reps = repeat or (5 if n <= 100_000 else 2)
        log(f"passes at N={D.label(n)} ({reps} run{'s' if reps > 1 else ''} each)")
        raw = D.raw(n, log)

        copy = D.work_copy(raw, "adopt")
        t_adopt = D.adopt(copy)
        base = D.keep_adopted(n, copy)
        log(f"  adopt {t_adopt:.2f} s")
        rows.append(
            dict(
                measure="adopt article db (s)",
                n=n,
                value=t_adopt,
                baseline=None,
                note="in-process Memory() open: migrations, FTS rebuild, rank refresh",
            )
        )

        scened = with_scenes(base)
        lethe_t, bare_t, floor_t, wal_t, scene_t, des_t, nop_t = [], [], [], [], [], [], []
        for r in range(reps):  # interleaved, each on a fresh copy
            lc = D.work_copy(base, "lethe")
            t, lethe_counts = run_lethe(lc)
            lethe_t.append(t)
            fc = D.work_copy(raw, "floor")
            t, floor_counts = run_bare(fc, article=True)
            floor_t.append(t)
            wc = D.work_copy(raw, "as-lethe")
            t, wal_counts = run_bare(wc, article=True, as_lethe=True)
            wal_t.append(t)
            sc = D.work_copy(scened, "scenes")
            t, scene_counts = run_lethe(sc)
            scene_t.append(t)
            dc = D.work_copy(base, "design")
            t, des_counts = run_bare(dc, as_lethe=True, design=True)
            des_t.append(t)
            nc = D.work_copy(base, "design-bare")
            t, nop_counts = run_bare(nc, design=True)
            nop_t.append(t)
            bc = D.work_copy(base, "bare")
            t, bare_counts = run_bare(bc)
            bare_t.append(t)
            if r < reps - 1:
                for p in (lc, bc, fc, wc, sc, dc, nc):
                    D.drop(p)
        D.drop(scened)
        t_l, t_b, t_f, t_w, t_s, t_d, t_n = (
            statistics.median(x) for x in (lethe_t, bare_t, floor_t, wal_t, scene_t, des_t, nop_t)
        )
        show = lambda xs: ", ".join(f"{x:.3f}" for x in xs)  # noqa: E731
        log(
            f"  lethe {t_l:.3f} s, bare SQL on the article's file {t_f:.3f} s, on the adopted "
            f"file {t_b:.3f} s  (runs: {show(lethe_t)} / {show(floor_t)} / {show(bare_t)}; "
            f"load {_load()})"
        )
        rows.append(
            dict(
                measure="pass: lethe / bare SQL, article's file (s)",
                n=n,
                value=t_l,
                baseline=t_f,
                goal=LETHE_GOAL,
                note="whole processes, expiry+decay; baseline: the same three rules as "
                "bare SQL on an un-adopted copy of the article's file",
            )
        )
        log(
            f"  the floor as lethe run must run it (WAL, click, yaml) {t_w:.3f} s; lethe with scenes "
            f"{t_s:.3f} s  (runs: {show(wal_t)} / {show(scene_t)})"
        )
        rows.append(
            dict(
                measure="floor as lethe run must: WAL, click, yaml / floor (s)",
                n=n,
                value=t_w,
                baseline=t_f,
                goal=LETHE_GOAL,
                informative=True,
                note="the floor's statements in WAL mode after importing click and yaml: "
                "what any `lethe run` pays; 1.5x minus this ratio is what the "
                "goal leaves for Lethe's own work",
            )
        )
        rows.append(
            dict(
                measure="pass: lethe / floor as lethe run must (s)",
                n=n,
                value=t_l,
                baseline=t_w,
                informative=True,
                note="Lethe's own cost over the floor it cannot avoid",
            )
        )
        log(
            f"  Lethe's design in bare SQL, with its packages (stored rank, recall's index "
            f"rebuilt or, over the head only, kept; WAL, click, yaml) {t_d:.3f} s  "
            f"(runs: {show(des_t)})"
        )
        rows.append(
            dict(
                measure="design in bare SQL, packages loaded / floor (s)",
                n=n,
                value=t_d,
                baseline=t_f,
                goal=LETHE_GOAL,
                informative=True,
                note="the stored rank and recall's index rebuilt in one transaction "
                "(kept in place when it holds only the head of the ranking), "
                "WAL, after importing click and yaml, no engine code: "
                "what this design and these packages cost whoever writes them",
            )
        )
        log(f"  the same design with no package imported (WAL) {t_n:.3f} s  (runs: {show(nop_t)})")
        rows.append(
            dict(
                measure="design in bare SQL, no packages / floor (s)",
                n=n,
                value=t_n,
                baseline=t_f,
                goal=LETHE_GOAL,
                informative=True,
                note="the design's statements on the same WAL copy, importing neither "
                "click nor yaml: what a `lethe run` of this design could reach "
                "if its start-up loaded neither its CLI nor its policy's format",
            )
        )
        rows.append(
            dict(
                measure="pass: lethe / design in bare SQL (s)",
                n=n,
                value=t_l,
                baseline=t_d,
                informative=True,
                note="what Lethe's code costs over its design's own floor",
            )
        )
        rows.append(
            dict(
                measure="pass with scenes set / without (s)",
                n=n,
                value=t_s,
                baseline=t_l,
                goal=LETHE_GOAL,
                informative=True,
                note="lethe run on an adopted copy whose memories have scenes",
            )
        )
        rows.append(
            dict(
                measure="pass: lethe / bare SQL, adopted file (s)",
                n=n,
                value=t_l,
                baseline=t_b,
                goal=LETHE_GOAL,
                informative=True,
                note="whole processes, expiry+decay; baseline: bare SQL that also "
                "keeps the stored rank, on an adopted copy (Lethe's indexes)",
            )
        )

        in_l, in_b = [], []
        for _ in range(reps):
            c = D.work_copy(base, "lethe-inproc")
            in_l.append(inproc_lethe(c))
            D.drop(c)
            c = D.work_copy(base, "bare-inproc")
            in_b.append(inproc_bare(c))
            D.drop(c)
        i_l, i_b = statistics.median(in_l), statistics.median(in_b)
        log(f"  in-process: lethe {i_l:.3f} s, bare SQL {i_b:.3f} s")
        rows.append(
            dict(
                measure="pass in-process: lethe / bare (s)",
                n=n,
                value=i_l,
                baseline=i_b,
                goal=LETHE_GOAL,
                informative=True,
                note="Memory.run(expiry, decay) vs bare_sql.run, both + close; "
                "no process start, policy load or open",
            )
        )

        runs = {
            "lethe": (lc, lethe_counts),
            "bare": (bc, bare_counts),
            "floor": (fc, floor_counts),
            "as lethe": (wc, wal_counts),
            "scenes": (sc, scene_counts),
            "design": (dc, des_counts),
            "design, no packages": (nc, nop_counts),
        }
        estimate = rate * n if rate is not None else None
        if estimate is None and n > 100_000:
            estimate = _calibrate(log) * n
        ac = None
        if estimate is not None and estimate > ARTICLE_CAP_S:
            log(f"  article loop not run: estimated {estimate:.0f} s > {ARTICLE_CAP_S:.0f} s")
            rows.append(
                dict(
                    measure="pass: lethe vs article loop (s)",
                    n=n,
                    value=t_l,
                    baseline=None,
                    note=f"article loop not run (est. {estimate:.0f} s)",
                )
            )
        else:
            ac = D.work_copy(raw, "article")
            t_a, art_counts = run_article(ac)
            rate = t_a / n
            log(f"  article loop {t_a:.3f} s")
            runs["article"] = (ac, art_counts)
            rows.append(
                dict(
                    measure="pass: lethe vs article loop (s)",
                    n=n,
                    value=t_l,
                    baseline=t_a,
                    speedup=True,
                    note="article: in-process per-row loop on a raw (unindexed) copy",
                )
            )

        found = agree(n, runs)
        if found:
            problems += [f"passes N={D.label(n)}: {p}" for p in found]
        log(
            f"  agreement ({', '.join(runs)}; {lethe_counts['expired']} expired, "
            f"{lethe_counts['archived']} archived; every row and event compared): "
            f"{'OK' if not found else 'MISMATCH'}"
        )
        rows.append(
            dict(
                measure="pass: results agree",
                n=n,
                value="yes" if not found else "NO",
                baseline=None,
                check=not found,
                note=f"{lethe_counts['expired']} expired, {lethe_counts['archived']} "
                f"archived; {', '.join(runs)}: status, decay_score and rank of "
                "every row, each archived or expired event, none twice",
            )
        )
        for p in (lc, bc, fc, wc, sc, dc, nc, ac):
            if p is not None:
                D.drop(p)
        from . import user_run  # the pass as issue 44's user ran it: a year on

        more, found = user_run.bench(n, raw, reps, log)
        rows += more
        problems += found
    return rows, problems


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _calibrate(log) -> float:
    """Seconds per row of the article loop, measured on the 10k database."""
    n = 10_000
    copy = D.work_copy(D.raw(n, log), "calibrate")
    try:
        return run_article(copy)[0] / n
    finally:
        D.drop(copy)
