"""Recall benchmark: `Memory.candidates()` latency on adopted databases of N rows.

Median and p99 over CALLS in-process calls (after a short warm-up), against the
article's full-scan query (bench.seed_article.article_recall_candidates) on the same
rows - run on the raw article file, where it is a plain table scan - which must return
the same ids in the same order. Goals: median at most 1 ms at every N (the performance
issue's, at 1M; the first brief asked 5 ms), and flat: the median at N at most FLAT_GOAL
times the median at the smallest N measured.
"""

from __future__ import annotations

import functools
import math
import sqlite3
import statistics
import time

from tests.helpers import context_of

from . import datasets as D
from .seed_article import article_recall_candidates

CALLS = 200
# recall's best full-text matches (engine/run/recall.py, text_matches): questions whose words
# range from names in thousands of rows to ids in one, so that the words' counting and the
# ranking of their matches both run up to their budget
MATCH_QUERIES = (
    "Who am I blocked on for the search index, Chen?",
    "Which bug was fixed by pinning Polars, was it #1234?",
    "What did I say about #4321 and #98765?",
    "Never use Vim in the study tracker, right?",
    "When is the deadline for the CLI release?",
)
MATCH_GOAL_MS = 20.0  # a write's full-text candidates have the same goal (bench/neighbours.py)
MEDIAN_GOAL_MS = 1.0
FLAT_GOAL = 2.0
BASELINE_BUDGET_S = 5.0  # the full scan gets at most CALLS calls or this much time


def _p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


def _time_calls(fn, calls: int, budget: float | None = None, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out: list[float] = []
    start = time.perf_counter()
    while len(out) < calls:
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
        if budget is not None and len(out) >= 5 and time.perf_counter() - start > budget:
            break
    return out


def _text_matches(mem, query: str) -> list:
    from engine.run import recall

    return recall.text_matches(context_of(mem), query, [])


def bench(sizes, calls: int = CALLS, log=print) -> tuple[list[dict], list[str]]:
    from engine import FixedClock, Memory

    rows: list[dict] = []
    problems: list[str] = []
    first_median = None
    for n in sizes:
        path = D.adopted(n, log)
        mem = Memory(str(path), policy=str(D.POLICY), clock=FixedClock(D.T))
        # The article's query runs on the article's own (raw) file: same rows and ids, no
        # engine indexes. (On the adopted file SQLite picks a slower scan of the
        # memories_recall index for it, which would flatter Lethe.)
        conn = sqlite3.connect(str(D.raw(n, log)))
        try:
            limit = mem.policy.recall.candidates.limit
            lethe = _time_calls(mem.candidates, calls)
            base = _time_calls(
                functools.partial(article_recall_candidates, conn, limit),
                calls,
                budget=BASELINE_BUDGET_S,
                warmup=1,
            )
            matches = _time_calls(
                lambda m=mem: [_text_matches(m, q) for q in MATCH_QUERIES], max(10, calls // 10)
            )
            ids_lethe = [r.id for r in mem.candidates()]
            ids_base = article_recall_candidates(conn, limit)
        finally:
            conn.close()
            mem.close()

        med, p99 = statistics.median(lethe) * 1e3, _p99(lethe) * 1e3
        bmed, bp99 = statistics.median(base) * 1e3, _p99(base) * 1e3
        same = ids_lethe == ids_base and len(ids_lethe) == limit
        log(
            f"recall at N={D.label(n)}: median {med:.3f} ms, p99 {p99:.3f} ms "
            f"({len(lethe)} calls); full scan median {bmed:.2f} ms ({len(base)} calls); "
            f"same ids: {same}"
        )
        if not same:
            problems.append(
                f"recall N={D.label(n)}: candidates() ids differ from the full scan "
                f"({ids_lethe[:5]}... vs {ids_base[:5]}...)"
            )
        rows.append(
            dict(
                measure="recall median (ms)",
                n=n,
                value=med,
                baseline=bmed,
                goal=MEDIAN_GOAL_MS,
                absolute_goal=True,
                speedup=True,
                note=f"{len(lethe)} calls of Memory.candidates() on the adopted db; "
                f"baseline: article full scan on the raw db, {len(base)} calls",
            )
        )
        rows.append(dict(measure="recall p99 (ms)", n=n, value=p99, baseline=bp99, speedup=True))
        per_query = [t * 1e3 / len(MATCH_QUERIES) for t in matches]
        log(f"recall's best matches at N={D.label(n)}: median {statistics.median(per_query):.3f} ms a query")
        rows.append(
            dict(
                measure="recall best full-text matches median (ms)",
                n=n,
                value=statistics.median(per_query),
                baseline=None,
                goal=MATCH_GOAL_MS,
                absolute_goal=True,
                note=f"text_matches() a query, mean of {len(MATCH_QUERIES)} questions; the budget bounds it",
            )
        )
        if first_median is None:
            first_median = (n, med)
        else:
            rows.append(
                dict(
                    measure=f"recall flat (median / at {D.label(first_median[0])})",
                    n=n,
                    value=med / first_median[1],
                    baseline=None,
                    goal=FLAT_GOAL,
                    absolute_goal=True,
                )
            )
        rows.append(
            dict(
                measure="recall: same ids as full scan",
                n=n,
                value="yes" if same else "NO",
                baseline=None,
                check=same,
                note=f"top {limit}, same order",
            )
        )
    return rows, problems
