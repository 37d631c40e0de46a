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

import os
import statistics

from . import datasets as D
from . import user_run  # the pass as issue 44's user ran it: a year on
from .pass_runs import (
    ARTICLE_CAP_S,
    LETHE_GOAL,
    agree,
    inproc_bare,
    inproc_lethe,
    run_article,
    run_bare,
    run_lethe,
    startup,
    with_scenes,
)


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
