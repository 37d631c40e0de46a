"""Judgment quality on a labelled set: how often the judges get it right, per judge.

    python -m bench.judges                      # every mode that is installed (make bench-judges)
    python -m bench.judges --mode rules         # rules only
    python -m bench.judges --failures dev       # list what went wrong on the dev split
    python -m bench.judges --results            # also rewrite the section in bench/RESULTS.md

Every case runs through the public API, offline, in a fresh database: `remember()` for
gate, expiry and confidence; stored memories plus `remember()` for contradiction (with the
shared background memories beside the case's own); a turn the gate drops is stored with
`add()` instead, so a gate miss counts once, under gate; `recall()` over a profile for the
must-picks; a compression pass (`run(["compression"])`) for clusters. Modes: `rules`
(policy `lifecycle`, rules judges only) and `rules+local` (policy `lifecycle-local`: the
same rules judges with a local embedding model, when the `local` extra is installed).
Baselines beside them: plain FTS5 BM25 top-6 for recall, and "never supersede" for
contradiction. The cases are in bench/judges_cases.yaml.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from engine import FixedClock, Memory
from engine.base.text import fts_query

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).with_name("judges_cases.yaml")
RESULTS = Path(__file__).with_name("RESULTS.md")
MODES = {"rules": "lifecycle", "rules+local": "lifecycle-local"}
START = "2026-03-02T09:00:00"
TOP_N = 6
BANDS = {"sure": (0.9, 1.0), "hedged": (0.45, 0.75), "doubtful": (0.0, 0.35)}
SECTION = "## Judgment quality (bench/judges.py)"


@dataclass
class Outcome:
    """One judged case: right or not, and what to show when it is not."""

    judge: str
    split: str
    right: bool
    label: str
    got: object = None
    want: object = None


@dataclass
class Score:
    outcomes: list[Outcome] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)  # precision, recall, ... inputs

    def add(self, key: str, n: float = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


class Run:
    """Fresh databases for one mode, each in its own file under a temporary folder."""

    def __init__(self, policy: str, folder: str):
        self.policy, self.folder, self.n = policy, folder, 0

    def memory(self, start: str = START) -> Memory:
        self.n += 1
        return Memory(
            os.path.join(self.folder, f"case{self.n}.db"),
            policy=self.policy,
            offline=True,
            clock=FixedClock(start),
        )


def _split(case: dict, default: str = "dev") -> str:
    return case.get("split", default)


# ---- one judge at a time ---------------------------------------------------------------
def gate(run: Run, cases: list[dict], score: Score) -> None:
    for c in cases:
        with run.memory() as mem:
            written = mem.remember(c["user"], "Noted.")
            kept = " ".join(mem.get(i).content for i in written.stored).lower()
        saved = bool(written)
        # `keeps`: words of a fact inside a longer turn that some stored memory must carry
        missing = [w for w in c.get("keeps", ()) if w.lower() not in kept]
        score.outcomes.append(
            Outcome(
                "gate",
                _split(c),
                saved == c["save"] and not missing,
                c["user"],
                f"{saved} {kept!r}" if missing else saved,
                c["save"],
            )
        )


def _judged(mem: Memory, user: str):
    """The memory a turn became; a turn the gate drops is stored through add() instead,
    so that a gate miss counts once, under gate, and this judge is still measured."""
    written = mem.remember(user, "Noted.")
    return mem.get(written.stored[0] if written.stored else mem.add(user))


def expiry(run: Run, cases: list[dict], score: Score) -> None:
    for c in cases:
        with run.memory(f"{c['today']}T09:00:00") as mem:
            at = _judged(mem, c["user"]).expires_at
            got = at[:10] if at else None
        want = c["expires"].isoformat() if c["expires"] else None
        score.outcomes.append(Outcome("expiry", _split(c), got == want, c["user"], got, want))


def confidence(run: Run, cases: list[dict], score: Score) -> None:
    for c in cases:
        with run.memory() as mem:
            got = _judged(mem, c["user"]).confidence
        lo, hi = BANDS[c["expect"]]
        right = lo <= got <= hi
        score.outcomes.append(Outcome("confidence", _split(c), right, c["user"], got, c["expect"]))


def contradiction(run: Run, cases: list[dict], background: list[str], score: Score) -> None:
    for c in cases:
        with run.memory() as mem:
            for text in background:
                mem.add(text, judged=False)
            olds = [mem.add(text, judged=False) for text in c["old"]]
            _judged(mem, c["new"])
            gone = {r.id for r in mem.memories("superseded", limit=1000)}
        want = {olds[i] for i in c["supersedes"]}
        got = gone
        score.add("tp", len(got & want))
        score.add("fp", len(got - want))
        score.add("fn", len(want - got))
        score.outcomes.append(
            Outcome(
                "contradiction",
                _split(c),
                got == want,
                f"[{c['class']}] {c['old'][0]} -> {c['new']}",
                sorted(got),
                sorted(want),
            )
        )


def never_supersede(cases: list[dict], score: Score) -> None:
    """The baseline: a judge that keeps every old memory."""
    for c in cases:
        score.add("fn", len(c["supersedes"]))
        score.outcomes.append(Outcome("contradiction", _split(c), not c["supersedes"], c["new"]))


def recall(run: Run, profiles: list[dict], score: Score) -> None:
    for p in profiles:
        with run.memory() as mem:
            ids = [mem.add(text, judged=False) for text in p["memories"]]
            for q in p["queries"]:
                picked = [r.id for r in mem.recall(q["q"], top_n=TOP_N)]
                _score_pick(score, p, q, [ids.index(i) for i in picked])


def bm25(profiles: list[dict], score: Score) -> None:
    """The baseline: FTS5 bm25 (porter) over the profile, the query's words OR-ed, top 6."""
    for p in profiles:
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE m USING fts5(content, tokenize='porter unicode61')")
        db.executemany("INSERT INTO m(rowid, content) VALUES (?, ?)", list(enumerate(p["memories"])))
        for q in p["queries"]:
            query = fts_query(q["q"], content_words=True)
            rows = (
                db.execute(
                    "SELECT rowid FROM m WHERE m MATCH ? ORDER BY bm25(m) LIMIT ?", (query, TOP_N)
                ).fetchall()
                if query
                else []
            )
            _score_pick(score, p, q, [r[0] for r in rows])
        db.close()


def _score_pick(score: Score, profile: dict, q: dict, picked: list[int]) -> None:
    must = set(q["must"])
    score.add("must", len(must))
    score.add("hit", len(must & set(picked)))
    score.add("picked", len(picked))
    score.outcomes.append(
        Outcome(
            "recall",
            _split(q, _split(profile)),
            must <= set(picked),
            f"[{q['class']}] {q['q']}",
            [profile["memories"][i][:50] for i in picked],
            [profile["memories"][i] for i in sorted(must)],
        )
    )


def clusters(run: Run, scenarios: list[dict], score: Score) -> None:
    for s in scenarios:
        with run.memory() as mem:
            ids = [mem.add(text, judged=False) for text in s["memories"]]
            mem.run(["compression"])
            into = {i: mem.get(mid).merged_into for i, mid in enumerate(ids)}
        merged = {
            (a, b)
            for a, b in itertools.combinations(range(len(ids)), 2)
            if into[a] is not None and into[a] == into[b]
        }
        gold = {pair for g in s["groups"] for pair in itertools.combinations(sorted(g), 2)}
        score.add("pairs", len(gold))
        score.add("found", len(gold & merged))
        score.add("wrong", len(merged - gold))
        grouped = {i for g in s["groups"] for i in g}
        split = _split(s)
        for g in s["groups"]:
            mine = {into[i] for i in g}
            whole = (
                len(mine) == 1 and None not in mine and {i for i, t in into.items() if t in mine} == set(g)
            )
            score.outcomes.append(
                Outcome(
                    "cluster", split, whole, " | ".join(s["memories"][i] for i in g), [into[i] for i in g]
                )
            )
        for i in sorted(set(range(len(ids))) - grouped):
            score.outcomes.append(Outcome("cluster", split, into[i] is None, s["memories"][i], into[i], None))


# ---- the report ------------------------------------------------------------------------
JUDGES = ("gate", "expiry", "confidence", "contradiction", "recall", "cluster")


def evaluate(mode: str, data: dict) -> dict[str, Score]:
    scores = {j: Score() for j in JUDGES}
    with tempfile.TemporaryDirectory(prefix="lethe-judges-") as folder:
        run = Run(MODES[mode], folder)
        gate(run, data["gate"], scores["gate"])
        expiry(run, data["expiry"], scores["expiry"])
        confidence(run, data["confidence"], scores["confidence"])
        contradiction(run, data["contradiction"], data["background"], scores["contradiction"])
        recall(run, data["recall"], scores["recall"])
        clusters(run, data["clusters"], scores["cluster"])
    return scores


def baselines(data: dict) -> dict[str, Score]:
    out = {"contradiction": Score(), "recall": Score()}
    never_supersede(data["contradiction"], out["contradiction"])
    bm25(data["recall"], out["recall"])
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def _right(outcomes: list[Outcome], split: str | None = None) -> tuple[int, int]:
    chosen = [o for o in outcomes if split is None or o.split == split]
    return sum(o.right for o in chosen), len(chosen)


def detail(judge: str, s: Score) -> str:
    c = s.counts
    if judge == "contradiction":
        tp, fp, fn = c.get("tp", 0), c.get("fp", 0), c.get("fn", 0)
        return (
            f"precision {_ratio(tp, tp + fp)}, recall {_ratio(tp, tp + fn)} "
            f"({int(tp)} of {int(tp + fn)} replacements caught, {int(fp)} wrong)"
        )
    if judge == "recall":
        return (
            f"must-pick {_ratio(c.get('hit', 0), c.get('must', 0))} "
            f"({int(c.get('hit', 0))} of {int(c.get('must', 0))})"
        )
    if judge == "cluster":
        return (
            f"pair recall {_ratio(c.get('found', 0), c.get('pairs', 0))} "
            f"({int(c.get('found', 0))} of {int(c.get('pairs', 0))} pairs), "
            f"{int(c.get('wrong', 0))} wrong merges"
        )
    return ""


def table(results: dict[str, dict[str, Score]]) -> str:
    header = "| judge | " + " | ".join(results) + " |"
    lines = [header, "|---" * (len(results) + 1) + "|"]
    for judge in (*JUDGES, "overall"):
        cells = []
        for scores in results.values():
            if judge == "overall":
                outcomes = (
                    [o for s in scores.values() for o in s.outcomes] if len(scores) == len(JUDGES) else []
                )
            elif judge in scores:
                outcomes = scores[judge].outcomes
            else:
                cells.append("")
                continue
            if not outcomes:
                cells.append("")
                continue
            right, n = _right(outcomes)
            dev, held = _right(outcomes, "dev"), _right(outcomes, "held")
            extra = detail(judge, scores[judge]) if judge != "overall" else ""
            cells.append(
                f"**{right / n:.1%}** ({right}/{n}; dev {dev[0]}/{dev[1]}, "
                f"held {held[0]}/{held[1]})" + (f"<br>{extra}" if extra else "")
            )
        lines.append(f"| {judge} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failures(results: dict[str, dict[str, Score]], split: str) -> str:
    out = []
    for mode, scores in results.items():
        for judge, s in scores.items():
            for o in s.outcomes:
                if not o.right and (split == "all" or o.split == split):
                    out.append(f"{mode:12} {judge:13} {o.label}\n{'':27}got {o.got!r} want {o.want!r}")
    return "\n".join(out)


def local_available() -> bool:
    try:
        import sentence_transformers  # noqa: F401
        import sqlite_vec  # noqa: F401
    except ImportError:
        return False
    return True


def write_results(text: str) -> None:
    """Replace (or append) this benchmark's section of bench/RESULTS.md."""
    doc = RESULTS.read_text(encoding="utf-8")
    head, found, rest = doc.partition(SECTION)
    if found:
        # the table is replaced; the notes under it (### subsections) and later sections stay
        ends = [i for i in (rest.find("\n## "), rest.find("\n### ")) if i >= 0]
        rest = rest[min(ends) + 1 :] if ends else ""
        doc = head + text + ("\n" + rest if rest else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(doc, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.judges", description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=(*MODES, "all"), default="all")
    ap.add_argument(
        "--failures", choices=("dev", "held", "all"), default=None, help="list the cases judged wrong"
    )
    ap.add_argument("--results", action="store_true", help="rewrite the section in RESULTS.md")
    ap.add_argument(
        "--cases",
        type=Path,
        default=CASES,
        help="the labelled set (default bench/judges_cases.yaml; a held-out one: bench/judges_holdout.yaml)",
    )
    args = ap.parse_args(argv)
    data = yaml.safe_load(args.cases.read_text(encoding="utf-8"))
    modes = list(MODES) if args.mode == "all" else [args.mode]
    if "rules+local" in modes and not local_available():
        print("rules+local: skipped (the `local` extra is not installed)", file=sys.stderr)
        modes.remove("rules+local")
    t0 = time.perf_counter()
    results = {m: evaluate(m, data) for m in modes}
    results["baseline"] = baselines(data)
    elapsed = time.perf_counter() - t0
    n = sum(len(s.outcomes) for s in next(iter(results.values())).values())
    text = (
        f"{SECTION}\n\n{n} labelled cases ({args.cases.name}), each judged through the "
        f"public API offline; `dev` cases were read while improving the judges, `held` "
        f"ones were not. Baselines: never supersede (contradiction), FTS5 BM25 top-{TOP_N} "
        f"(recall). Run on {dt.date.today().isoformat()} in {elapsed:.0f} s.\n\n" + table(results) + "\n"
    )
    print(text)
    if args.failures:
        print(failures({m: r for m, r in results.items() if m != "baseline"}, args.failures))
    if args.results and args.cases == CASES:
        write_results(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
